/** What every measurement is written as: one JSON line each, read back to make tables and the chart. */
import type { Dialect } from './databases.js';

/**
 * `raw-protocol` is the hand-written claim/settle loop of raw-protocol.ts: the ceiling, not a queue.
 * `raw-statusq-sql` is the same loop sending statusq's own statements through its store (no worker).
 */
export type System = 'statusq' | 'graphile-worker' | 'pg-boss' | 'bullmq' | 'raw-protocol' | 'raw-statusq-sql';

/** Where a run's jobs lived: a SQL dialect, or (BullMQ's default backend) the local Redis. */
export type Store = Dialect | 'redis';

/** The variant of statusq's batch-size runs with every optional column off (throughput-scenarios.ts batchSize). */
export const STATUS_ONLY_VARIANT = 'native, status only';

export interface BurnDownRecord {
  /**
   * `batch-size`: statusq's native burn-down at each slots-per-worker of the sweep (batch = slots).
   * `target-check`: statusq over the raw loop's own protocol and the minimal raw loop, each at its fastest
   * setting of the sweep, again in alternating rounds (`round`): the target is read from their medians.
   * `broker-burn-down`: consumer workers taking the rows a relay publishes (variant `relay, <broker>`) against
   * polling workers (`polling`) at the same counts (broker-scenario.ts broker).
   */
  scenario: 'burn-down' | 'handler-5ms' | 'batch-size' | 'target-check' | 'broker-burn-down';
  /** target-check only: the round (0-based); rounds alternate which side runs first. */
  round?: number;
  system: System;
  /**
   * statusq: `native` or `conditional-update` (`native, status only`: every optional column off and `select: []`, in the
   * batch-size sweep); peers: their batching mode; raw-protocol: `claim <n>`.
   */
  variant: string;
  /** The Node version a peer's run ran on (a line its `engines` accept); absent: the bench's own. */
  node?: string;
  dialect: Store;
  workers: number;
  /** OS processes the workers ran in (1: all in the bench process). */
  processes: number;
  concurrency: number;
  /** batch-size only: rows per claim (= concurrency in the sweep). */
  batch?: number;
  jobs: number;
  handled: number;
  seconds: number;
  jobsPerSec: number;
  timedOut: boolean;
  /** statusq only: claim calls (batches) per job handled. */
  claimCallsPerJob?: number;
  /** statusq only: database round trips the claims made, per job handled (see claimRoundTrips). */
  claimRoundTripsPerJob?: number;
  /** statusq only: candidates another claimer took first, per 100 claim attempts (claimed + lost). */
  lostPer100?: number;
  /** statusq on MySQL only: deadlocks and lock wait timeouts met (and re-run) per 1,000 jobs. */
  deadlocksPer1000?: number;
  /** statusq only: CPU cores busy on average in the workers' process(es) and in the database server. */
  benchCpu?: number;
  serverCpu?: number | null;
  /**
   * broker-burn-down through a relay: the time the relay's confirmed batches took (SELECT to last confirm, summed),
   * in percent of the run's span. Near 100 the one relay is what paces the run, not the consumers.
   */
  relayBusyPercent?: number;
  /** statusq only: errors the workers met and survived, by kind (none expected). */
  errors?: Record<string, number>;
}

