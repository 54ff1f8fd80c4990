import { skipFor } from '../skips.js';
import { describe, expect, it } from 'vitest';
import { Queue } from '@statusq/core';
import { readRows, statusOf, withDeadline, type TestEnv } from '../harness.js';
import { createJobs, enqueueJobs } from '../tables.js';

/**
 * What an adapter's declared capabilities promise. Each test skips only when the store does not declare
 * the capability (its title names it, so CI can tell an allowed skip from a missing suite).
 */
export function capabilityCases(env: () => TestEnv): void {
  describe('declared capabilities', () => {
    it('[needs batchClaim] one native claim takes a whole batch, in queue order, as processing rows with the token', async (ctx) => {
      const store = await env().store();
      if (!store.capabilities.batchClaim) {
        await env().closeStores();
        skipFor(ctx, 'batchClaim');
      }
      const queue = await createJobs(store);
      const ids = await enqueueJobs(
        queue,
        Array.from({ length: 30 }, (_, n) => ({ n })),
      );
      const { rows, candidatesLost } = await queue.claim({ limit: 25, token: 'batch' });
      expect(candidatesLost).toBe(0);
      expect(rows).toHaveLength(25);
      // All rows share the default date, so only check membership and state here; order is covered elsewhere.
      for (const row of rows) {
        expect(statusOf(row)).toBe(queue.table.codes.processing);
        expect(row.worker_id).toBe('batch');
        expect(row.claimed_at).not.toBeNull();
        expect(ids).toContain(String(row.id));
      }
      expect(new Set(rows.map((r) => String(r.id))).size).toBe(25);
      const db = await readRows(store, 'jobs');
      expect(db.filter((r) => statusOf(r) === queue.table.codes.processing)).toHaveLength(25);
      await env().closeStores();
    });

    it('[needs skipLocked] concurrent native claims on separate connections never return the same row and lose nothing', async (ctx) => {
      const first = await env().store();
      if (!first.capabilities.skipLocked) {
        await env().closeStores();
        skipFor(ctx, 'skipLocked');
      }
      const queue = await createJobs(first);
      await enqueueJobs(
        queue,
        Array.from({ length: 200 }, (_, n) => ({ n })),
      );
      const queues = [queue];
      for (let i = 0; i < 3; i++) queues.push(await Queue.open(await env().store(), { table: 'jobs' }));
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => queues[i % queues.length]!.claim({ limit: 5, token: `t${i}` })));
      const claimed = results.flatMap((r) => r.rows.map((row) => String(row.id)));
      expect(results.reduce((n, r) => n + r.candidatesLost, 0)).toBe(0);
      expect(claimed).toHaveLength(200);
      expect(new Set(claimed).size).toBe(200);
      await env().closeStores();
    });

    it('[needs listenNotify or idleProbe] waitForWork resolves at once when its signal aborts', async (ctx) => {
      const store = await env().store();
      if (!(store.capabilities.listenNotify || store.capabilities.idleProbe) || !store.waitForWork) {
        await env().closeStores();
        skipFor(ctx, 'listenNotify');
      }
      const queue = await createJobs(store);
      const controller = new AbortController();
      const waiting = store.waitForWork!(60_000, controller.signal, queue.table);
      controller.abort();
      await withDeadline(waiting, 2000, 'waitForWork to return after abort');
      await env().closeStores();
    });
  });
}
