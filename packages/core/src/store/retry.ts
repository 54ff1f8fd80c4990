import { StoreError, isRetryableStoreError, type StoreErrorKind } from '../protocol/errors.js';

export interface BackoffOptions {
  /** First delay; each further step doubles it. */
  baseMs: number;
  /** No delay grows past this. */
  maxMs: number;
  /** 0..1 source of randomness (Math.random by default); injectable so tests can pin jitter. */
  random?: () => number;
}

/**
 * Exponential backoff with jitter: step n (0-based) waits between half and all of base * 2^n, capped.
 * The jitter spreads workers that failed together so they do not retry together.
 */
export function backoffDelay(step: number, options: BackoffOptions): number {
  const exponential = Math.min(options.maxMs, options.baseMs * 2 ** Math.min(step, 40));
  const random = options.random ?? Math.random;
  return Math.round(exponential / 2 + (random() * exponential) / 2);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * How a kind of store call is retried: at most `attempts` tries in all, with backoff between them, after
 * errors of the kinds `on` (default Busy, WriteConflict and ConnectionLost).
 */
export type RetryPolicy = { attempts: number; on?: readonly StoreErrorKind[] } & Partial<BackoffOptions>;

/**
 * The one owner of retry policy, one entry per kind of store call. Adapters never retry: a deadlock
 * victim (rolled back whole, so safe to run again) reaches core as WriteConflict and is retried here like
 * any other. Heartbeats and reaps are not retried: their timers run them again on the next beat.
 */
export const STORE_RETRY = {
  /** A claim. The loop backs off and claims again after this gives up, so a short run of tries is enough. */
  claim: { attempts: 10, baseMs: 5, maxMs: 1000 },
  /**
   * A settle commit (and the read-back that decides a retried grouped completion): a job's outcome, worth
   * riding out a server restart for (20 tries, up to ~2 s apart: about half a minute).
   */
  settle: { attempts: 20, baseMs: 5, maxMs: 2000 },
  /** Handing claims back on stop; the stop's own deadline bounds it anyway. */
  release: { attempts: 10, baseMs: 5, maxMs: 1000 },
  /**
   * An application's own write through Queue (enqueue, requeue, markAbuse, recovering a dead worker's rows).
   * A conflict (a deadlock victim, a file database's busy writer) rolled the whole transaction back, so it runs again;
   * a lost connection is not retried here, because its commit may have happened (an enqueue would insert twice).
   */
  write: { attempts: 5, baseMs: 5, maxMs: 200, on: ['Busy', 'WriteConflict'] },
} as const satisfies Record<string, RetryPolicy>;

/**
 * Runs `operation`, trying again after the error kinds its policy names (Busy, WriteConflict and ConnectionLost
 * unless it says otherwise) with backoff, at most `attempts` times in all. Other errors, and the last retryable one, are thrown. Callers pass one of
 * STORE_RETRY's policies.
 */
export async function withStoreRetry<T>(operation: () => Promise<T>, options: RetryPolicy & { onRetry?: ((error: unknown) => void) | undefined }): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await operation();
    } catch (error) {
      const retried = options.on ? error instanceof StoreError && options.on.includes(error.kind) : isRetryableStoreError(error);
      if (!retried || attempt >= options.attempts) throw error;
      options.onRetry?.(error);
      await sleep(backoffDelay(attempt - 1, { baseMs: options.baseMs ?? 5, maxMs: options.maxMs ?? 1000, random: options.random }));
    }
  }
}