export interface PickupRecord {
  scenario: 'pickup';
  system: System;
  /**
   * statusq: `<strategy>, listen` (LISTEN/NOTIFY), `<strategy>, idle probe` (MySQL) or `<strategy>, polling`; through a
   * broker `relay, <broker>` or `dispatchTo, <broker>` (broker-scenario.ts broker); peers: their mode.
   */
  variant: string;
  dialect: Store;
  rows: number;
  received: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** One worker's burn-down of `jobs` rows with every claim timed at the store (cost-growth, claim-shapes). */
export interface ClaimTiming {
  jobs: number;
  handled: number;
  timedOut: boolean;
  jobsPerSec: number;
  claimCalls: number;
  claimP50Ms: number;
  claimP99Ms: number;
}

export interface CostRecord extends ClaimTiming {
  scenario: 'cost-growth';
  system: 'statusq';
  dialect: Dialect;
  finishedRows: number;
  pendingIndex: boolean;
}

/**
 * The claim on a table of one shape (the features of issue 15 that touch it), timed at the store while one worker
 * burns down `jobs` due rows: `plain` (the managed table), `priority` (a priority column with ten levels, mixed,
 * and its index), `delayed ahead` (rows due in a day, newer than the due ones, so newest first they come first).
 */
export interface ClaimShapeRecord extends ClaimTiming {
  scenario: 'claim-shapes';
  system: 'statusq';
  dialect: Dialect;
  shape: 'plain' | 'priority' | 'delayed ahead';
  /** Pending rows in the table when the run starts (delayed ones included). */
  pendingRows: number;
  /** Of them, not due (delayed ahead). */
  delayedRows: number;
}

/** The claim with kinds and under group limits beside the plain claim (claim-cost-scenarios.ts claimLimits). */
export interface ClaimLimitRecord extends ClaimTiming {
  scenario: 'claim-limits';
  system: 'statusq';
  dialect: Dialect;
  shape: 'plain' | 'kinds: 2 of 4 handled' | '10 groups, 4 at once each' | '10 groups, serial' | '10,000 groups, 4 at once each';
  pendingRows: number;
}

/** Workers burning down pending rows alone, or while a prune deletes the table's old finished rows (feature-scenarios.ts pruneAlongside). */
export interface PruneRecord {
  scenario: 'prune-alongside';
  system: 'statusq';
  dialect: Dialect;
  pruning: boolean;
  jobs: number;
  handled: number;
  timedOut: boolean;
  jobsPerSec: number;
  finishedRows: number;
  pruned?: number;
  pruneSeconds?: number;
  pruneRowsPerSec?: number;
}

/** statusq's workers burning down one table of `jobs` rows: what the scenarios below share. */
interface StatusqBurnDown {
  system: 'statusq';
  dialect: Dialect;
  workers: number;
  concurrency: number;
  jobs: number;
  handled: number;
  timedOut: boolean;
  jobsPerSec: number;
}

/**
 * One table burned down by more and more claimers (claimer-scenarios.ts claimers); `claimGate` on MySQL/MariaDB: the
 * store's default gate or none (`off`), null elsewhere.
 */
export interface ClaimersRecord extends StatusqBurnDown {
  scenario: 'claimers';
  claimGate: 'default' | 'off' | null;
  serverCpu: number | null;
  /** Cores the workers' process used (absent in records from before it was kept). */
  workersCpu?: number;
}

/** One worker of 64 slots burning down a table through a TCP proxy adding `addedRttMs` to each round trip (claimer-scenarios.ts claimLatency). */
export interface ClaimLatencyRecord extends StatusqBurnDown {
  scenario: 'claim-latency';
  addedRttMs: number;
}

/**
 * Workers burning down one table with its claim state in its own columns, then in a claims table beside it
 * (`migrate --beside`): what keeping the application's table unchanged costs per job (feature-scenarios.ts claimState).
 */
export interface ClaimStateRecord extends StatusqBurnDown {
  scenario: 'claim-state';
  claimState: 'in-table' | 'beside';
}

/** Three processes of 16 slots under one shared rate limit (feature-scenarios.ts rateLimit): the rate achieved against the limit. */
export interface RateLimitRecord {
  scenario: 'rate-limit';
  system: 'statusq';
  dialect: Dialect;
  /** The limit, in jobs a second. */
  limitPerSec: number;
  processes: number;
  concurrency: number;
  jobs: number;
  handled: number;
  timedOut: boolean;
  /** Jobs settled over the run, first settle to last: the budget's burst at the start counts in it. */
  jobsPerSec: number;
  /** jobsPerSec over the limit, in percent (100: exactly the limit). */
  ofLimitPercent: number;
}

export interface IdlePickupRecord {
  scenario: 'idle-pickup';
  system: 'statusq';
  dialect: Dialect;
  /** How the idle worker learns of a row: `listen`, `file watch`, `idle probe`, `polling`, `polling, pollMaxMs 50`. */
  variant: string;
  idleSeconds: number;
  /** CPU of the waiting worker's process and of the database server over the idle spell, % of one core. */
  idleWorkerCpuPercent: number;
  idleServerCpuPercent: number | null;
  rows: number;
  received: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface WaitForRecord {
  scenario: 'wait-for';
  system: 'statusq';
  dialect: Dialect;
  /** How the waiter learns of a settle: `settle notify`, `file watch`, `probe pace`, `backoff` (see wait-for.ts). */
  variant: string;
  rows: number;
  /** The jobs' run times, first and last (ms): the time waitFor had waited when the settle came. */
  runMs: [number, number];
  /** From the settle's commit to waitFor resolving. */
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
}

/** The observability scenario's variants: see observability.ts. */
export const OBSERVABILITY_VARIANTS = ['quiet', 'logs', 'metrics', 'observed', 'progress'] as const;
export type ObservabilityVariant = (typeof OBSERVABILITY_VARIANTS)[number];

export interface ObservabilityRecord {
  scenario: 'observability';
  system: 'statusq';
  dialect: 'postgres';
  variant: ObservabilityVariant;
  round: number;
  jobs: number;
  concurrency: number;
  seconds: number;
  jobsPerSec: number;
  /** Seconds the same variant took on an empty queue (start-up, shutdown): subtracted for `netJobsPerSec`. */
  fixedSeconds: number;
  netJobsPerSec: number;
  scrapes: number;
  logBytes: number;
  /** CPU seconds (user + system) of the `statusq work` process, per 1,000 jobs: steadier than throughput. */
  cpuMsPer1000Jobs: number;
  /** The PostgreSQL server's CPU (postmaster and backends) during the run, per 1,000 jobs; absent when not readable. */
  serverCpuMsPer1000Jobs?: number;
  /** cpuMsPer1000Jobs + serverCpuMsPer1000Jobs: what one job costs the machine. */
  totalCpuMsPer1000Jobs?: number;
  /** `--side-by-side`: the variant that ran at the same moment, on a table of its own. */
  sideBySideWith?: ObservabilityVariant;
}

export type BenchRecord = BurnDownRecord | PickupRecord | CostRecord | ClaimShapeRecord | ClaimLimitRecord | PruneRecord | ClaimStateRecord | ClaimersRecord | ClaimLatencyRecord | RateLimitRecord | IdlePickupRecord | ObservabilityRecord | WaitForRecord;

/** The q-th quantile (0..1) by nearest rank; NaN for no samples. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
