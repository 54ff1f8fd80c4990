/**
 * The throughput scenarios: statusq's burn-downs (one process or several), the raw protocol's ceiling beside
 * them, the batch-size sweep with its target check, and the peers at the same jobs and worker counts. Every run
 * here is in a fresh process, warmed up first (isolated-run.ts, burn-child.ts).
 */
import type { WorkerCounters } from '@statusq/core';
import type { ClaimStrategy } from '@statusq/core/tools';
import { postgresBenchUrl, type BenchDatabase, type Dialect } from './databases.js';
import { peerBurnDownIsolated, rawBurnDownIsolated } from './isolated-run.js';
import { RAW_BATCH, type RawStatements } from './raw-protocol.js';
import { STATUS_ONLY_VARIANT, round, type BurnDownRecord } from './records.js';
import { withDatabase, type BenchContext, type Plan } from './scenarios.js';
import { burnDownInProcesses, type StatusqBurnDownResult, type StatusqRunOptions } from './statusq-runs.js';

/**
 * Each throughput run's process first drains this share of the run's jobs, untimed, with the same code and
 * settings (isolated-run.ts): the run then measures warm code, as a worker that has run for a while is.
 */
const WARM_UP_SHARE = 0.1;

function warmUpJobs(jobs: number): number {
  return Math.max(1, Math.round(jobs * WARM_UP_SHARE));
}

/**
 * Round trips the claims made, from the workers' counters and the known shape of each claim: the native
 * claim is one statement on PostgreSQL and SQLite (where it does not even leave the process) and a
 * transaction of four on MySQL (three when it finds nothing); the conditional-update claim is one SELECT,
 * one UPDATE per candidate, and one read-back of the claimed rows' lease times.
 */
function claimRoundTrips(dialect: Dialect, strategy: ClaimStrategy, c: WorkerCounters): number {
  const found = c.claimCalls - c.emptyClaims;
  if (strategy === 'conditional-update') return c.claimCalls + c.claimed + c.candidatesLost + found;
  if (dialect === 'mysql') return 4 * found + 3 * c.emptyClaims;
  return c.claimCalls;
}

export function burnDownRecord(scenario: BurnDownRecord['scenario'], dialect: Dialect, options: StatusqRunOptions, processes: number, jobs: number, result: StatusqBurnDownResult, variant?: string): BurnDownRecord {
  const { counters } = result;
  const attempts = counters.claimed + counters.candidatesLost;
  return {
    scenario,
    system: 'statusq',
    variant: variant ?? (options.columns === 'status only' ? STATUS_ONLY_VARIANT : options.strategy),
    dialect,
    workers: options.workers,
    processes,
    concurrency: options.concurrency,
    jobs,
    handled: result.handled,
    seconds: round(result.seconds, 3),
    jobsPerSec: Math.round(result.handled / result.seconds),
    timedOut: result.timedOut,
    claimCallsPerJob: round(counters.claimCalls / Math.max(1, result.handled), 3),
    // A broker consumer's claim by id has a shape of its own (claimGivenIds), which claimRoundTrips does not model.
    ...(options.from === undefined && { claimRoundTripsPerJob: round(claimRoundTrips(dialect, options.strategy, counters) / Math.max(1, result.handled), 3) }),
    ...(scenario === 'batch-size' && { batch: options.batch ?? options.concurrency }),
    lostPer100: round((100 * counters.candidatesLost) / Math.max(1, attempts), 2),
    deadlocksPer1000: round((1000 * result.deadlocks) / Math.max(1, result.handled), 2),
    benchCpu: result.cpu.bench,
    serverCpu: result.cpu.server,
    errors: result.errors,
  };
}

