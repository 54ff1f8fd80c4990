/** Waiting without sleeping in place of synchronisation: deadlines, deferreds, worker events, bounded polls. */
import type { Worker, WorkerEventName, WorkerEvents } from '@statusq/core';

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

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

/** Rejects with a clear message if `promise` has not settled within `timeoutMs`. */
export async function withDeadline<T>(promise: Promise<T>, timeoutMs: number, what: string | (() => string)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms: ${typeof what === 'string' ? what : what()}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Polls `check` until it returns something other than false/undefined/null, and returns that. Fails with
 * `what` and the last value seen once `timeoutMs` has passed. For state that only time changes (leases,
 * backoff), never as a stand-in for an event.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | false | null | undefined> | T | false | null | undefined,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 10;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    const value = await check();
    if (value !== false && value !== null && value !== undefined) return value;
    last = value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last check: ${String(last)})`);
    await delay(intervalMs);
  }
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
