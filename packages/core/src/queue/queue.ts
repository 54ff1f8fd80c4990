import { claimRows } from '../sql/claim.js';
import { ConfigError, StoreError } from '../protocol/errors.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import { requeueCause, statusName, type StatusName } from '../protocol/status.js';
import type { ClaimRequest, ClaimResult, ClaimStrategy, ExecResult, JobId, Row, Statement, Store } from '../store/store.js';
import { resolveTable, scopeToKinds, validateTableConfig, type ResolvedTable, type TableConfig } from '../protocol/table.js';
import { idFitsColumn, type ColumnInfo } from '../protocol/columns.js';
import { INSPECT_CLOCK, InspectTimes, asDate, resolveInspectOptions, type InspectIdsReport, type InspectOptions, type InspectReport } from './inspect.js';
import { executeAll, executeOne } from '../sql/side-writes.js';
import { GIVE_UP_PAGE, TransitionSql, type AttemptCharge, type Params } from '../sql/transition-sql.js';
import { besideTableName, missingColumnError } from '../sql/schema.js';
import { CANCEL_PREFIX } from '../sql/recovery-sql.js';
import { Enqueuer } from './enqueue.js';
import type { EnqueueOptions, EnqueueOutcome } from './enqueue-options.js';
import { inEnqueueSpan, loadTracing } from './trace-context.js';
import { SettleWatcher } from './settle-watch.js';
import { monitoringCounts, type MonitoringCountOptions, type MonitoringCounts, type StatusCounts } from './monitoring-counts.js';

/** What a worker process leaves behind for its launcher: its worker id and the claims it had not started. */
export interface DeadWorkerReport {
  workerId: string;
  unstarted: Array<{ id: JobId; token: string | null }>;
}

/** A row a reaper or a dead worker's launcher gave up (failed, its attempts used): what its dead letter says. */
export interface GivenUpRow {
  id: JobId;
  /** The attempt that was running when its worker was lost (attempts before it, plus one). */
  attempt: number;
  /** The reason written to last_error. */
  error: string;
}

/** Claims charged an attempt (back to pending or given up), and the ones given up. */
export interface ChargeReport {
  charged: number;
  givenUp: GivenUpRow[];
}

/** One kind's live rows (Queue.liveCountsByKind). */
export interface LiveKindCounts {
  pending: number;
  processing: number;
}

/** One kind's due pending rows (Queue.duePendingByKind). */
export interface DueKindRows {
  /** Pending rows a claim would take now. */
  due: number;
  /** The least order value among them, as a time; null where the order column holds no time. */
  oldest: Date | null;
  /** How long that row has waited by the database's clock (since its order time); null without a time. */
  waitedMs: number | null;
}

/** The lease a claim is judged by when none is given: the worker's default. */
export const DEFAULT_LEASE_MS = 300_000;

export interface RequeueOptions {
  /** Only these rows. Each is compared as the id column holds it (ColumnInfo.integer). */
  ids?: readonly JobId[] | undefined;
  /**
   * Processing rows on a table with leases: the lease their claims are judged by (default DEFAULT_LEASE_MS);
   * only rows whose lease ran out are requeued.
   */
  leaseMs?: number | undefined;
  /**
   * Processing rows: requeue them whether or not their lease is live. Required on a table without leases,
   * where nothing tells a crashed worker's rows from running ones. Only when no worker runs on the table.
   */
  force?: boolean | undefined;
}

export interface RequeueReport {
  requeued: number;
  /** The lease claims were judged by; null unless processing rows of a table with leases, without force. */
  leaseMs: number | null;
  /** Processing rows left because their lease is live (of `ids`, when given). */
  live: number;
  /** Of `ids`, each one not requeued and why: `not found`, `status done` (or another state), `lease live`. */
  notRequeued: Array<{ id: JobId; reason: string }>;
}

export interface CancelReport {
  /** Rows cancelled: pending ones never run; running ones' workers abort their handlers at their next heartbeat. */
  cancelled: number;
  /** Of the ids, each one not cancelled and why: `not found`, `status done` (or another finished state). */
  notCancelled: Array<{ id: JobId; reason: string }>;
}

