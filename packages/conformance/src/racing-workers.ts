import type { Handler } from '@statusq/core';
import { FAST, type StartedWorker, type TestEnv } from './test-env.js';
import { withLatency } from './latency.js';
import { Ledger } from './rows.js';
import { deferred, withDeadline } from './waiting.js';

/**
 * `workers` workers on table `jobs`, each on a store of its own (every call yielding first, so claims interleave
 * even on a synchronous driver), each handler's job recorded in the ledger before `handler` sees it. All are
 * created before any claims, so as many race as asked; then they run until the table is empty, within
 * `deadlineMs`. Returns the ledger (who ran what, in order) and the workers, whose errors a case checks.
 */
export async function raceToEmpty(
  env: TestEnv,
  options: { workers: number; concurrency: number; deadlineMs: number; what: string; handler?: Handler },
): Promise<{ ledger: Ledger; workers: StartedWorker[] }> {
  const ledger = new Ledger();
  const go = deferred();
  const workers: StartedWorker[] = [];
  for (let i = 0; i < options.workers; i++) {
    const store = withLatency(await env.store(`worker store ${i + 1}`));
    const own = options.handler;
    const handler: Handler = async (job, ctx) => {
      ledger.record(job, ctx.workerId);
      const result = own ? await own(job, ctx) : undefined;
      await new Promise((resolve) => setImmediate(resolve));
      return result;
    };
    workers.push(await env.startWorker({ store, table: { table: 'jobs' }, concurrency: options.concurrency, exitWhenEmpty: true, ...FAST, handler }, undefined, undefined, go.promise));
  }
  go.resolve();
  await withDeadline(Promise.all(workers.map((w) => w.done)), options.deadlineMs, options.what);
  return { ledger, workers };
}
