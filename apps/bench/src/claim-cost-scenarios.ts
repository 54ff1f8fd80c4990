/**
 * The claim's own cost, timed at the store: as the history of finished rows grows (with the pending index and
 * without it), and on the table shapes issue 15's features make (a priority column, delayed rows ahead).
 */
import type { Worker } from '@statusq/core';
import type { BenchDatabase, TableOptions } from './databases.js';
import { quantile, round, type ClaimLimitRecord, type ClaimShapeRecord, type ClaimTiming, type CostRecord } from './records.js';
import { withDatabase, type BenchContext, type Plan } from './scenarios.js';
import { burnDownInProcess, type StatusqRunOptions } from './statusq-runs.js';

/** Without its index a claim scans the whole history; these runs are cut short rather than left to crawl. */
const UNINDEXED_TIMEOUT_MS = 15_000;

/**
 * Times each claim of `worker` into `samples`: at the store (`store`: each Queue.claim call, one attempt of the
 * whole claim pipeline), or as the worker's loop saw each claim that took rows (`loop`: the `claimed` event's
 * duration, retries included), which is what a claim under kind or group limits can be timed by.
 */
function timingClaims(worker: Worker, samples: number[], at: 'store' | 'loop' = 'store'): void {
  if (at === 'loop') {
    worker.on('claimed', ({ durationMs }) => samples.push(durationMs));
    return;
  }
  const queue = worker.queue;
  const claim = queue.claim.bind(queue);
  queue.claim = async (...args) => {
    const started = performance.now();
    try {
      return await claim(...args);
    } finally {
      samples.push(performance.now() - started);
    }
  };
}

/**
 * Scenario 5: the same pending rows on top of a growing history of finished rows, with the pending index and
 * then without it. One worker with the native claim; the claim's own latency is timed at the store.
 */
export async function costGrowth(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      const table = 'bench_cost';
      for (const finishedRows of plan.historySizes) {
        const fillStarted = performance.now();
        await db.createTable(table, { pending: plan.costPendingRows, finished: finishedRows });
        ctx.log(`  ${dialect}: ${finishedRows.toLocaleString('en-US')} finished rows loaded in ${((performance.now() - fillStarted) / 1000).toFixed(1)} s`);
        for (const pendingIndex of [true, false]) {
          if (!pendingIndex) {
            await db.dropPendingIndex(table);
            await db.addPending(table, plan.costPendingRows);
          }
          ctx.record(await measureClaimCost(db, table, finishedRows, pendingIndex, plan));
        }
      }
      await db.dropTable(table);
    });
  }
}

/**
 * The claim on the table shapes issue 15's features make (ClaimShapeRecord): the plain managed table and one with
 * a priority column, each with shapePendingRows pending rows; then costPendingRows due rows behind a block of
 * rows scheduled a day ahead that are newer, which the newest-first claim walks past before it finds a due row.
 * One worker with the native claim, stopped once costPendingRows jobs are done (pending rows remain, so
 * exitWhenEmpty would wait); the claim timed at the store.
 */
export async function claimShapes(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  const table = 'bench_shapes';
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      const measure = async (shape: ClaimShapeRecord['shape'], pendingRows: number, delayedRows: number) => {
        const timing = await timedClaimRun(db, table, plan.costPendingRows, plan.runTimeoutMs, { stopWhenDone: true });
        ctx.record({ scenario: 'claim-shapes', system: 'statusq', dialect, shape, pendingRows, delayedRows, ...timing });
      };
      await db.createTable(table, { pending: plan.shapePendingRows, finished: 0 });
      await measure('plain', plan.shapePendingRows, 0);
      await db.createTable(table, { pending: plan.shapePendingRows, finished: 0 }, { priorityLevels: 10 });
      await measure('priority', plan.shapePendingRows, 0);
      for (const delayedRows of plan.delayedAheadSizes) {
        await db.createTable(table, { pending: plan.costPendingRows, finished: 0 });
        await db.addDelayed(table, delayedRows, 86_400_000);
        await measure('delayed ahead', plan.costPendingRows + delayedRows, delayedRows);
      }
      await db.dropTable(table);
    });
  }
}

