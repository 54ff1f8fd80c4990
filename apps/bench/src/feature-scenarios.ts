/**
 * statusq's features under a burn-down: a prune deleting old rows alongside the workers (issue 15), claim state
 * kept beside the table (`migrate --beside`, issue 40), and a rate limit shared by several processes (`work --rate`).
 */
import { Queue, pruneRows } from '@statusq/core';
import type { BenchDatabase } from './databases.js';
import { round } from './records.js';
import { withDatabase, type BenchContext } from './scenarios.js';
import { burnDownInProcesses, type StatusqRunOptions } from './statusq-runs.js';

/**
 * Issue 15's retention point: 8 workers x 64 slots burn down `prunePendingRows` pending rows of a table that also
 * holds `pruneFinishedRows` old finished ones, once alone and once while a prune (batches of 1,000, its own
 * connection) deletes those finished rows. What the prune costs the workers is the difference in jobs/s; the
 * prune's own rate is recorded beside it.
 */
export async function pruneAlongside(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  const table = 'bench_prune';
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      for (const pruning of [false, true]) {
        await db.createTable(table, { pending: plan.prunePendingRows, finished: plan.pruneFinishedRows, finishedAgoMs: 2 * PRUNE_CUTOFF_MS });
        const options: StatusqRunOptions = { table, workers: 8, concurrency: 64, batch: 64, strategy: 'native', handlerDelayMs: 0, timeoutMs: plan.runTimeoutMs };
        const prune = pruning ? timedPrune(db, table) : null;
        const result = await burnDownInProcesses(db, options, 1);
        const pruned = await prune;
        ctx.record({
          scenario: 'prune-alongside',
          system: 'statusq',
          dialect,
          pruning,
          jobs: plan.prunePendingRows,
          handled: result.handled,
          timedOut: result.timedOut,
          jobsPerSec: Math.round(result.handled / result.seconds),
          finishedRows: plan.pruneFinishedRows,
          ...(pruned && { pruned: pruned.removed, pruneSeconds: round(pruned.seconds, 2), pruneRowsPerSec: Math.round(pruned.removed / pruned.seconds) }),
        });
      }
      await db.dropTable(table);
    });
  }
}

/**
 * Issue 40's cost of `migrate --beside`: 8 workers x 64 slots burn down `slowJobs` no-op jobs of a managed table
 * whose claim state is in its own columns, then of one whose claim state is in a claims table beside it, where
 * every claim and settle is a transaction of two statements (the status UPDATE and the claims-table upsert) and
 * the rows are read back through the claims table.
 */
export async function claimState(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  const table = 'bench_claim_state';
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      for (const state of ['in-table', 'beside'] as const) {
        await db.createTable(table, { pending: plan.slowJobs, finished: 0 }, { beside: state === 'beside' });
        const options: StatusqRunOptions = { table, workers: 8, concurrency: 64, batch: 64, strategy: 'native', handlerDelayMs: 0, timeoutMs: plan.runTimeoutMs };
        const result = await burnDownInProcesses(db, options, 1);
        ctx.record({
          scenario: 'claim-state',
          system: 'statusq',
          dialect,
          claimState: state,
          workers: options.workers,
          concurrency: options.concurrency,
          jobs: plan.slowJobs,
          handled: result.handled,
          timedOut: result.timedOut,
          jobsPerSec: Math.round(result.handled / result.seconds),
        });
      }
      await db.dropTable(table);
    });
  }
}

/**
 * `work --rate`'s promise measured: three processes of 16 slots (one worker each) share one budget over a backlog
 * of `rateLimitSeconds` at the limit; the rate achieved, first settle to last, against the limit.
 */
export async function rateLimit(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  const table = 'bench_rate';
  const processes = 3;
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      for (const limitPerSec of plan.rateLimits) {
        const jobs = limitPerSec * plan.rateLimitSeconds;
        await db.createTable(table, { pending: jobs, finished: 0 });
        const options: StatusqRunOptions = { table, workers: processes, concurrency: 16, strategy: 'native', handlerDelayMs: 0, timeoutMs: 3 * plan.rateLimitSeconds * 1000 + plan.runTimeoutMs, rateLimit: `${limitPerSec}/s` };
        const result = await burnDownInProcesses(db, options, processes);
        const jobsPerSec = result.handled / result.seconds;
        ctx.record({ scenario: 'rate-limit', system: 'statusq', dialect, limitPerSec, processes, concurrency: 16, jobs, handled: result.handled, timedOut: result.timedOut, jobsPerSec: round(jobsPerSec, 1), ofLimitPercent: round((100 * jobsPerSec) / limitPerSec, 1) });
        await db.dropTable(table);
        // The budget row outlives the table; the next limit starts from a fresh one.
        await db.dropTable('statusq_rate_limits');
      }
    });
  }
}

/**
 * Every row the fill made finished (queued two days ago, without finished_at) pruned in batches of 1,000 on a
 * connection of its own, timed, with prune's default pause; rows the workers finish meanwhile are a day younger
 * than the cut-off and stay.
 */
async function timedPrune(db: BenchDatabase, table: string): Promise<{ removed: number; seconds: number }> {
  const store = await db.connect({ listen: false, connections: 1 });
  try {
    const queue = await Queue.open(store, { table });
    const started = performance.now();
    // byOrderColumn: the fill's rows have no finished_at, so only their queue time can judge them.
    const report = await pruneRows(queue, { statuses: ['done'], olderThanMs: PRUNE_CUTOFF_MS, batch: 1_000, byOrderColumn: true });
    return { removed: report.removed, seconds: (performance.now() - started) / 1000 };
  } finally {
    await store.close();
  }
}

/** The prune's cut-off: the filled finished rows are twice as old, the ones the workers finish far younger. */
const PRUNE_CUTOFF_MS = 86_400_000;
