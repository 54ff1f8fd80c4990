import { skipFor } from '../skips.js';
import { describe, expect, it } from 'vitest';
import { pendingIndexName } from '@statusq/core/adapter';
import { TransitionSql } from '@statusq/core/adapter';
import type { TestEnv } from '../harness.js';
import { createMostlyFinishedJobs } from '../tables.js';

/**
 * What `statusq inspect` reads. Queue.inspect itself is run by the CLI scenarios on every dialect; here its
 * pending listing's plan: it must cost what a claim costs however many finished rows the table keeps.
 */
export function inspectCases(env: () => TestEnv): void {
  describe('inspect', () => {
    it('[needs queryPlans] with many finished rows the pending listing (both orders) reads the pending index and needs no sort', async (ctx) => {
      const plans = env().options.queryPlans;
      if (!plans) return skipFor(ctx, 'queryPlans');
      const store = await env().store();
      const jobs = await createMostlyFinishedJobs(store, plans);
      for (const direction of ['newest', 'oldest'] as const) {
        const statement = new TransitionSql({ ...jobs.table, direction }, store.dialect).inspect('pending', 20, 'clock');
        const plan = await plans.explain(store, statement);
        expect(plan.index, `${direction}: ${plan.text}`).toBe(pendingIndexName('jobs'));
        expect(plan.sorts, `${direction}: ${plan.text}`).toBe(false);
      }
      await env().closeStores();
    });
  });
}