/** The shapes of the claim-limits scenario: the plain claim, by kind, and under group limits of 10 and 10,000 groups. */
const LIMIT_SHAPES: ReadonlyArray<{ shape: ClaimLimitRecord['shape']; table: TableOptions; worker: Pick<StatusqRunOptions, 'kinds' | 'groupConcurrency'>; share: number }> = [
  { shape: 'plain', table: {}, worker: {}, share: 1 },
  { shape: 'kinds: 2 of 4 handled', table: { kinds: 4 }, worker: { kinds: ['0', '1'] }, share: 0.5 },
  { shape: '10 groups, 4 at once each', table: { groups: 10 }, worker: { groupConcurrency: 4 }, share: 1 },
  { shape: '10 groups, serial', table: { groups: 10 }, worker: { groupConcurrency: 1 }, share: 1 },
  { shape: '10,000 groups, 4 at once each', table: { groups: 10_000 }, worker: { groupConcurrency: 4 }, share: 1 },
];

/**
 * The claim with kinds and under group limits beside the plain claim (ClaimLimitRecord): costPendingRows pending
 * rows, one worker of 64 slots, every claim that took rows timed as the loop saw it (a claim under group limits
 * is one transaction that counts, paces and picks, not Queue.claim). A worker with handlers for 2 of 4 kinds
 * stops once it ran its half.
 */
export async function claimLimits(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  const table = 'bench_limits';
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      for (const { shape, table: options, worker, share } of LIMIT_SHAPES) {
        await db.createTable(table, { pending: plan.costPendingRows, finished: 0 }, options);
        const jobs = Math.round(plan.costPendingRows * share);
        const timing = await timedClaimRun(db, table, jobs, plan.runTimeoutMs, { stopWhenDone: true, at: 'loop', worker });
        ctx.record({ scenario: 'claim-limits', system: 'statusq', dialect, shape, pendingRows: plan.costPendingRows, ...timing });
      }
      await db.dropTable(table);
    });
  }
}

async function measureClaimCost(db: BenchDatabase, table: string, finishedRows: number, pendingIndex: boolean, plan: Plan): Promise<CostRecord> {
  const timeoutMs = pendingIndex ? plan.runTimeoutMs : Math.min(plan.runTimeoutMs, UNINDEXED_TIMEOUT_MS);
  const timing = await timedClaimRun(db, table, plan.costPendingRows, timeoutMs);
  return { scenario: 'cost-growth', system: 'statusq', dialect: db.dialect, finishedRows, pendingIndex, ...timing };
}

/**
 * One worker (native claim, 64 slots, no-op handler) burns down `table`, every claim timed at the store. With
 * `stopWhenDone` it stops after `jobs` completions: rows left pending (not due yet, or more than the run's
 * share) would keep exitWhenEmpty waiting.
 */
async function timedClaimRun(
  db: BenchDatabase,
  table: string,
  jobs: number,
  timeoutMs: number,
  options: { stopWhenDone?: boolean; at?: 'store' | 'loop'; worker?: Pick<StatusqRunOptions, 'kinds' | 'groupConcurrency'> } = {},
): Promise<ClaimTiming> {
  const samples: number[] = [];
  const result = await burnDownInProcess(db, { table, workers: 1, concurrency: 64, strategy: 'native', handlerDelayMs: 0, timeoutMs, ...options.worker }, (worker) => {
    timingClaims(worker, samples, options.at);
    if (!options.stopWhenDone) return;
    let completed = 0;
    worker.on('completed', () => {
      if (++completed === jobs) void worker.stop();
    });
  });
  return {
    jobs,
    handled: result.handled,
    timedOut: result.timedOut,
    jobsPerSec: Math.round(result.handled / result.seconds),
    claimCalls: samples.length,
    claimP50Ms: round(quantile(samples, 0.5), 2),
    claimP99Ms: round(quantile(samples, 0.99), 2),
  };
}
