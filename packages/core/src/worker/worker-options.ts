import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { ConfigError } from '../protocol/errors.js';
import type { AbuseRule, Handler, IdOf, KindHandlers } from './handler.js';
import { handlerRoutes, type HandlerRoutes } from './handler-routes.js';
import { parseKindLimits, parseKindRates } from '../limits/kind-concurrency.js';
import { resolveGroupLimits } from '../limits/group-limits.js';
import { DEFAULT_LEASE_MS } from '../queue/queue.js';
import { DEFAULT_READ_ONLY_WAIT_MS } from './read-only-wait.js';
import { assertDispatchColumns } from '../sql/schema.js';
import type { Broker } from '../broker/broker.js';
import type { ClaimStrategy, JobId, Row, Store } from '../store/store.js';
import type { RateLimit } from '../limits/rate-budget.js';
import type { ResolvedTable, TableConfig } from '../protocol/table.js';

/**
 * `R`: the type of a claimed row (`job.row`), e.g. an interface of the table's columns; default any columns.
 * `Id`: the type of `job.id`; default the row type's `id`, else any JobId.
 */
export interface WorkerOptions<R extends object = Row, Id extends JobId = IdOf<R>, Kinds extends object = Record<string, unknown>> {
  store: Store;
  table: TableConfig;
  /** The one handler of every row. Give this or `handlers`. */
  handler?: Handler<R, Id> | undefined;
  /**
   * Handlers by kind (`{ email: async (job) => ..., report: ... }`), on a table with a kind column (`migrate --with
   * kinds`): the worker claims only rows of these kinds, and runs each with its kind's handler; rows of other
   * kinds (and rows without one) stay pending for workers that have them. `Kinds` types each kind's payload
   * (`Worker.create<Row, Id, { email: { to: string } }>`). Give this or `handler`.
   */
  handlers?: KindHandlers<R, Id, Kinds> | undefined;
  /** Business rule run on each claimed row before the handler; true settles the row to abuse (2). */
  isAbuse?: AbuseRule<R> | undefined;
  /**
   * Jobs run at once by this worker. Default 4. A job whose handler has ended no longer takes a slot while its
   * settle commits, so the next claim overlaps that commit: the rows the worker holds in processing reach
   * twice this at most (and only this before the worker's first settle has committed, and while a settle is
   * being retried or waits out a read-only database).
   */
  concurrency?: number | undefined;
  /** Rows claimed per claim call, at most the free slots. Default: the concurrency. */
  batch?: number | undefined;
  /**
   * At most this many job starts per period across every worker of the table, in every process and host
   * (`{ count: 50, periodMs: 1000 }`, or `'50/s'`, `'300/m'`, `'1000/h'`); every worker of the table should
   * be given the same. The budget is a row of statusq_rate_limits, on the database's clock (limits/rate-budget.ts).
   * Default: no limit.
   */
  rateLimit?: RateLimit | string | undefined;
  /**
   * Fleet-wide limits per kind, with handlers by kind: `{ report: 2 }` (or `'report=2,email=5'`) keeps at most 2
   * rows of kind `report` processing at once across every worker, process and host that runs with the same limit
   * (limits/kind-concurrency.ts). Give every worker of the table the same. A limit of a kind this worker has no
   * handler for changes nothing here. Default: none.
   */
  kindConcurrency?: Readonly<Record<string, number>> | string | undefined;
  /**
   * Fleet-wide rates per kind, with handlers by kind: `{ email: '50/s' }` (or `'email=50/s,report=1/m'`) starts at
   * most 50 `email` rows a second across every worker, process and host given the same; a budget per kind beside
   * the table's (`rateLimit`). Kinds without one are not held to it. Default: none.
   */
  kindRate?: Readonly<Record<string, RateLimit | string>> | string | undefined;
  /**
   * At most this many rows of one group processing at once across every worker, process and host (1: each group
   * runs serially, in queue order), on a table with a group column (`migrate --with groups`); rows without a
   * group are not limited. Give every worker of the table the same (limits/group-limits.ts). Default: none.
   */
  groupConcurrency?: number | undefined;
  /**
   * At most this many starts of one group per period, fleet-wide (`'2/s'` or `{ count: 2, periodMs: 1000 }`):
   * per-host politeness for a table grouped by host. Give every worker of the table the same. Default: none.
   */
  groupRate?: RateLimit | string | undefined;
  /**
   * `native` (default): the store's best safe claim; `conditional-update`: the seed's portable claim. A
   * store set to conditional-update (an adapter's own claimStrategy option) declares no native claim, so conditional-update
   * wins wherever it is set.
   */
  claimStrategy?: ClaimStrategy | undefined;
  /** Attempts per job. Default 3 when the table has an attempt_count column, else 1 (the seed: failure is final). */
  maxAttempts?: number | undefined;
  /** First retry delay; it then doubles, with jitter. Default 1 s. Needs next_attempt_at to take effect. */
  retryDelayMs?: number | undefined;
  /** Cap on one retry delay. Default 1 h. */
  maxRetryDelayMs?: number | undefined;
  /** Lease length when the table has claimed_at. Default 5 min. */
  leaseMs?: number | undefined;
  /** Heartbeat period for running jobs. Default a third of the lease. */
  heartbeatMs?: number | undefined;
  /** How often this worker looks for expired leases. Default half the lease. */
  reapIntervalMs?: number | undefined;
  /**
   * Idle polling starts at this delay and doubles up to pollMaxMs. Defaults DEFAULT_POLL_MIN_MS (25 ms) and
   * DEFAULT_POLL_MAX_MS (1 s). A store that wakes its idle workers when rows arrive (`listenNotify`: the
   * server's notifications, or a watch on the database file) ends the wait early. A store with an idle probe
   * (`idleProbe`, set by the adapter's `idleProbeMs`)
   * replaces this polling while the worker has nothing in flight: it claims when the probe sees a due row
   * (or every IDLE_PROBE_WAIT_MS); with the probe off, pollMaxMs bounds how long a row enqueued after a
   * quiet spell waits there.
   */
  pollMinMs?: number | undefined;
  pollMaxMs?: number | undefined;
  /** Aging: rows older than this (by the order column) are claimed first, oldest first. Off by default. */
  agingMs?: number | undefined;
  /** Stop once no row is pending (due or scheduled), none is in flight here and, with leases, none is processing. */
  exitWhenEmpty?: boolean | undefined;
  /** Identifies this worker in claim tokens. Default host:pid:random. */
  workerId?: string | undefined;
  /**
   * Most settles committed in one transaction. Default: the claim batch, at least 200. A smaller group than
   * the batch splits a claimed batch's completions into two commits, and the slots freed by the first are
   * refilled by a claim of only that many rows: ragged batches from then on (measured on one adapter's server at 256
   * slots: 126 rows a claim instead of 256).
   */
  settleBatch?: number | undefined;
  /**
   * Longest a handler may run. Past it ctx.signal aborts and the attempt counts as failed (retried while
   * attempts remain). A handler that has not returned `jobTimeoutGraceMs` (default 5 s) after the abort is
   * stuck: the worker stops claiming, lets its other jobs finish, settles the stuck row as a failed attempt and
   * ends run() with reason `recycle`, so the process can exit and take the stuck handler with it. Off by default.
   */
  jobTimeoutMs?: number | undefined;
  jobTimeoutGraceMs?: number | undefined;
  /**
   * How long to wait for a read-only database (a replica, a hot standby, a primary a failover turned
   * read-only) to take writes again: claims stop and the worker checks again with backoff (from pollMaxMs up
   * to 5 s apart); settles that meet it are kept and retried as long. Past it run() rejects with StoreError
   * ReadOnly and rows still in processing stay there for the lease reaper (or a requeue). Default 120 s
   * (DEFAULT_READ_ONLY_WAIT_MS: the slowest common managed failover); 0 ends the run at the first refusal.
   */
  readOnlyWaitMs?: number | undefined;
  /**
   * Take jobs from a broker's messages instead of polling the table (statusq work --from; a relay publishes the
   * table's due rows, see Relay). Each message's row is claimed with the same guarded UPDATE a polling claim
   * runs, so duplicates and stale messages change nothing, and its message is acked once the job is over.
   * Needs the dispatch columns with leases and fencing (statusq migrate --with leases,dispatch). The worker
   * does not close the broker.
   */
  from?: Broker | undefined;
  /** With `from`: most messages delivered and not yet taken at once. Default 2 x concurrency, at least the batch. */
  prefetch?: number | undefined;
  /** Source of randomness for jitter (tests pin it). */
  random?: (() => number) | undefined;
}