/** Queue.waitFor's options. */
export interface WaitForOptions {
  /** Give up after this many milliseconds: waitFor then resolves with status `timeout`. Default: no limit. */
  timeoutMs?: number | undefined;
  /** Aborting it rejects waitFor with the signal's reason. */
  signal?: AbortSignal | undefined;
}

/** How a row ended, as Queue.waitFor reports it. */
export interface WaitForOutcome {
  /** The row's final status, or `timeout` when timeoutMs ran out first (the row was still pending or processing). */
  status: 'done' | 'failed' | 'abuse' | 'timeout';
  /** The result column, parsed as JSON (its text as it is when it is not JSON); undefined without the column or a result. */
  result: unknown;
  /** The last_error column; null without the column or an error. */
  lastError: string | null;
}

/**
 * One queue table on one store: the table checked against the database once, and every operation on its
 * rows. The worker and the CLI both go through this.
 */
function emptyCounts(): StatusCounts {
  return { pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 };
}

export class Queue {
  readonly sql: TransitionSql;
  private readonly enqueuer: Enqueuer;
  /** Every waitFor of this queue, read together (created by the first). */
  private settles: SettleWatcher | null = null;
  /** The id column as the database declares it; `integer` says how ids compare. */
  readonly idColumn: ColumnInfo;
  private constructor(
    readonly store: Store,
    readonly table: ResolvedTable,
    private readonly columns: readonly ColumnInfo[],
  ) {
    this.idColumn = columns.find((c) => c.name === table.id) ?? { name: table.id, type: '', unique: true, integer: false, maxLength: null };
    this.sql = new TransitionSql(table, store.dialect);
    this.enqueuer = new Enqueuer(store, table, this.sql, this.idColumn, new Set(columns.map((c) => c.name.toLowerCase())));
  }

  /** Checks the configuration against the real table; a missing table or column is a SchemaError here. */
  static async open(store: Store, config: TableConfig): Promise<Queue> {
    // Names are checked before any of them reaches SQL, even the read-only introspection.
    validateTableConfig(config);
    const columns = await store.describeTable(config.table);
    // A claims table beside it (migrate --beside) holds the claim state; its presence is what says so.
    const besideName = besideTableName(config.table);
    const besideColumns = columns === null ? null : await store.describeTable(besideName);
    const beside = besideColumns === null ? null : { table: besideName, columns: besideColumns };
    await loadTracing();
    return new Queue(store, resolveTable(config, columns, (c) => store.orderTimeEncoding(c), beside), columns ?? []);
  }

  /**
   * This queue as a worker with handlers for `kinds` sees it: its claims, guards and look-ahead ask for those
   * kinds only (ResolvedTable.claimKinds). A table without a kind column is a SchemaError naming the migration.
   */
  forKinds(kinds: readonly string[]): Queue {
    return new Queue(this.store, scopeToKinds(this.table, kinds), this.columns);
  }

  async claim(request: ClaimRequest, strategy: ClaimStrategy = 'native'): Promise<ClaimResult> {
    if (!Number.isSafeInteger(request.limit) || request.limit < 1) throw new ConfigError(`claim limit must be a positive integer, got ${request.limit}`);
    return claimRows(this.store, this.table, request, strategy);
  }

  /**
   * Runs guarded transitions with one commit; `affected` of each says whether it happened. A single
   * statement runs in autocommit: it is atomic on its own, and BEGIN/COMMIT would triple its round trips
   * (a flush of grouped completions is usually one statement).
   */
  async apply(statements: readonly Statement[]): Promise<ExecResult[]> {
    if (statements.length === 0) return [];
    if (statements.length === 1) return [await executeOne(this.store, statements[0]!)];
    return executeAll(this.store, statements);
  }

  /**
   * Pending rows a relay (or an enqueue with dispatchTo) published and no consumer has claimed since: what
   * waits in the broker's queue as the table sees it. Null on a table without the dispatch column.
   */
  async dispatchedCount(): Promise<number | null> {
    if (!this.table.features.dispatch) return null;
    const { rows } = await this.store.execute(this.sql.countWaitingInBroker());
    return Number(rows[0]?.n ?? 0);
  }

