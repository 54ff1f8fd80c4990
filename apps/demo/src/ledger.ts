import { setTimeout as delay } from 'node:timers/promises';
import type { Handler } from '@statusq/core';

/** One run of the handler: which row, which attempt the worker said it was, and which worker ran it. */
export interface Execution {
  id: number;
  attempt: number;
  worker: string;
}

/**
 * Every handler execution, in memory. The database only shows where each row ended; the ledger shows how
 * often each row was actually run, which is what proves no claim was handed to two workers.
 */
export class Ledger {
  readonly executions: Execution[] = [];

  record(execution: Execution): void {
    this.executions.push(execution);
  }

  countByWorker(worker: string): number {
    return this.executions.filter((e) => e.worker === worker).length;
  }

  /** Executions grouped by row id. */
  byId(): Map<number, Execution[]> {
    const map = new Map<number, Execution[]>();
    for (const e of this.executions) {
      const list = map.get(e.id);
      if (list) list.push(e);
      else map.set(e.id, [e]);
    }
    return map;
  }
}

/**
 * Wraps the fixture handler: records the execution before anything can fail, then waits 0-2 ms as a
 * stand-in for a network call, so the worker's slots actually overlap instead of running back to back.
 */
export function recordingHandler(inner: Handler, ledger: Ledger, worker: string): Handler {
  return async (job, ctx) => {
    ledger.record({ id: Number(job.id), attempt: job.attempt, worker });
    await delay(Math.floor(Math.random() * 3));
    return inner(job, ctx);
  };
}
