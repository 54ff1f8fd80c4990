/**
 * The six scenarios of the benchmark (issue 6), each bounded in rows and time. A `Plan` holds their sizes;
 * `--quick` (CI) shrinks every one, to one size where each size runs the same code, so the set only proves it runs.
 * The scenarios themselves are in modules by what they measure (throughput-, pickup-, claim-cost-, feature- and
 * claimer-scenarios.ts, broker-scenario.ts), each taking the BenchContext below.
 */
import type { ClaimStrategy } from '@statusq/core/tools';
import { openBenchDatabase, type BenchDatabase, type Dialect } from './databases.js';
import type { Peer } from './peer-contract.js';
import type { BenchRecord } from './records.js';
import type { IdlePickupPlan } from './idle-pickup.js';
import type { WaitForPlan } from './wait-for.js';

export interface Plan {
  /** Jobs of each throughput run: statusq's native burn-downs, the sweep, the raw loops and the peers. */
  jobs: number;
  /**
   * Jobs of the runs whose rate is set by contention or by the 5 ms handler (conditional-update claims, the
   * realistic handler): a few hundred to a few thousand jobs/s, steady well before this many.
   */
  slowJobs: number;
  strategies: readonly ClaimStrategy[];
  workerCounts: number[];
  /** Process counts for statusq's multi-process burn-down (one worker per process). */
  processCounts: number[];
  concurrency: number;
  /** The batch-size scenario's slots per worker (statusq's batch = slots), and the worker counts it runs at. */
  slotSizes: number[];
  slotWorkerCounts: number[];
  /** Worker counts the peers' burn-downs run at (the full plan: workerCounts). */
  peerWorkerCounts: number[];
  pickupRows: number;
  pickupIntervalMs: number;
  /** Finished rows kept in the table for the cost-growth scenario. */
  historySizes: number[];
  costPendingRows: number;
  /** The claim-shapes scenario: pending rows of the plain and priority tables, and delayed rows ahead of the due ones. */
  shapePendingRows: number;
  delayedAheadSizes: number[];
  /** The prune-alongside scenario: old finished rows a prune removes while workers burn down the pending ones. */
  pruneFinishedRows: number;
  prunePendingRows: number;
  handlerWorkerCounts: number[];
  runTimeoutMs: number;
  /**
   * Rounds of the target check after the sweep (batchSize): statusq over the raw loop's own protocol and the
   * minimal raw loop, each at its two fastest settings of the sweep, alternating; the target is read from each
   * side's better median.
   */
  targetRounds: number;
  /**
   * Jobs of each target-check run. More than the sweep's: at 100,000 jobs SQLite's and PostgreSQL's fastest
   * runs end in 0.4-1.3 s, where one WAL checkpoint or collection moves a round by a tenth or more.
   */
  targetJobs: number;
  /** Rounds of the observability scenario (each runs every variant once, in alternating order). */
  observabilityRounds: number;
  /** The rate-limit scenario: the limits (jobs a second) and how long each run lasts at its limit. */
  rateLimits: readonly number[];
  rateLimitSeconds: number;
  /** The idle-pickup scenario: how long the worker idles first, then rows one at a time, gaps in ms. */
  idlePickup: IdlePickupPlan;
  /** The wait-for scenario: rows waited on one at a time, their run times `firstMs` + i x `stepMs`. */
  waitFor: WaitForPlan;
  /**
   * The broker scenario's burn-down: pending rows each run drains through a broker, and by polling beside it, at
   * workerCounts (one process) and processCounts (one worker each). Its pick-up runs take pickupRows.
   */
  brokerJobs: number;
  /**
   * The claimers scenario: worker counts (each worker a store of its own, 16 slots) and the rows each run drains:
   * enough that 128 workers' 2,048 slots reach a steady state between the start and the tail (at 20,000 rows a
   * PostgreSQL run at 128 lasted about a second and read 0.74-0.88 of its best count; at 150,000, 18,373 jobs/s).
   */
  claimerCounts: number[];
  claimerJobs: number;
  /** The claim-latency scenario: round-trip times the TCP proxy adds (ms), and the rows each run drains. */
  latencySteps: number[];
  latencyJobs: number;
}