  async counts(): Promise<StatusCounts> {
    const counts = emptyCounts();
    const { rows } = await this.store.execute(this.sql.countByStatus());
    for (const row of rows) this.tally(counts, row);
    return counts;
  }

  /**
   * Rows by status for each kind, on a table with a kind column (rows without a kind under the key ''); null on a
   * table without one. Every kind that has rows is there, a kind no worker handles included: what waits for it.
   */
  async countsByKind(): Promise<Record<string, StatusCounts> | null> {
    if (!this.table.features.kinds) return null;
    const byKind: Record<string, StatusCounts> = {};
    const { rows } = await this.store.execute(this.sql.countByKindAndStatus());
    for (const row of rows) this.tally((byKind[kindKey(row.kind)] ??= emptyCounts()), row);
    return byKind;
  }

  /**
   * Pending and processing rows per kind (rows without a kind under ''), on a table with a kind column; null on a
   * table without one. It reads the live rows only (what the kind index holds), never the finished ones, so it is
   * cheap enough for a gauge however many finished rows the table keeps.
   */
  async liveCountsByKind(): Promise<Record<string, LiveKindCounts> | null> {
    if (!this.table.features.kinds) return null;
    const byKind: Record<string, LiveKindCounts> = {};
    const { rows } = await this.store.execute(this.sql.countLiveByKind());
    for (const row of rows) {
      const status = statusName(statusCodeOf(row.status), this.table.codes);
      if (status !== 'pending' && status !== 'processing') continue;
      (byKind[kindKey(row.kind)] ??= { pending: 0, processing: 0 })[status] += Number(row.n);
    }
    return byKind;
  }

  /**
   * The due pending rows of each kind of the whole table (rows without a kind under ''): how many and how long
   * the one with the least order value has waited. Null on a table without a kind column. A kind whose rows wait
   * long with none of its rows processing is one no running worker has a handler for.
   */
  async duePendingByKind(): Promise<Record<string, DueKindRows> | null> {
    if (!this.table.features.kinds) return null;
    const { rows } = await this.store.execute(this.sql.duePendingByKind());
    const times = new InspectTimes(this.table);
    const byKind: Record<string, DueKindRows> = {};
    for (const row of rows) {
      const oldest = times.orderTime(row.oldest);
      const clock = asDate(row.clock, 0);
      byKind[kindKey(row.kind)] = { due: Number(row.n), oldest, waitedMs: oldest === null || clock === null ? null : clock.getTime() - oldest.getTime() };
    }
    return byKind;
  }

  private tally(counts: StatusCounts, row: Row): void {
    counts[statusName(statusCodeOf(row.status), this.table.codes) ?? 'other'] += Number(row.n);
  }

  /**
   * Rows by status for monitoring, cheap on a table with millions of finished rows: pending and processing
   * counted exactly (up to `countUpTo` each), finished statuses estimated by the planner where an exact count
   * would read them all; exact everywhere on a small table. `estimated` names the estimates; see monitoring-counts.ts.
   */
  monitoringCounts(options: MonitoringCountOptions = {}): Promise<MonitoringCounts> {
    return monitoringCounts(this.store, this.table, this.sql, () => this.counts(), options);
  }

  /**
   * Up to `limit` rows of one status (default the 20 newest failed), in the order that matters for that
   * status; see TransitionSql.inspect for the order and what each costs. Read only.
   */
  async inspect(options: InspectOptions = {}): Promise<InspectReport> {
    const { status, limit, kind } = resolveInspectOptions(options);
    const { rows } = await this.store.execute(this.sql.inspect(status, limit, INSPECT_CLOCK, kind));
    const times = new InspectTimes(this.table);
    const read = rows.map((row) => times.read(row));
    return { status, limit, ...(kind !== undefined && { kind }), columns: this.sql.inspectColumns(), rows: read.map((r) => r.row), clock: read[0]?.clock ?? null };
  }

