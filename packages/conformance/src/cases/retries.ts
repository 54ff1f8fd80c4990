import { describe, expect, it } from 'vitest';
import { Queue } from '@statusq/core';
import { FAST, nextEvent, readRow, statusOf, toMs, withDeadline, type TestEnv } from '../harness.js';
import { createJobs, enqueueJobs } from '../tables.js';

/**
 * At least half of it passes between the failure and the retry: room for the reads and the two early claims
 * below on a loaded 2-core machine (with 1 s, a claims-table run took the row after it came due: clean-clone CI).
 */
const RETRY_DELAY_MS = 2000;
/** The early claims must start at least this long before the row comes due. */
const EARLY_MARGIN_MS = 400;

export function retryCases(env: () => TestEnv): void {
  describe('retries and backoff', () => {
    it('a failed attempt schedules a retry (status NULL, attempt_count + 1, next_attempt_at in [delay/2, delay], last_error kept); the row is not claimable before it, and succeeds after', async () => {
      const store = await env().store('worker store');
      const other = await env().store('other store');
      const queue = await createJobs(store);
      const [id] = await enqueueJobs(queue, [{ flaky: true }]);
      const otherQueue = await Queue.open(other, { table: 'jobs' });
      const starts: number[] = [];
      let failedAt = 0;
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        concurrency: 1,
        maxAttempts: 3,
        retryDelayMs: RETRY_DELAY_MS,
        exitWhenEmpty: true,
        ...FAST,
        // The jitter at its top: the retry comes due a whole RETRY_DELAY_MS after the failure, the most room for
        // the early claims below (the jitter's range is the next case's).
        random: () => 1,
        handler: async (job) => {
          starts.push(Date.now());
          if (job.attempt === 1) {
            failedAt = Date.now();
            throw new Error('temporary failure');
          }
          return { attempt: job.attempt };
        },
      });
      const retried = await nextEvent(w.worker, 'retried');
      const settledAt = Date.now();
      expect(retried.delayMs).toBeGreaterThanOrEqual(RETRY_DELAY_MS / 2);
      expect(retried.delayMs).toBeLessThanOrEqual(RETRY_DELAY_MS);
      expect(retried.error).toBe('Error: temporary failure');

      const scheduled = await readRow(other, 'jobs', id);
      expect(statusOf(scheduled)).toBeNull();
      expect(Number(scheduled.attempt_count)).toBe(1);
      expect(scheduled.last_error).toBe('Error: temporary failure');
      const nextAt = toMs(scheduled.next_attempt_at)!;
      // Database clock and this process's clock are the same machine's; allow rounding to the millisecond.
      expect(nextAt).toBeGreaterThanOrEqual(failedAt + RETRY_DELAY_MS / 2 - 5);
      expect(nextAt).toBeLessThanOrEqual(settledAt + RETRY_DELAY_MS + 5);

      // Not due yet: neither claim strategy takes it.
      expect(Date.now()).toBeLessThan(nextAt - EARLY_MARGIN_MS);
      expect((await otherQueue.claim({ limit: 5, token: 'early' }, 'native')).rows).toEqual([]);
      expect((await otherQueue.claim({ limit: 5, token: 'early' }, 'conditional-update')).rows).toEqual([]);
      // Not read back here: by now the worker may have taken the row, as it should once due (a loaded clean-clone
      // CI read it done). An early claim that changed the row without returning it shows below, in attempt_count.

      const counters = await withDeadline(w.done, 30_000, 'the retried job to succeed');
      expect(starts).toHaveLength(2);
      expect(starts[1]!).toBeGreaterThanOrEqual(nextAt - 5);
      const done = await readRow(other, 'jobs', id);
      expect(statusOf(done)).toBe(queue.table.codes.done);
      expect(Number(done.attempt_count)).toBe(1);
      expect(JSON.parse(String(done.result))).toEqual({ attempt: 2 });
      expect(counters).toMatchObject({ retried: 1, completed: 1, failed: 0 });
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('the backoff doubles per attempt and stays within [delay/2, delay] of each step', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      await enqueueJobs(queue, [{ poison: true }]);
      const delays: number[] = [];
      const w = await env().startWorker(
        {
          store,
          table: { table: 'jobs' },
          concurrency: 1,
          maxAttempts: 4,
          retryDelayMs: 40,
          exitWhenEmpty: true,
          ...FAST,
          handler: async () => {
            throw new Error('always');
          },
        },
        'worker',
        (worker) => worker.on('retried', (e) => delays.push(e.delayMs)),
      );
      const counters = await withDeadline(w.done, 30_000, 'the poison job to run out of attempts');
      expect(delays).toHaveLength(3);
      delays.forEach((d, step) => {
        const full = 40 * 2 ** step;
        expect(d).toBeGreaterThanOrEqual(full / 2);
        expect(d).toBeLessThanOrEqual(full);
      });
      expect(counters).toMatchObject({ retried: 3, failed: 1 });
      await env().closeStores();
    });
  });
}
