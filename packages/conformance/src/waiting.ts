/** Waiting without sleeping in place of synchronisation: deadlines, deferreds, worker events, bounded polls. */
import type { Worker, WorkerEvents } from '@statusq/core';
import type { WorkerEventName } from '@statusq/core/tools';

// The bounded poll, the deadline and the delay are test-fixtures' (one copy for every harness); the suite's users
// get them from here too.
export { delay, waitFor, withDeadline } from '@statusq/test-fixtures';
import { withDeadline } from '@statusq/test-fixtures';

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** The next `name` event of a worker that passes `filter`, or a clear failure after `timeoutMs`. */
export function nextEvent<K extends WorkerEventName>(
  worker: Worker,
  name: K,
  options: { timeoutMs?: number; filter?: (event: WorkerEvents[K]) => boolean } = {},
): Promise<WorkerEvents[K]> {
  let off: () => void = () => undefined;
  const event = new Promise<WorkerEvents[K]>((resolve) => {
    off = worker.on(name, (e) => {
      if (options.filter && !options.filter(e)) return;
      off();
      resolve(e);
    });
  });
  return withDeadline(event, options.timeoutMs ?? 10_000, `worker event "${name}"`).finally(() => off());
}

/** Lets pending promise callbacks and I/O run (not a timing assumption: nothing is awaited by time). */
export function flushEventLoop(turns = 3): Promise<void> {
  return new Promise((resolve) => {
    const step = (n: number) => (n === 0 ? resolve() : setImmediate(() => step(n - 1)));
    step(turns);
  });
}