  /** The rows with these ids, whole, and the ids no row has. Each id is compared as the id column holds it. */
  async inspectIds(ids: readonly JobId[]): Promise<InspectIdsReport> {
    const unique = [...new Map(ids.map((id) => [String(id), id])).values()];
    const possible = unique.filter((id) => idFitsColumn(this.idColumn, id));
    if (possible.length === 0) return { rows: [], notFound: unique, clock: null };
    const { rows } = await this.store.execute(this.sql.inspectIds(possible, INSPECT_CLOCK));
    const times = new InspectTimes(this.table);
    const found = new Map(rows.map((row) => [String(row[this.table.id]), times.read(row)]));
    const report: InspectIdsReport = { rows: [], notFound: [], clock: null };
    for (const id of unique) {
      const entry = found.get(String(id));
      if (!entry) report.notFound.push(id);
      else {
        report.rows.push(entry.row);
        report.clock = entry.clock;
      }
    }
    return report;
  }

  /** A row is pending and due now (what a claim would take). */
  async hasDueRow(): Promise<boolean> {
    return (await this.store.execute(this.sql.anyDueRow())).rows.length > 0;
  }

  /**
   * Milliseconds until the earliest pending row that waits for its next_attempt_at comes due, by the database's
   * clock (0 or less: due), looking at the first rows in queue order (TransitionSql.nextDueTime); null when none
   * waits or the table has no next_attempt_at.
   */
  async msUntilNextDue(): Promise<number | null> {
    if (!this.table.columns.nextAttemptAt) return null;
    const row = (await this.store.execute(this.sql.nextDueTime())).rows[0];
    // statusq's own time columns and the clock read as inspect reads them (a driver's Date, or epoch ms).
    const due = asDate(row?.due, 0);
    const now = asDate(row?.now, 0);
    return due === null || now === null ? null : due.getTime() - now.getTime();
  }

  /**
   * A row is in any of these states. Several names are asked in one statement, which reads one snapshot:
   * a row moving between them meanwhile (a claim, a reap) is seen in one state or the other, never missed.
   */
  async hasRowsWithStatus(...names: [StatusName, ...StatusName[]]): Promise<boolean> {
    const codes = names.map((name) => (name === 'pending' ? null : this.table.codes[name]));
    const { rows } = await this.store.execute(this.sql.anyRowWithStatus(...codes));
    return rows.length > 0;
  }

  /**
   * Claims whose lease expired go back to pending, or to failed once they used their attempts: how many in
   * all, and which were given up (for their dead letters).
   */
  async reapExpired(leaseMs: number, maxAttempts: number): Promise<ChargeReport> {
    const probe = this.sql.anyExpired(leaseMs);
    if (probe && (await this.store.execute(probe)).rows.length === 0) return { charged: 0, givenUp: [] };
    const charge = this.sql.reapExpired(leaseMs, maxAttempts);
    return charge ? this.chargeAttempts(charge) : { charged: 0, givenUp: [] };
  }

  /**
   * After a worker process died: its claims whose handlers had not started go back to pending at no cost
   * (release, guarded by their claim tokens); every other claim it still holds was running and costs one
   * attempt (ownerDied). Needs the worker-id column, which is how a dead process's claims are found.
   */
  async recoverDeadWorker(dead: DeadWorkerReport, reason: string, maxAttempts: number): Promise<{ released: number } & ChargeReport> {
    if (!this.table.features.fencing) return { released: 0, charged: 0, givenUp: [] };
    const released = await withStoreRetry(() => this.apply(dead.unstarted.map((claim) => this.sql.release(claim.id, claim.token))), STORE_RETRY.write);
    const charge = this.sql.ownerDied(dead.workerId, reason, maxAttempts);
    // One list across retries: rows a failed try already gave up no longer match, and keep their dead letters.
    const givenUp: GivenUpRow[] = [];
    const charged = charge ? await withStoreRetry(() => this.chargeAttempts(charge, givenUp), STORE_RETRY.write) : { charged: 0, givenUp };
    return { released: released.filter((r) => r.affected === 1).length, ...charged };
  }

