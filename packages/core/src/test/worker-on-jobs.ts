/**
 * What the worker's unit tests share (worker.test.ts, worker.handlers.test.ts): one worker set-up on the sql.js
 * jobs table, so each case states only what it changes, and a gate that holds a handler until the test opens it.
 */
import { Worker } from '../worker/worker.js';
import type { WorkerOptions } from '../worker/worker-options.js';
import type { SqlJsStore } from './sqljs-store.js';

/** The jobs table's statuses, by id. */
export function statuses(s: SqlJsStore): Array<number | null> {
  return s.rows('SELECT status FROM jobs ORDER BY id').map((r) => r.status as number | null);
}

/** A worker on `s`'s jobs table: conditional-update claims, polling every 1 to 5 ms, a handler that does nothing; `options` override any of it. */
export function worker(s: SqlJsStore, options: Partial<WorkerOptions>): Promise<Worker> {
  return Worker.create({ store: s, table: { table: 'jobs' }, handler: () => undefined, claimStrategy: 'conditional-update', pollMinMs: 1, pollMaxMs: 5, ...options });
}

/** A promise and its resolver, for a handler the test releases. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