/** Longest timer Node can arm (about 24.8 days); longer ones fire at once. */
const MAX_TIMER_MS = 2_147_483_647;

/** An idle worker's first wait between empty claims; it doubles from here. */
export const DEFAULT_POLL_MIN_MS = 25;
/** The longest an idle worker waits between empty claims. */
export const DEFAULT_POLL_MAX_MS = 1_000;

/** The options a Worker runs with: validated, and every default filled in from the table's features. */
export interface WorkerSettings {
  concurrency: number;
  batch: number;
  claimStrategy: ClaimStrategy;
  maxAttempts: number;
  retryDelayMs: number;
  maxRetryDelayMs: number;
  leaseMs: number;
  heartbeatMs: number;
  reapIntervalMs: number;
  pollMinMs: number;
  pollMaxMs: number;
  /** null: no job timeout. */
  jobTimeoutMs: number | null;
  jobTimeoutGraceMs: number;
  random: () => number;
  workerId: string;
  settleBatch: number;
  readOnlyWaitMs: number;
  prefetch: number;
  /** Which handler runs a job, and the kinds the worker claims (null: every row). */
  routes: HandlerRoutes;
  /** The fleet-wide limits of the kinds this worker handles (kindConcurrency); empty: none. */
  kindLimits: ReadonlyMap<string, number>;
  /** The fleet-wide rates of the kinds this worker handles (kindRate); empty: none. */
  kindRates: ReadonlyMap<string, RateLimit>;
  /** The table's group limits (groupConcurrency, groupRate); null: none. */
  groupLimits: { concurrency: number | null; rate: RateLimit | null } | null;
}