  /** Runs an AttemptCharge: the rows that used their attempts fail one by one, page after page; the rest go back. */
  private async chargeAttempts(charge: AttemptCharge, givenUp: GivenUpRow[] = []): Promise<ChargeReport> {
    if (charge.exhausted && charge.giveUp) {
      const giveUp = charge.giveUp;
      // Each page's rows leave the condition (failed here, or changed by someone else), so pages end; the
      // bound only keeps a misbehaving server from looping us.
      for (let page = 0; page < 1_000; page++) {
        const { rows } = await this.store.execute(charge.exhausted);
        const results = await this.apply(rows.map((row) => giveUp(row.id as JobId)));
        results.forEach((result, i) => {
          if (result.affected === 1) givenUp.push({ id: rows[i]!.id as JobId, attempt: Number(rows[i]!.attempts ?? 0) + 1, error: charge.error });
        });
        if (rows.length < GIVE_UP_PAGE) break;
      }
    }
    if (charge.back) return { charged: givenUp.length + (await this.store.execute(charge.back)).affected, givenUp };
    let sentBack = 0;
    if (charge.remaining && charge.sendBack) {
      const sendBack = charge.sendBack;
      for (let page = 0; page < 1_000; page++) {
        const { rows } = await this.store.execute(charge.remaining);
        sentBack += (await this.apply(rows.map((row) => sendBack(row.id as JobId)))).filter((result) => result.affected === 1).length;
        if (rows.length < GIVE_UP_PAGE) break;
      }
    }
    return { charged: givenUp.length + sentBack, givenUp };
  }

  /**
   * Operator requeue: failed or abuse rows (or rows stuck in processing) back to pending; how many. Any
   * other `from` is an IllegalTransitionError (see requeueCause).
   */
  async requeue(from: StatusName, ids?: readonly JobId[], options: Omit<RequeueOptions, 'ids'> = {}): Promise<number> {
    return (await this.requeueReport(from, { ...options, ids })).requeued;
  }

  /**
   * Operator requeue, with what it left. failed and abuse rows start their attempts over. Processing rows:
   * on a table with leases only those whose lease ran out unless `force`; on a table without, a ConfigError
   * unless `force`. Their interrupted attempt counts, as the reaper counts it (see requeueProcessing). The
   * report and the requeue run in one transaction. Rows of any other state cannot be requeued: an
   * IllegalTransitionError, before any statement runs.
   */
  async requeueReport(from: StatusName, options: RequeueOptions = {}): Promise<RequeueReport> {
    const cause = requeueCause(from);
    const force = options.force === true;
    const leases = this.table.features.leases;
    const name = this.table.table;
    if (cause !== 'requeueProcessing' && (force || options.leaseMs !== undefined)) throw new ConfigError('requeue: --force and --lease apply only to --status processing');
    if (cause === 'requeueProcessing' && !leases) {
      if (options.leaseMs !== undefined) throw new ConfigError(`requeue: table ${name} has no lease column (claimed_at), so there is no lease to judge its rows by`);
      if (!force) {
        throw new ConfigError(`requeue: table ${name} has no lease column, so statusq cannot tell a crashed worker's rows from running ones; stop every worker, then run again with --force`);
      }
    }
    const leaseMs = cause === 'requeueProcessing' && leases && !force ? (options.leaseMs ?? DEFAULT_LEASE_MS) : null;
    if (leaseMs !== null && !(Number.isFinite(leaseMs) && leaseMs >= 0)) throw new ConfigError(`requeue: lease must be a non-negative number of milliseconds, got ${leaseMs}`);
    const named = options.ids ? [...new Map(options.ids.map((id) => [String(id), id])).values()] : undefined;
    // An id beyond the id column's integers is no row's: it is not looked up, and reported not found below.
    const ids = named?.filter((id) => idFitsColumn(this.idColumn, id));
    if (named && ids?.length === 0) return { requeued: 0, leaseMs, live: 0, notRequeued: named.map((id) => ({ id, reason: 'not found' })) };

    const statements: Statement[] = [];
    if (ids) statements.push(this.sql.statusOfIds(ids, leaseMs));
    statements.push(cause === 'requeueProcessing' ? this.sql.requeueProcessing(ids, leaseMs) : this.sql.requeue(from, ids));
    if (leaseMs !== null && !ids) statements.push(this.sql.countWithStatus(this.table.codes.processing));
    const results = await withStoreRetry(() => this.apply(statements), STORE_RETRY.write).catch((error: unknown) => {
      // A failed or abuse row's deduplication key may be held by a newer live row (or by another row requeued
      // with it): pending again, the two would share a live key, which the key index refuses for the whole batch.
      if (!(error instanceof StoreError) || error.kind !== 'UniqueViolation' || !this.table.features.dedupe) throw error;
      throw new StoreError(
        'UniqueViolation',
        `requeue: nothing was requeued, because a row among them has a ${this.table.columns.dedupeKey} that a pending or processing row (or another of them) holds; requeue the others by id, or once that row has finished (${error.message})`,
        error.nativeCode,
        { cause: error },
      );
    });
    const requeued = results[ids ? 1 : 0]!.affected;
    if (!ids) return { requeued, leaseMs, live: leaseMs === null ? 0 : Number(results[1]!.rows[0]?.n ?? 0), notRequeued: [] };

    const found = new Map(results[0]!.rows.map((row) => [String(row.id), row]));
    const notRequeued: RequeueReport['notRequeued'] = [];
    let live = 0;
    for (const id of named!) {
      const row = found.get(String(id));
      if (!row) {
        notRequeued.push({ id, reason: 'not found' });
        continue;
      }
      const code = row.status === null || row.status === undefined ? null : Number(row.status);
      const status = statusName(code, this.table.codes);
      if (status !== from) notRequeued.push({ id, reason: `status ${status ?? String(code)}` });
      else if (leaseMs !== null && Number(row.expired) !== 1) {
        live++;
        notRequeued.push({ id, reason: 'lease live' });
      }
    }
    return { requeued, leaseMs, live, notRequeued };
  }