/** Scenario 1 (and 3, from the same runs' claim counters): drain N no-op jobs per dialect, strategy and worker count. */
export async function burnDown(ctx: BenchContext, scenario: BurnDownRecord['scenario'] = 'burn-down'): Promise<void> {
  const { plan } = ctx;
  const handlerDelayMs = scenario === 'handler-5ms' ? 5 : 0;
  const workerCounts = scenario === 'handler-5ms' ? plan.handlerWorkerCounts : plan.workerCounts;
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      const table = `bench_${scenario.replace(/\W/g, '_')}`;
      const strategies = scenario === 'handler-5ms' ? (['native'] as const) : plan.strategies;
      for (const strategy of strategies) {
        const jobs = handlerDelayMs > 0 || strategy === 'conditional-update' ? plan.slowJobs : plan.jobs;
        for (const workers of workerCounts) {
          const options: StatusqRunOptions = { table, workers, concurrency: plan.concurrency, strategy, handlerDelayMs, timeoutMs: plan.runTimeoutMs, warmUpJobs: warmUpJobs(jobs) };
          await db.createTable(table, { pending: jobs, finished: 0 });
          // Every throughput run in a fresh process (one child holding all W workers), warmed up: see isolated-run.ts.
          const result = await burnDownInProcesses(db, options, 1);
          ctx.record(burnDownRecord(scenario, dialect, options, 1, jobs, result));
        }
      }
      if (scenario === 'burn-down') {
        // The ceiling: the same claim and settle by hand, same table and worker counts (raw-protocol.ts).
        for (const workers of workerCounts) ctx.record(await rawRun(plan, db, scenario, table, workers, RAW_BATCH));
        for (const processes of plan.processCounts) {
          const options: StatusqRunOptions = { table, workers: processes, concurrency: plan.concurrency, strategy: 'native', handlerDelayMs, timeoutMs: plan.runTimeoutMs, warmUpJobs: warmUpJobs(plan.jobs) };
          await db.createTable(table, { pending: plan.jobs, finished: 0 });
          const result = await burnDownInProcesses(db, options, processes);
          ctx.record(burnDownRecord(scenario, dialect, options, processes, plan.jobs, result));
        }
      }
      await db.dropTable(table);
    });
  }
}

/** The raw protocol (raw-protocol.ts) claiming `batch` rows at a time, as a burn-down record. */
async function rawRun(plan: Plan, db: BenchDatabase, scenario: BurnDownRecord['scenario'], table: string, workers: number, batch: number, statements: RawStatements = 'minimal'): Promise<BurnDownRecord> {
  await db.createTable(table, { pending: plan.jobs, finished: 0 });
  const raw = await rawBurnDownIsolated(db, { dialect: db.dialect, url: db.url, table, jobs: plan.jobs, workers, batch, timeoutMs: plan.runTimeoutMs, statements }, warmUpJobs(plan.jobs));
  return {
    scenario,
    system: statements === 'statusq' ? 'raw-statusq-sql' : 'raw-protocol',
    variant: `claim ${batch}`,
    dialect: db.dialect,
    workers,
    processes: 1,
    concurrency: batch,
    ...(scenario === 'batch-size' && { batch }),
    jobs: plan.jobs,
    handled: raw.handled,
    seconds: round(raw.seconds, 3),
    jobsPerSec: Math.round(raw.handled / raw.seconds),
    ...(db.dialect === 'mysql' && { deadlocksPer1000: round((1000 * raw.deadlocks) / Math.max(1, raw.handled), 2) }),
    timedOut: raw.timedOut,
  };
}

/**
 * statusq's native burn-down at each slots-per-worker of `plan.slotSizes` (batch = slots, the worker's
 * default), per dialect and worker count: the knob users have, and where its default comes from. The raw
 * protocol runs at the same rows per claim beside it, so each size has its own ceiling (at 256 rows a claim,
 * statusq is not held to the raw loop's 50), once with the minimal SQL and once with statusq's statements.
 * statusq also runs once more with every optional column turned off and `select: []` (variant `native, status
 * only`): the raw loop's own protocol (status written, the id read back), as over an application table with only a
 * status column and a handler that reads nothing else.
 */
export async function batchSize(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      const table = 'bench_batch_size';
      const statusOnlyRuns: BurnDownRecord[] = [];
      const rawRuns: BurnDownRecord[] = [];
      for (const slots of plan.slotSizes) {
        for (const workers of plan.slotWorkerCounts) {
          const options: StatusqRunOptions = { table, workers, concurrency: slots, batch: slots, strategy: 'native', handlerDelayMs: 0, timeoutMs: plan.runTimeoutMs, warmUpJobs: warmUpJobs(plan.jobs) };
          await db.createTable(table, { pending: plan.jobs, finished: 0 });
          const result = await burnDownInProcesses(db, options, 1);
          ctx.record(burnDownRecord('batch-size', dialect, options, 1, plan.jobs, result));
          const statusOnly: StatusqRunOptions = { ...options, columns: 'status only' };
          await db.createTable(table, { pending: plan.jobs, finished: 0 });
          const statusOnlyRun = burnDownRecord('batch-size', dialect, statusOnly, 1, plan.jobs, await burnDownInProcesses(db, statusOnly, 1));
          ctx.record(statusOnlyRun);
          statusOnlyRuns.push(statusOnlyRun);
          const rawMinimal = await rawRun(plan, db, 'batch-size', table, workers, slots);
          ctx.record(rawMinimal);
          rawRuns.push(rawMinimal);
          ctx.record(await rawRun(plan, db, 'batch-size', table, workers, slots, 'statusq'));
        }
      }
      await targetCheck(ctx, db, table, statusOnlyRuns, rawRuns);
      await db.dropTable(table);
    });
  }
}

