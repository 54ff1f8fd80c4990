import { isRetryableStoreError } from './errors.js';

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
 * Runs `operation`, trying again after Busy, WriteConflict and ConnectionLost errors with backoff, at most
 * `attempts` times in all. Other errors, and the last retryable one, are thrown.
 */
export async function withStoreRetry<T>(
  operation: () => Promise<T>,
  options: { attempts: number; onRetry?: (error: unknown) => void } & Partial<BackoffOptions>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await operation();
    } catch (error) {
      if (!isRetryableStoreError(error) || attempt >= options.attempts) throw error;
      options.onRetry?.(error);
      await sleep(backoffDelay(attempt - 1, { baseMs: options.baseMs ?? 5, maxMs: options.maxMs ?? 1000, random: options.random }));
    }
  }
}