  /**
   * Operator cancel: each of `ids` that is pending or processing ends failed, `last_error` `cancelled: <reason>`.
   * A pending row never runs. A running row's worker finds its claim gone at its next heartbeat and aborts the
   * handler's ctx.signal with that reason; whatever the handler then writes is guarded by the claim and changes
   * nothing. Rows of other states are left and reported, with unknown ids. The report and the cancel run in
   * one transaction. A table without a last_error column is a SchemaError: there a cancelled row could not be
   * told from a failed one, nor could its worker tell a cancel from a lease taken over.
   */
  async cancel(ids: readonly JobId[], reason = 'by an operator'): Promise<CancelReport> {
    if (!this.table.columns.lastError) throw missingColumnError(this.table.table, 'lastError', 'a cancel');
    if (typeof reason !== 'string' || reason.length === 0) throw new ConfigError('cancel: the reason must be a non-empty string');
    const named = [...new Map(ids.map((id) => [String(id), id])).values()];
    // An id beyond the id column's integers is no row's: it is not looked up, and reported not found below.
    const looked = named.filter((id) => idFitsColumn(this.idColumn, id));
    if (looked.length === 0) return { cancelled: 0, notCancelled: named.map((id) => ({ id, reason: 'not found' })) };
    const results = await withStoreRetry(() => this.apply([this.sql.statusOfIds(looked, null), this.sql.cancel(looked, `${CANCEL_PREFIX}${reason}`)]), STORE_RETRY.write);
    const found = new Map(results[0]!.rows.map((row) => [String(row.id), row]));
    const notCancelled: CancelReport['notCancelled'] = [];
    for (const id of named) {
      const row = found.get(String(id));
      if (!row) {
        notCancelled.push({ id, reason: 'not found' });
        continue;
      }
      const code = row.status === null || row.status === undefined ? null : Number(row.status);
      const status = statusName(code, this.table.codes);
      if (status !== 'pending' && status !== 'processing') notCancelled.push({ id, reason: `status ${status ?? String(code)}` });
    }
    return { cancelled: results[1]!.affected, notCancelled };
  }

