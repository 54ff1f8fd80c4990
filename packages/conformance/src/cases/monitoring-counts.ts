import { skipFor } from '../skips.js';
import { describe, expect, it } from 'vitest';
import type { Queue, StatusCounts } from '@statusq/core';
import { pendingIndexName } from '@statusq/core/adapter';
import type { StatusBucket } from '@statusq/core/tools';
import type { TestEnv } from '../harness.js';
import { createJobs, createMostlyFinishedJobs, enqueueJobs } from '../tables.js';

/** The rows of each status the cases lay out (`other`: a code that is none of the table's). */
const LAYOUT: StatusCounts = { pending: 5, processing: 3, done: 40, abuse: 2, failed: 3, other: 1 };

/** A table holding LAYOUT's rows, its statuses written directly, so the truth is known without a worker. */
async function laidOut(queue: Queue): Promise<void> {
  const ids = await enqueueJobs(
    queue,
    Array.from({ length: Object.values(LAYOUT).reduce((a, b) => a + b, 0) }, (_, n) => ({ n })),
  );
  const codes = queue.table.codes;
  const otherCode = Math.max(...Object.values(codes)) + 1;
  const q = (n: string) => queue.store.dialect.quoteIdentifier(n);
  let next = 0;
  for (const bucket of ['processing', 'done', 'abuse', 'failed', 'other'] as const) {
    const taken = ids.slice(next, next + LAYOUT[bucket]);
    next += taken.length;
    const code = bucket === 'other' ? otherCode : codes[bucket];
    const list = taken.map((_, i) => queue.store.dialect.placeholder(i + 1)).join(', ');
    await queue.store.execute({ sql: `UPDATE ${q(queue.table.table)} SET ${q(queue.table.status)} = ${code} WHERE ${q(queue.table.id)} IN (${list})`, params: taken });
  }
}

/**
 * Queue.monitoringCounts, which statusq_queue_rows reads: exact on a small table; past the size threshold
 * (forced here by options, so no case needs millions of rows or a timing) pending and processing stay exact,
 * and every value it does not name as estimated is the true count.
 */
export function monitoringCountCases(env: () => TestEnv): void {
  describe('monitoring counts', () => {
    it('on a small table every status is counted exactly, as Queue.counts does', async () => {
      const store = await env().store();
      const jobs = await createJobs(store);
      await laidOut(jobs);
      expect(await jobs.counts()).toEqual(LAYOUT);
      expect(await jobs.monitoringCounts()).toEqual({ counts: LAYOUT, estimated: [] });
      await env().closeStores();
    });

    it('past the size threshold pending and processing stay exact while finished rows pass the cap; every value not named estimated is exact', async () => {
      const store = await env().store();
      const jobs = await createJobs(store);
      await laidOut(jobs);
      const estimates = store.inspection?.estimateRows !== undefined;
      const { counts, estimated } = await jobs.monitoringCounts({ exactBelowRows: 0, countUpTo: 10 });
      expect(estimated).not.toContain('pending');
      expect(estimated).not.toContain('processing');
      for (const bucket of Object.keys(LAYOUT) as StatusBucket[]) {
        if (estimated.includes(bucket)) expect(counts[bucket], bucket).toBeGreaterThanOrEqual(0);
        else expect(counts[bucket], bucket).toBe(LAYOUT[bucket]);
      }
      // 40 done rows pass a cap of 10: an adapter that estimates says so; one that does not counts them all.
      expect(estimated.includes('done')).toBe(estimates);
      // Pending past the cap: an estimate of at least the cap where the adapter estimates.
      const capped = await jobs.monitoringCounts({ exactBelowRows: 0, countUpTo: 2 });
      if (estimates) {
        expect(capped.estimated).toContain('pending');
        expect(capped.counts.pending).toBeGreaterThanOrEqual(2);
      } else expect(capped).toEqual({ counts: LAYOUT, estimated: [] });
      await env().closeStores();
    });

    it('refuses a cap that is not a positive integer', async () => {
      const store = await env().store();
      const jobs = await createJobs(store);
      await expect(jobs.monitoringCounts({ countUpTo: 0 })).rejects.toThrow(/countUpTo must be a positive integer/);
      await expect(jobs.monitoringCounts({ exactBelowRows: -1 })).rejects.toThrow(/exactBelowRows must be a non-negative integer/);
      await env().closeStores();
    });

    it('[needs queryPlans] with many finished rows the pending count reads the pending index, bounded by the status', async (ctx) => {
      const plans = env().options.queryPlans;
      if (!plans) return skipFor(ctx, 'queryPlans');
      const store = await env().store();
      const jobs = await createMostlyFinishedJobs(store, plans);
      const plan = await plans.explain(store, jobs.sql.rowsWithStatus(null), { statusColumn: 'status' });
      expect(plan.index, plan.text).toBe(pendingIndexName('jobs'));
      expect(plan.bounded, plan.text).toBe(true);
      await env().closeStores();
    });
  });
}