export const FULL_PLAN: Plan = {
  // At 20,000 jobs the fast runs ended in under half a second and varied by a third between runs.
  jobs: 100_000,
  slowJobs: 20_000,
  strategies: ['native', 'conditional-update'],
  workerCounts: [1, 8, 32],
  processCounts: [2, 4],
  concurrency: 16,
  slotSizes: [16, 64, 256],
  slotWorkerCounts: [1, 8, 32],
  peerWorkerCounts: [1, 8, 32],
  pickupRows: 200,
  pickupIntervalMs: 10,
  historySizes: [10_000, 1_000_000, 10_000_000],
  costPendingRows: 5_000,
  shapePendingRows: 1_000_000,
  delayedAheadSizes: [10_000, 100_000],
  pruneFinishedRows: 1_000_000,
  prunePendingRows: 100_000,
  handlerWorkerCounts: [1, 8, 32],
  // The slowest peer variants take 30-60 s for 100,000 jobs; a run cut off still reports its rate (marked).
  runTimeoutMs: 90_000,
  // A single run at PostgreSQL's or MariaDB's fastest setting varied by up to a fifth from the next.
  targetRounds: 5,
  targetJobs: 500_000,
  observabilityRounds: 5,
  rateLimits: [50, 1_000],
  rateLimitSeconds: 10,
  idlePickup: { warmUpMs: 15_000, idleMs: 10_000, rows: 20, gapMs: [2_000, 3_000] },
  waitFor: { rows: 40, firstMs: 30, stepMs: 30 },
  // One consumer through RabbitMQ drains a few thousand a second: 20,000 is several seconds at every count.
  brokerJobs: 20_000,
  claimerCounts: [8, 32, 64, 128],
  claimerJobs: 100_000,
  latencySteps: [0, 1, 5, 20],
  latencyJobs: 5_000,
};

export const QUICK_PLAN: Plan = {
  jobs: 1_000,
  slowJobs: 500,
  strategies: ['native', 'conditional-update'],
  // One worker count: 1 and 8 workers run the same code (the 1-worker case stays in the target check).
  workerCounts: [8],
  processCounts: [2],
  concurrency: 16,
  // Each run's set-up (a fresh table, a peer's schema migration) costs more than its 1,000 jobs: fewer cases,
  // one size where every size runs the same code (a slot count, a history size).
  slotSizes: [256],
  slotWorkerCounts: [8],
  peerWorkerCounts: [8],
  pickupRows: 15,
  pickupIntervalMs: 10,
  historySizes: [10_000],
  costPendingRows: 500,
  shapePendingRows: 2_000,
  delayedAheadSizes: [1_000],
  pruneFinishedRows: 5_000,
  prunePendingRows: 1_000,
  handlerWorkerCounts: [8],
  runTimeoutMs: 5_000,
  targetRounds: 1,
  targetJobs: 1_000,
  observabilityRounds: 1,
  rateLimits: [50],
  rateLimitSeconds: 1,
  idlePickup: { warmUpMs: 200, idleMs: 500, rows: 2, gapMs: [100, 200] },
  waitFor: { rows: 2, firstMs: 10, stepMs: 20 },
  brokerJobs: 500,
  claimerCounts: [8, 64],
  claimerJobs: 2_000,
  latencySteps: [0, 5],
  latencyJobs: 640,
};

export type ScenarioName = 'burn-down' | 'peers' | 'batch-size' | 'pickup' | 'idle-pickup' | 'cost-growth' | 'claim-shapes' | 'claim-limits' | 'prune-alongside' | 'claim-state' | 'claimers' | 'claim-latency' | 'rate-limit' | 'handler-5ms' | 'observability' | 'broker' | 'wait-for';
export const SCENARIOS: readonly ScenarioName[] = ['burn-down', 'peers', 'batch-size', 'pickup', 'idle-pickup', 'cost-growth', 'claim-shapes', 'claim-limits', 'prune-alongside', 'claim-state', 'claimers', 'claim-latency', 'rate-limit', 'handler-5ms', 'observability', 'broker', 'wait-for'];

export interface BenchContext {
  plan: Plan;
  dialects: readonly Dialect[];
  peers: readonly Peer[];
  /** The Node binary the peers' runs use: a line their `engines` accept (bench.ts' peerNode). */
  peerNode: string;
  record(record: BenchRecord): void;
  log(line: string): void;
}

export async function withDatabase<T>(dialect: Dialect, body: (db: BenchDatabase) => Promise<T>): Promise<T> {
  const db = await openBenchDatabase(dialect);
  try {
    return await body(db);
  } finally {
    await db.close();
  }
}