  /**
   * Of `ids` (claims a heartbeat found gone), the ones an operator cancelled, with the reason their last_error
   * holds (`cancelled: ...`); the rest were taken over by a lease or settled by someone else.
   */
  async cancelledAmong(ids: readonly JobId[]): Promise<Map<string, string>> {
    const statement = this.sql.cancelledAmong(ids);
    if (!statement || ids.length === 0) return new Map();
    const { rows } = await this.store.execute(statement);
    return new Map(rows.map((row) => [String(row.id), String(row.reason)]));
  }

  /**
   * Resolves once the row with this id is finished (done, failed, or abuse: failed only once it gave up, a
   * retry in between is still pending), with its result and last error; with status `timeout` when
   * `timeoutMs` runs out first. Rejects at once with a ConfigError when no row has the id (and later if the
   * row is deleted while waited for), and with the signal's reason when `signal` aborts. Every waitFor of a
   * queue is read by one watcher (SettleWatcher): one SELECT of the awaited rows whenever the store's settle
   * wake-up fires (Store.waitForChange: a change of the database, a notification naming the settled rows, or a
   * steady short pace, as the store can), and on a backoff (10 ms doubling to 1 s) always, so a settle is never missed
   * for longer than that backoff. A status that is no state statusq writes is waited on like a live one.
   */
  async waitFor(id: JobId, options: WaitForOptions = {}): Promise<WaitForOutcome> {
    const { timeoutMs, signal } = options;
    if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs >= 0 && !Number.isNaN(timeoutMs))) {
      throw new ConfigError(`waitFor: timeoutMs must be a non-negative number of milliseconds, got ${String(timeoutMs)}`);
    }
    signal?.throwIfAborted();
    // An id that no integer id column can hold (beyond its range, or text that is no integer) is no row's: not
    // looked up, where the server would refuse it as bad input rather than find nothing, and not found.
    const integerText = typeof id === 'string' && this.idColumn.integer;
    const possible = integerText ? /^-?\d+$/.test(id.trim()) && idFitsColumn(this.idColumn, BigInt(id.trim())) : idFitsColumn(this.idColumn, id);
    if (!possible) throw new ConfigError(`waitFor: no row of ${this.table.table} has id ${String(id)}`);
    const watcher = (this.settles ??= new SettleWatcher(this.store, this.table, (value) => this.idKey(value), (ids) => this.sql.outcomeOfIds(ids)));
    return new Promise<WaitForOutcome>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let ended = false;
      const end = (settle: () => void) => {
        ended = true;
        leave();
        clearTimeout(timer);
        signal?.removeEventListener('abort', aborted);
        settle();
      };
      const aborted = () => end(() => reject(signal!.reason));
      const leave = watcher.watch(
        id,
        (row, firstRead) => {
          // A read already under way when the wait ended (its timeout, an abort) reports to nobody.
          if (ended) return;
          if (!row) {
            end(() => reject(new ConfigError(firstRead ? `waitFor: no row of ${this.table.table} has id ${String(id)}` : `waitFor: the row of ${this.table.table} with id ${String(id)} was deleted while waited for`)));
            return;
          }
          const status = statusName(statusCodeOf(row.status), this.table.codes);
          if (status === 'done' || status === 'failed' || status === 'abuse') {
            end(() => resolve({ status, result: parseResult(row.result), lastError: row.last_error === null || row.last_error === undefined ? null : String(row.last_error) }));
            return;
          }
          // Timed from the first read, so even a timeout of 0 reports the row as it was.
          if (firstRead && timeoutMs !== undefined && timeoutMs <= MAX_TIMER_MS) timer = setTimeout(() => end(() => resolve({ status: 'timeout', result: undefined, lastError: null })), timeoutMs);
        },
        (error) => {
          if (!ended) end(() => reject(error));
        },
      );
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }

  /** An id as waitFor's reads and a store's settle wake-up are matched by: an integer id column's by value, others by their text. */
  private idKey(value: unknown): string {
    const text = String(value);
    if (!this.idColumn.integer || typeof value === 'number' || typeof value === 'bigint') return text;
    return /^\s*-?\d+\s*$/.test(text) ? BigInt(text.trim()).toString() : text;
  }

  /** abuse (pending -> abuse) without a claim, for a business rule applied outside a worker. */
  async markAbuse(id: JobId, reason: string): Promise<boolean> {
    return (await withStoreRetry(() => this.apply([this.sql.abuse(id, null, reason, 'pending')]), STORE_RETRY.write))[0]!.affected === 1;
  }

  /**
   * Inserts pending rows and returns their ids, in item order (`.length` is how many). On a table with a payload
   * column each item is a payload, stored as JSON. On a table without one each item must be an object of
   * column values (an application's own rows). Every item is checked before anything is written. All rows go
   * in one transaction: when the database rejects one, none is committed, and the EnqueueError names the item.
   * With `chunk`, every `chunk` rows commit on their own (for a file too big for one transaction); a rejection
   * then leaves the chunks before it committed, and the EnqueueError says how many rows that is and their ids.
   * With `transaction`, the rows are written in the caller's transaction (see EnqueueOptions.transaction).
   *
   * An id is what the database returned for the INSERT (RETURNING, on a store with `insertReturning`), else the
   * one the item set in the id column, else the id column's auto-increment value as the driver reports it
   * (ExecResult.insertId). It is typed as the store reads ids (a number, or past 2^53 a bigint or a decimal
   * string, as the adapter reads them; an item's '17' for an integer id column is 17). It is null only where the
   * database cannot say: on a store without `insertReturning`, an id column that is not auto-increment, filled
   * by a default or a trigger, that the item did not set (the generated key the driver reports is then another
   * column's). Every table initTable creates has known ids.
   */
  async enqueue(items: readonly unknown[], options: EnqueueOptions = {}): Promise<Array<JobId | null>> {
    return (await this.enqueueDetailed(items, options)).map((outcome) => outcome.id);
  }

  /**
   * enqueue, saying of each item whether it was inserted or was a duplicate of a live row with its key
   * (EnqueueOptions.key). Without keys every outcome has `duplicate: false`.
   */
  enqueueDetailed(items: readonly unknown[], options: EnqueueOptions = {}): Promise<EnqueueOutcome[]> {
    const count = Array.isArray(items) ? items.length : 0;
    return inEnqueueSpan(this.table, count, (outcomes) => outcomes.map((o) => o.id), () => this.enqueuer.enqueueDetailed(items, options));
  }

  /**
   * One row, inserted only if `claim.update` (a guarded UPDATE of another table) changes a row, in the same
   * transaction: `claim.onlyWhere` is the FROM ... WHERE that finds the row that UPDATE just claimed (the
   * INSERT selects its values from it), so a claim lost to someone else inserts nothing. A schedule's tick is
   * claimed this way (scheduler.ts). `item` and `options` are enqueue's; the key, when given, is set on the row.
   */
  enqueueIfClaimed(item: unknown, options: Pick<EnqueueOptions, 'priority' | 'key' | 'kind'>, claim: { update: Statement; onlyWhere: (p: Params) => string }): Promise<{ claimed: boolean; id: JobId | null }> {
    return this.enqueuer.enqueueIfClaimed(item, options, claim);
  }
}

/** The longest a timer can wait (2^31 - 1 ms); a longer waitFor timeout is no limit. */
const MAX_TIMER_MS = 2_147_483_647;

/** A kind as the counts by kind key it: rows without one under ''. */
function kindKey(value: unknown): string {
  return value === null || value === undefined ? '' : String(value);
}

/**
 * A status value as the integer it stands for; anything else (text such as 'done' or '', a fraction) is NaN,
 * which matches no code. Number() alone would read '' as 0, i.e. failed.
 */
function statusCodeOf(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number' || typeof value === 'bigint') return Number(value);
  return typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : Number.NaN;
}

/** A result column's value: a driver's parsed JSON as it is, text parsed as JSON (kept as text when it is not). */
function parseResult(value: unknown): unknown {
  if (value === null || value === undefined) return undefined;
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    return value;
  }
}