/**
 * Issue 14's target (statusq at its best within 80% of the raw protocol at its best) read from more than one
 * run a side: the two fastest settings of each side in the sweep run `plan.targetRounds` times more, in
 * alternating order, and the report compares each side's better median. One run each would let a lucky
 * or unlucky second decide it, and the sweep's fastest of nine runs is itself a lucky draw.
 */
async function targetCheck(ctx: BenchContext, db: BenchDatabase, table: string, statusOnlyRuns: readonly BurnDownRecord[], rawRuns: readonly BurnDownRecord[]): Promise<void> {
  const plan: Plan = { ...ctx.plan, jobs: ctx.plan.targetJobs };
  // The two fastest settings of each side: one sweep run apiece can put a setting first by luck (SQLite's 8
  // workers, which take turns on one thread, once beat its 1 worker by 1% in the sweep and lost by a third here).
  const fastest = (runs: readonly BurnDownRecord[]) => runs.filter((r) => !r.timedOut && r.jobsPerSec > 0).sort((a, b) => b.jobsPerSec - a.jobsPerSec).slice(0, TARGET_SETTINGS);
  const runs: Array<(round: number) => Promise<void>> = [];
  for (const ours of fastest(statusOnlyRuns)) {
    const options: StatusqRunOptions = { table, workers: ours.workers, concurrency: ours.concurrency, batch: ours.concurrency, strategy: 'native', handlerDelayMs: 0, timeoutMs: plan.runTimeoutMs, columns: 'status only', warmUpJobs: warmUpJobs(plan.jobs) };
    runs.push(async (round) => {
      await db.createTable(table, { pending: plan.jobs, finished: 0 });
      ctx.record({ ...burnDownRecord('target-check', db.dialect, options, 1, plan.jobs, await burnDownInProcesses(db, options, 1)), round });
    });
  }
  for (const raw of fastest(rawRuns)) runs.push(async (round) => ctx.record({ ...(await rawRun(plan, db, 'target-check', table, raw.workers, raw.concurrency)), round }));
  for (let round = 0; round < plan.targetRounds; round++) {
    for (const run of round % 2 === 0 ? runs : [...runs].reverse()) await run(round);
  }
}

/** Settings per side the target check runs again (its sweep's fastest ones); the better median counts. */
const TARGET_SETTINGS = 2;

/** Scenario 2 (and 6 with a 5 ms handler): the peers on the same PostgreSQL (or Redis), same jobs, same worker counts. */
export async function peers(ctx: BenchContext, scenario: BurnDownRecord['scenario'] = 'burn-down'): Promise<void> {
  if (ctx.peers.length === 0 || !ctx.dialects.includes('postgres')) return;
  const url = await postgresBenchUrl();
  const handlerDelayMs = scenario === 'handler-5ms' ? 5 : 0;
  const workerCounts = scenario === 'handler-5ms' ? ctx.plan.handlerWorkerCounts : ctx.plan.peerWorkerCounts;
  const jobs = handlerDelayMs > 0 ? ctx.plan.slowJobs : ctx.plan.jobs;
  for (const peer of ctx.peers) {
    for (const workers of workerCounts) {
      const result = await peerBurnDownIsolated(peer.system, peer.variant, { url, jobs, workers, concurrency: ctx.plan.concurrency, handlerDelayMs, timeoutMs: ctx.plan.runTimeoutMs }, warmUpJobs(jobs), ctx.peerNode);
      ctx.record({
        scenario,
        system: peer.system as BurnDownRecord['system'],
        variant: peer.variant,
        node: result.node,
        dialect: peer.store ?? 'postgres',
        workers,
        processes: 1,
        concurrency: result.slotsPerWorker ?? ctx.plan.concurrency,
        jobs,
        handled: result.handled,
        seconds: round(result.seconds, 3),
        jobsPerSec: Math.round(result.handled / result.seconds),
        timedOut: result.timedOut,
      });
    }
  }
}
