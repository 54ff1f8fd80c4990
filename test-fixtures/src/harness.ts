/**
 * What every test harness of statusq needs and the published `testing` entries use at run time: a free port for
 * a private server, a bounded poll, a deadline on a promise, and a plain delay. One copy here; the conformance suite, the adapters' and brokers' testing
 * entries, their tests and the benchmark import it.
 */
import { createServer } from 'node:net';

/** A port nothing listens on right now (the kernel's pick), on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Polls `check` until it returns something other than false/undefined/null, and returns that. Fails with
 * `what` and the last value seen once `timeoutMs` has passed. For state that only time changes (leases,
 * backoff) or that no event reports (a server's queue depth), never as a stand-in for an event.
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

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
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
