import { describe, expect, it } from 'vitest';
import { ConfigError, StoreError, Worker, type Handler, type Store } from '@statusq/core';
import { FAST, countsOf, waitFor, type TestEnv } from '../harness.js';
import { createJobs, enqueueJobs } from '../tables.js';

/** A store that counts the statements sent through it that read or write the rate budget, and the idle due checks. */
function countingBudgetReads(inner: Store, polling = false): { store: Store; reads: () => number; writes: () => number; dueChecks: () => number } {
  let reads = 0;
  let writes = 0;
  let dueChecks = 0;
  const store: Store = Object.assign(Object.create(inner) as Store, {
    execute: (s: Parameters<Store['execute']>[0]) => {
      if (/^SELECT .* FROM .statusq_rate_limits./.test(s.sql)) reads++;
      if (/^UPDATE .statusq_rate_limits./.test(s.sql)) writes++;
      if (/^SELECT 1 AS found FROM .jobs. WHERE .*status. IS NULL/.test(s.sql)) dueChecks++;
      return inner.execute(s);
    },
    // Polling: the worker loops every poll interval however the store would wait (a store with idleProbe waits up to 30 s).
    ...(polling && { waitForWork: undefined }),
  });
  return { store, reads: () => reads, writes: () => writes, dueChecks: () => dueChecks };
}

export function rateLimitCases(env: () => TestEnv): void {
  describe('rate limit (rateLimit, work --rate)', () => {
    it('three workers of 16 slots on their own connections share one budget of 20 starts a second: no job starts before the budget granted it', { timeout: 60_000 }, async () => {
      const setup = await env().store('setup store');
      await enqueueJobs(await createJobs(setup), Array.from({ length: 60 }, (_, n) => ({ n })));
      const starts: number[] = [];
      const handler: Handler = async () => {
        starts.push(Date.now());
      };
      // The budget is made when the first worker opens, holding its burst; nothing is granted before this instant.
      const opened = Date.now();
      const workers = [];
      for (let i = 0; i < 3; i++) {
        workers.push(await env().startWorker({ store: await env().store(`worker store ${i + 1}`), table: { table: 'jobs' }, handler, concurrency: 16, rateLimit: '20/s', exitWhenEmpty: true, ...FAST }));
      }
      await Promise.all(workers.map((w) => w.done));
      expect(await countsOf(setup, 'jobs')).toMatchObject({ done: 60 });
      // On a store with row locks a settle can deadlock with another worker's claim (the server rolls one back, the worker reports it
      // and retries: every row is done above; a clean-clone run of 36fa9dd met one). Nothing else may go wrong.
      expect(workers.flatMap((w) => w.errors).filter((e) => !(e.error instanceof StoreError && e.error.kind === 'WriteConflict'))).toEqual([]);
      // 20 a second is one start every 50 ms, with a burst of 2 (a tenth of a second's worth): by any instant t the
      // budget has granted at most 2 + (t - opened) / 50 ms starts, and a job starts only after its grant. So the
      // k-th start (1-based) is no earlier than opened + (k - 2) * 50 ms. A start seen late (a slow claim, a busy
      // machine) only moves it later, so this bound holds on any machine; unlimited, 48 slots would start the 60
      // jobs within a few claims and break it by seconds. The database's clock is read with a round trip's error.
      const CLOCK_ERROR_MS = 25;
      const early = [...starts]
        .sort((a, b) => a - b)
        .map((at, i) => ({ start: i + 1, afterOpenMs: at - opened, grantedNoEarlierThanMs: (i + 1 - 2) * 50 }))
        .filter((s) => s.afterOpenMs < s.grantedNoEarlierThanMs - CLOCK_ERROR_MS);
      expect(early).toEqual([]);
      await env().closeStores();
    });

    it('a worker whose budget is spent sleeps until its next start is due: it reads the budget a few times per job, not in a loop', { timeout: 30_000 }, async () => {
      const setup = await env().store('setup store');
      await enqueueJobs(await createJobs(setup), Array.from({ length: 6 }, (_, n) => ({ n })));
      const { store, reads } = countingBudgetReads(await env().store('worker store'));
      const started = await env().startWorker({ store, table: { table: 'jobs' }, handler: async () => undefined, concurrency: 16, rateLimit: { count: 4, periodMs: 1_000 }, ...FAST });
      await waitFor('the 6 jobs to be done', async () => (await countsOf(setup, 'jobs')).done === 6 || null, { timeoutMs: 20_000, intervalMs: 50 });
      await started.worker.stop();
      await started.done;
      // Six starts 250 ms apart take over a second; a worker polling the budget every 20 ms (its poll-max) would read it 60 times and more.
      expect(reads()).toBeLessThanOrEqual(30);
      expect(started.errors).toEqual([]);
      await env().closeStores();
    });

    it('an idle worker asks with a read whether a row is due and takes no budget while none is (a budget write would wake every idle worker of a store that watches its file)', { timeout: 30_000 }, async () => {
      const setup = await env().store('setup store');
      await createJobs(setup);
      const { store, writes, dueChecks } = countingBudgetReads(await env().store('worker store'), true);
      const started = await env().startWorker({ store, table: { table: 'jobs' }, handler: async () => undefined, concurrency: 16, rateLimit: '100/s', ...FAST });
      await waitFor('ten idle due checks', () => dueChecks() >= 10 || null, { timeoutMs: 20_000, intervalMs: 20 });
      // The first, empty claim took budget and gave it back; no idle check after it wrote.
      expect(writes()).toBeLessThanOrEqual(2);
      await enqueueJobs(await createJobs(setup), [{ n: 1 }]);
      await waitFor('the row to be done', async () => (await countsOf(setup, 'jobs')).done === 1 || null, { timeoutMs: 20_000, intervalMs: 20 });
      await started.worker.stop();
      await started.done;
      expect(started.errors).toEqual([]);
      await env().closeStores();
    });

    it('refuses a bad rate with a ConfigError before making the budget table', async () => {
      const store = await env().store();
      await createJobs(store);
      for (const rateLimit of ['50/x', '0/s', '50', '-1/s', '1.5/s', { count: 0, periodMs: 1000 }, { count: 5, periodMs: 0 }, { count: 5 }] as const) {
        await expect(Worker.create({ store, table: { table: 'jobs' }, handler: async () => undefined, rateLimit: rateLimit as never }), JSON.stringify(rateLimit)).rejects.toBeInstanceOf(ConfigError);
      }
      expect(await store.describeTable('statusq_rate_limits')).toBeNull();
      await env().closeStores();
    });
  });
}