/** Checks every option (ConfigError naming the first bad one) before the worker touches a row. */
export function resolveWorkerOptions(options: WorkerOptions, table: Pick<ResolvedTable, 'table' | 'features'>): WorkerSettings {
  const features = table.features;
  const concurrency = positiveInteger(options.concurrency, 4, 'concurrency');
  const batch = positiveInteger(options.batch, concurrency, 'batch', 10_000);
  const maxAttempts = positiveInteger(options.maxAttempts, features.retries ? 3 : 1, 'maxAttempts', 1_000_000);
  if (maxAttempts > 1 && !features.retries) {
    throw new ConfigError(`maxAttempts ${maxAttempts} needs an attempt counter: table ${table.table} has no attempt_count column (statusq migrate --with retries)`);
  }
  const retryDelayMs = nonNegative(options.retryDelayMs, 1000, 'retryDelay');
  const maxRetryDelayMs = nonNegative(options.maxRetryDelayMs, 3_600_000, 'maxRetryDelay');
  if (options.leaseMs !== undefined && !features.leases) {
    throw new ConfigError(`a lease needs a claim time: table ${table.table} has no claimed_at column (statusq migrate --with leases)`);
  }
  const leaseMs = nonNegative(options.leaseMs, DEFAULT_LEASE_MS, 'lease');
  if (features.leases && leaseMs < 10) throw new ConfigError('lease must be at least 10 ms');
  const heartbeatMs = nonNegative(options.heartbeatMs, Math.max(5, Math.floor(leaseMs / 3)), 'heartbeat');
  const reapIntervalMs = nonNegative(options.reapIntervalMs, Math.max(5, Math.floor(leaseMs / 2)), 'reapInterval');
  const pollMinMs = nonNegative(options.pollMinMs, DEFAULT_POLL_MIN_MS, 'pollMin');
  const pollMaxMs = Math.max(pollMinMs, nonNegative(options.pollMaxMs, DEFAULT_POLL_MAX_MS, 'pollMax'));
  if (options.agingMs !== undefined) nonNegative(options.agingMs, 0, 'aging');
  if ((options as { strategy?: unknown }).strategy !== undefined) throw new ConfigError('the worker option "strategy" was renamed "claimStrategy"');
  const claimStrategy = options.claimStrategy ?? 'native';
  if (claimStrategy !== 'native' && claimStrategy !== 'conditional-update') {
    throw new ConfigError(`claimStrategy must be "native" or "conditional-update", got ${JSON.stringify(claimStrategy)}`);
  }
  const jobTimeoutMs = options.jobTimeoutMs === undefined ? null : nonNegative(options.jobTimeoutMs, 0, 'jobTimeout');
  if (jobTimeoutMs !== null && jobTimeoutMs < 1) throw new ConfigError('jobTimeout must be at least 1 ms');
  const jobTimeoutGraceMs = nonNegative(options.jobTimeoutGraceMs, 5_000, 'jobTimeoutGrace');
  const routes = handlerRoutes(options);
  if (routes.kinds !== null && options.from !== undefined) {
    throw new ConfigError('handlers by kind take their rows from the table: a worker taking jobs from a broker (from) runs one handler');
  }
  const kindLimits = options.kindConcurrency === undefined ? new Map<string, number>() : parseKindLimits(options.kindConcurrency, 'kindConcurrency');
  if (kindLimits.size > 0 && routes.kinds === null) throw new ConfigError('kindConcurrency limits kinds: it needs handlers by kind (handlers: { report: ... })');
  const ownLimits = new Map([...kindLimits].filter(([kind]) => routes.kinds?.includes(kind)));
  const kindRates = options.kindRate === undefined ? new Map<string, RateLimit>() : parseKindRates(options.kindRate, 'kindRate');
  if (kindRates.size > 0 && routes.kinds === null) throw new ConfigError('kindRate paces kinds: it needs handlers by kind (handlers: { email: ... })');
  const ownRates = new Map([...kindRates].filter(([kind]) => routes.kinds?.includes(kind)));
  const groupLimits = resolveGroupLimits({ concurrency: options.groupConcurrency, rate: options.groupRate });
  if (groupLimits !== null && options.from !== undefined) throw new ConfigError('group limits hold claims from the table: a worker taking jobs from a broker (from) has none to hold');
  if (groupLimits !== null && !features.groups) {
    throw new ConfigError(`group limits need a group column: table ${table.table} has none (statusq migrate --with groups adds group_key; an application's own column: columns.group, --group-column)`);
  }
  const random = options.random ?? Math.random;
  const workerId = options.workerId ?? defaultWorkerId();
  const settleBatch = positiveInteger(options.settleBatch, Math.max(200, batch), 'settleBatch');
  const readOnlyWaitMs = nonNegative(options.readOnlyWaitMs, DEFAULT_READ_ONLY_WAIT_MS, 'readOnlyWait');
  const prefetch = positiveInteger(options.prefetch, Math.max(2 * concurrency, batch), 'prefetch', 65_535);
  if (options.from !== undefined) assertDispatchColumns(table, 'a worker taking jobs from a broker');
  return { concurrency, batch, claimStrategy, maxAttempts, retryDelayMs, maxRetryDelayMs, leaseMs, heartbeatMs, reapIntervalMs, pollMinMs, pollMaxMs, jobTimeoutMs, jobTimeoutGraceMs, random, workerId, settleBatch, readOnlyWaitMs, prefetch, routes, kindLimits: ownLimits, kindRates: ownRates, groupLimits };
}

function positiveInteger(value: number | undefined, fallback: number, what: string, max = 10_000): number {
  const n = value ?? fallback;
  if (!Number.isSafeInteger(n) || n < 1 || n > max) throw new ConfigError(`${what} must be an integer from 1 to ${max}, got ${String(n)}`);
  return n;
}

export function nonNegative(value: number | undefined, fallback: number, what: string): number {
  const n = value ?? fallback;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0 || n > MAX_TIMER_MS) {
    throw new ConfigError(`${what} must be a number of milliseconds from 0 to ${MAX_TIMER_MS} (about 24.8 days), got ${String(value)}`);
  }
  return n;
}

export function defaultWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

