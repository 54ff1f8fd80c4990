import { describe, expect, it } from 'vitest';
import type { Store, WorkerCounters } from '@statusq/core';
import type { ClaimStrategy } from '@statusq/core/adapter';
import { FAST, Ledger, countsOf, deferred, idKey, readRows, statusOf, withDeadline, withLatency, type StartedWorker, type TestEnv } from '../harness.js';
import type { ColumnGroup } from '@statusq/core/adapter';
import type { ConformanceOptions } from '../options.js';
import { generateTableARows } from '@statusq/test-fixtures';
import { createJobs, createTableA, enqueueJobs } from '../tables.js';

export function raceCases(env: () => TestEnv, options: ConformanceOptions): void {
  const scaled = options.raceScale ?? {};
  // Why these sizes: a broken claim guard shows up only when claimers really overlap, so the race must keep
  // every worker busy for many claim rounds at once. 8 workers of concurrency 4 (32 claimers, more than the
  // connections a 2-core server serves at once) over 3,000 jobs is about 90 claims per claimer, with the
  // table draining for seconds, not milliseconds; an adapter with a server (raceScale) adds the fleet's
  // shape, 32 workers over 10,000 jobs, where lock waits, deadlocks and SKIP LOCKED's fairness show. Fewer
  // jobs drain before the last workers have started; and nothing here is scaled down to save time.
  const sizeOf = (strategy: ClaimStrategy) => {
    // Only the native claim races at the adapter's scale: conditional-update's lost claims grow with the
    // square of the workers (tens of seconds per thousand jobs at 32), and the default size already races it.
    const race = strategy === 'native' ? scaled : {};
    const jobs = Math.max(200, Math.round((race.jobs ?? 3000) * (options.scale ?? 1)));
    return { WORKERS: race.workers ?? 8, CONCURRENCY: race.concurrency ?? 4, jobs, createStore: race.createStore };
  };

  describe('race: workers, each on its own connection, drain one table', () => {
    for (const strategy of ['native', 'conditional-update'] as ClaimStrategy[]) {
      const { WORKERS, CONCURRENCY, jobs, createStore } = sizeOf(strategy);
      // A server's scale (tens of workers, ten thousand jobs) needs more than the default test timeout.
      it(`${strategy}, ${WORKERS} workers of concurrency ${CONCURRENCY}, ${jobs} jobs: every job is handled exactly once and ends done`, { timeout: 180_000 }, async () => {
        const setup = await env().store('setup store');
        const queue = await createJobs(setup);
        const ids = await enqueueJobs(
          queue,
          Array.from({ length: jobs }, (_, n) => ({ n })),
        );
        expect(ids).toHaveLength(jobs);
        const ledger = new Ledger();
        const wrongState: string[] = [];
        const workers: StartedWorker[] = [];
        const stores: Store[] = [];
        // Every worker is created (tables described, connections opened) before any claims: otherwise the first
        // ones drain a fast table while the last are still being set up, and fewer workers race than the title says.
        const go = deferred();
        for (let i = 0; i < WORKERS; i++) {
          const opened = await env().store(`worker store ${i + 1}`, env().url, createStore);
          stores.push(opened);
          // Every call yields first, so the workers' claims really interleave even on a synchronous driver.
          const store = withLatency(opened);
          workers.push(
            await env().startWorker({
              store,
              table: { table: 'jobs' },
              claimStrategy: strategy,
              concurrency: CONCURRENCY,
              exitWhenEmpty: true,
              ...FAST,
              handler: async (job, ctx) => {
                ledger.record(job, ctx.workerId);
                // The row handed to the handler is the claimed row: processing, with this worker's token.
                if (statusOf(job.row) !== queue.table.codes.processing || !String(job.row.worker_id).startsWith(`${ctx.workerId}:`)) {
                  wrongState.push(`${idKey(job.id)}: status ${String(job.row.status)} token ${String(job.row.worker_id)}`);
                }
                if ((job.payload as { n?: unknown }).n === undefined) wrongState.push(`${idKey(job.id)}: payload ${JSON.stringify(job.payload)}`);
                // Yield so the workers' claims and settles interleave.
                await new Promise((resolve) => setImmediate(resolve));
                return { n: (job.payload as { n: number }).n };
              },
            }, undefined, undefined, go.promise),
          );
        }
        const started = performance.now();
        go.resolve();
        const results: WorkerCounters[] = await withDeadline(Promise.all(workers.map((w) => w.done)), 150_000, `${WORKERS} workers to drain ${jobs} jobs`);
        const seconds = (performance.now() - started) / 1000;
        console.info(`[${options.name}] ${strategy} race, ${WORKERS} workers: ${jobs} jobs in ${seconds.toFixed(2)} s (${Math.round(jobs / seconds)} jobs/s)`);

        expect(wrongState).toEqual([]);
        expect(ledger.notExactlyOnce(ids)).toEqual([]);
        expect(ledger.order).toHaveLength(jobs);
        expect(await countsOf(setup, 'jobs')).toEqual({ pending: 0, processing: 0, done: jobs, abuse: 0, failed: 0, other: 0 });
        const sum = (key: keyof WorkerCounters) => results.reduce((n, c) => n + c[key], 0);
        expect(sum('claimed')).toBe(jobs);
        expect(sum('completed')).toBe(jobs);
        expect(sum('claimLost') + sum('failed') + sum('retried') + sum('abused') + sum('released')).toBe(0);
        if (strategy === 'native' && setup.capabilities.skipLocked) expect(sum('candidatesLost')).toBe(0);
        if (strategy === 'conditional-update') {
          // Not required, only reported: how many candidates another worker took first.
          console.info(`[${options.name}] conditional-update race: ${sum('candidatesLost')} candidates lost for ${jobs} jobs`);
        }
        for (const w of workers) expect(w.errors).toEqual([]);

        // The database agrees with the ledger: each row is done, holds its own result, and carries the
        // token of the worker that handled it.
        const handledBy = new Map(ledger.order.map((e) => [e.id, e.workerId]));
        const mismatched = (await readRows(setup, 'jobs')).filter(
          (row) =>
            statusOf(row) !== queue.table.codes.done ||
            !String(row.worker_id).startsWith(`${handledBy.get(idKey(row.id))}:`) ||
            JSON.parse(String(row.result)).n !== JSON.parse(String(row.payload)).n,
        );
        expect(mismatched.slice(0, 5)).toEqual([]);
        // More than one worker took part (otherwise nothing raced).
        expect(results.filter((c) => c.completed > 0).length).toBeGreaterThan(1);
        await scaled.check?.({ strategy, jobs, workers: WORKERS, stores, results });
        await env().closeStores();
      });
    }

    it('select: claimed rows carry the named columns and statusq\'s own, nothing else; racing workers still run each row once (application table, plain and migrated, both claims)', async () => {
      const setup = await env().store('setup store');
      // Aging takes the native claim's other path: candidates, then the guarded claim of their ids (RETURNING or read back).
      const variants: Array<{ table: string; migrate?: ColumnGroup[]; strategy: ClaimStrategy; agingMs?: number }> = [
        { table: 'sel_plain_native', strategy: 'native' },
        { table: 'sel_migrated_native', migrate: ['leases', 'retries'], strategy: 'native' },
        { table: 'sel_migrated_aging', migrate: ['leases', 'retries'], strategy: 'native', agingMs: 3_600_000 },
        { table: 'sel_plain_cu', strategy: 'conditional-update' },
        { table: 'sel_migrated_cu', migrate: ['leases', 'retries'], strategy: 'conditional-update' },
      ];
      const rows = generateTableARows(120).map((row) => ({ ...row, kind: 'ok' as const }));
      for (const { table, migrate, strategy, agingMs } of variants) {
        await createTableA(env().fixtures, setup, rows, { table, ...(migrate && { migrate }) });
        const ledger = new Ledger();
        const keys = new Set<string>();
        const go = deferred();
        const workers: StartedWorker[] = [];
        const opened: Store[] = [];
        for (let i = 0; i < 3; i++) {
          opened.push(await env().store(`${table} worker ${i + 1}`));
          const store = withLatency(opened[i]!);
          workers.push(
            await env().startWorker(
              {
                store,
                table: { table, select: ['kind'] },
                claimStrategy: strategy,
                ...(agingMs !== undefined && { agingMs }),
                concurrency: 4,
                exitWhenEmpty: true,
                ...FAST,
                handler: async (job, ctx) => {
                  ledger.record(job, ctx.workerId);
                  keys.add(Object.keys(job.row).sort().join(','));
                  await new Promise((resolve) => setImmediate(resolve));
                },
              },
              undefined,
              undefined,
              go.promise,
            ),
          );
        }
        go.resolve();
        await withDeadline(Promise.all(workers.map((w) => w.done)), 60_000, `3 workers to drain ${table}`);
        const own = workers[0]!.worker.queue.table;
        const expected = [...new Set([own.id, own.status, own.order, ...Object.values(own.columns), 'kind'])].sort().join(',');
        expect([...keys], table).toEqual([expected]);
        expect(expected, table).not.toContain('url');
        expect(ledger.notExactlyOnce(rows.map((r) => r.id)), table).toEqual([]);
        expect(await countsOf(setup, table), table).toEqual({ pending: 0, processing: 0, done: rows.length, abuse: 0, failed: 0, other: 0 });
        for (const w of workers) expect(w.errors, table).toEqual([]);
        for (const store of opened) await store.close();
      }
      await env().closeStores();
    });
  });
}
