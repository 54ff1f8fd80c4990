import type { Store } from '../store/store.js';
import type { ResolvedTable } from '../protocol/table.js';

/**
 * The waits of a loop (the worker's, the relay's) that `wake()` cuts short: a timer, a promise, or the store's
 * own wait for work. A plain set of resolvers rather than an AbortController per wait: the worker wakes once per
 * finished job, and aborting a signal (which builds a DOMException) cost about a fifth of a no-op job's CPU time.
 */
export class WakeUps {
  private readonly waiters = new Set<() => void>();

  /** Ends every wait in progress. */
  wake(): void {
    if (this.waiters.size === 0) return;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const resolve of waiters) resolve();
  }

  /**
   * Resolves on wake(), after `ms`, or once `until` settles, whichever is first; its timer never outlives it
   * (a timer left behind kept the process alive for its remaining time after run() resolved).
   */
  sleep(ms: number, until?: Promise<unknown>): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      until?.then(done, done);
    });
  }

  /** The store's wait for work on `table` (at most `ms`; a plain sleep for a store without one), aborted by wake(). */
  async waitForWork(store: Store, ms: number, table: ResolvedTable): Promise<void> {
    if (!store.waitForWork) return this.sleep(ms);
    const controller = new AbortController();
    const abort = () => controller.abort();
    this.waiters.add(abort);
    try {
      await store.waitForWork(ms, controller.signal, table);
    } finally {
      this.waiters.delete(abort);
    }
  }
}
