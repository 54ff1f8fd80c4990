import { claimRows } from '../sql/claim.js';
import { dispatchId, type Broker } from '../broker/broker.js';
import { ConfigError, EnqueueError, SchemaError, StoreError } from '../protocol/errors.js';
import { integerIdOf } from '../store/caller-transaction.js';
import { validateIdentifier } from '../protocol/identifiers.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import { requeueCause, statusName, type StatusName } from '../protocol/status.js';
import type { ClaimRequest, ClaimResult, ClaimStrategy, ExecResult, JobId, SqlValue, Statement, Store } from '../store/store.js';
import { columnOverflow, idFitsColumn, idValueIn, resolveTable, validateTableConfig, type ColumnInfo, type ResolvedTable, type TableConfig } from '../protocol/table.js';
import { INSPECT_CLOCK, InspectTimes, asDate, resolveInspectOptions, type InspectIdsReport, type InspectOptions, type InspectReport } from './inspect.js';
import { executeAll, executeOne, runStatement } from '../sql/side-writes.js';
import { GIVE_UP_PAGE, TransitionSql, type AttemptCharge, type NotBefore, type Params } from '../sql/transition-sql.js';
import { besideTableName, hasIndex, keyIndexName, missingColumnError } from '../sql/schema.js';
import { DELAY_LIMIT, parseDuration } from '../protocol/duration.js';
import { fitsStatementLimit, statementTooLarge } from '../sql/statement-size.js';
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

export interface EnqueueOptions {
  /** Commit every `chunk` rows on their own instead of all rows in one transaction. Not with `transaction`. */
  chunk?: number | undefined;
  /** How messages name item `index` (0-based); default `item N`. The CLI names file lines. */
  describeItem?: ((index: number) => string) | undefined;
  /** How messages name the key option when a key it gave is refused; default `the key option`. The CLI says `--key`. */
  describeKey?: string | undefined;
  /**
   * The application's open transaction, to write the rows in (the outbox pattern: the jobs commit with the
   * application's own writes, or not at all). What the adapter takes (Store.runnerFor): a knex transaction
   * (`trx`), or the driver's connection that began it (a pg Client or PoolClient, a mysql2 connection, a
   * better-sqlite3 Database). It must be inside an open transaction: one that is not (each INSERT would commit
   * on its own) is a ConfigError before anything is written. statusq runs only the INSERTs on it: no BEGIN,
   * COMMIT or ROLLBACK, and no retry, since a retry inside someone else's transaction could repeat or reorder
   * writes the caller cannot see.
   */
  transaction?: unknown;
  /**
   * Delayed jobs: the rows are pending but not claimed before `delayMs` milliseconds from the database's now
   * (never this process's clock). Needs a `next_attempt_at` column (`migrate --with delays`, or `retries`);
   * a table without one is a SchemaError before anything is written. Not with `runAt`.
   */
  delayMs?: number | undefined;
  /**
   * Delayed jobs: the rows are not claimed before this instant (a Date, or ISO 8601 text with a time zone:
   * `2026-12-01T10:00:00Z`), as the database's clock reads it. A time already past is due at once. Not with
   * `delayMs`.
   */
  runAt?: Date | string | undefined;
  /**
   * The rows' priority: higher is claimed first (then the queue order). An integer from -2147483648 to
   * 2147483647; rows enqueued without one have 0. Needs a `priority` column (`migrate --with priority`).
   */
  priority?: number | undefined;
  /**
   * Deduplication key: while a row with this key is pending or processing, enqueueing it again inserts nothing
   * and reports that row's id (EnqueueOutcome.duplicate); once the row settles (done, abuse, failed) the key is
   * free. A string is the key of the one item of the call; for several items, a function gives each item's key
   * (null or undefined: that item has none). A key is 1 to 255 characters without surrounding whitespace, and
   * keys compare exactly ('Key' and 'key' are two). Race-safe: the database's key index decides between
   * enqueuers at the same moment. Keyed rows commit one at a time, in item order (not with `chunk`). Needs a
   * `dedupe_key` column and its index (`migrate --with dedupe`; tables `init` makes have both). An item of an
   * application's table may set the `dedupe_key` column itself instead.
   */
  key?: string | ((item: unknown, index: number) => string | null | undefined) | undefined;
  /**
   * Publishes each new row to this broker right after the commit, so a consumer (a worker with `from`) starts
   * it without waiting for the relay's next pass: the lowest pick-up a table without LISTEN/NOTIFY (MySQL) can
   * have. The rows are written as dispatched; a publish that fails un-marks them and the relay publishes them
   * (the enqueue still succeeds: the rows are committed). A process that dies between the commit and the
   * publish leaves them to the relay's redispatch age. Not with delays, keys or the caller's transaction (the
   * relay publishes those), nor where the insert cannot tell the new row's id (no RETURNING and no
   * AUTO_INCREMENT id: the relay publishes those too); EnqueueOutcome.published says which rows went. Needs
   * the dispatch column (`migrate --with dispatch`).
   */
  dispatchTo?: Broker | undefined;
  /** With dispatchTo: called when the publish failed and the rows were left to the relay (the enqueue still resolves). */
  onDispatchError?: ((error: unknown) => void) | undefined;
}

/** What enqueue did with one item (Queue.enqueueDetailed). */
export interface EnqueueOutcome {
  /** The inserted row's id, or for a duplicate the id of the live row that holds the key (see Queue.enqueue on ids). */
  id: JobId | null;
  /** True when nothing was inserted because a pending or processing row already holds the item's key. */
  duplicate: boolean;
  /**
   * With dispatchTo: true when the broker confirmed this row's message. False when the publish failed (the
   * relay publishes the row) or the row's id did not come back from the insert. Absent without dispatchTo.
   */
  published?: boolean;
}

/**
 * One queue table on one store: the table checked against the database once, and every operation on its
 * rows. The worker and the CLI both go through this.
 */
export class Queue {
  readonly sql: TransitionSql;
  /** The id column as the database declares it; `integer` says how ids compare. */
  readonly idColumn: ColumnInfo;
  private readonly columnNames: ReadonlySet<string>;
  private constructor(
    readonly store: Store,
    readonly table: ResolvedTable,
    columns: readonly ColumnInfo[],
  ) {
    this.columnNames = new Set(columns.map((c) => c.name.toLowerCase()));
    this.idColumn = columns.find((c) => c.name === table.id) ?? { name: table.id, type: '', unique: true, integer: false, maxLength: null };
    this.sql = new TransitionSql(table, store.dialect);
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
    return new Queue(store, resolveTable(config, columns, (c) => store.orderTimeEncoding(c), beside), columns ?? []);
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
    const counts: StatusCounts = { pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 };
    const { rows } = await this.store.execute(this.sql.countByStatus());
    for (const row of rows) {
      const code = statusCodeOf(row.status);
      counts[statusName(code, this.table.codes) ?? 'other'] += Number(row.n);
    }
    return counts;
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
    const { status, limit } = resolveInspectOptions(options);
    const { rows } = await this.store.execute(this.sql.inspect(status, limit, INSPECT_CLOCK));
    const times = new InspectTimes(this.table);
    const read = rows.map((row) => times.read(row));
    return { status, limit, columns: this.sql.inspectColumns(), rows: read.map((r) => r.row), clock: read[0]?.clock ?? null };
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
   * An id is what the database returned for the INSERT (RETURNING, on PostgreSQL and SQLite), else the one the
   * item set in the id column, else the id column's AUTO_INCREMENT value (MySQL/MariaDB). It is typed as the
   * store reads ids (a number, or past 2^53 a bigint on PostgreSQL, a decimal string on MySQL; an item's '17'
   * for an integer id column is 17). It is null only where the database cannot say: on MySQL/MariaDB, an id
   * column that is not AUTO_INCREMENT, filled by a default or a trigger, that the item did not set (the
   * generated key MySQL reports is then another column's). Every table initTable creates has known ids.
   */
  async enqueue(items: readonly unknown[], options: EnqueueOptions = {}): Promise<Array<JobId | null>> {
    return (await this.enqueueDetailed(items, options)).map((outcome) => outcome.id);
  }

  /**
   * enqueue, saying of each item whether it was inserted or was a duplicate of a live row with its key
   * (EnqueueOptions.key). Without keys every outcome has `duplicate: false`.
   */
  async enqueueDetailed(items: readonly unknown[], options: EnqueueOptions = {}): Promise<EnqueueOutcome[]> {
    if (!Array.isArray(items)) throw new ConfigError(`enqueue takes an array of items, got ${items === null ? 'null' : typeof items}`);
    if (options === null || typeof options !== 'object') throw new ConfigError('enqueue options must be an object');
    const describe = options.describeItem ?? ((index: number) => `item ${index + 1}`);
    const notBefore = notBeforeOf(options);
    const stamp = this.stampOf(options);
    const keyOf = this.keysOf(items, options);
    if (options.dispatchTo !== undefined && (options.transaction !== undefined || keyOf)) {
      throw new ConfigError("enqueue: dispatchTo is not taken with keys or in the caller's transaction; the relay publishes those rows");
    }
    const inserted = (ids: Array<JobId | null>) => ids.map((id) => ({ id, duplicate: false }));
    if (options.transaction !== undefined) {
      if (keyOf) throw new ConfigError("enqueue: deduplication keys are not taken in the caller's transaction yet; enqueue keyed rows on their own");
      return inserted(await this.enqueueInTransaction(options.transaction, items, describe, options.chunk, notBefore, stamp));
    }
    const rows: Array<Record<string, SqlValue>> = [];
    // Each row's key, checked with the row: one an application row sets itself, or the key option's.
    const keys: Array<string | null> = [];
    // A bad key is the key option's fault when the option gave it: named as the caller names the option.
    const keyName = options.describeKey ?? 'the key option';
    const describeKey =
      !keyOf ? describe : typeof options.key === 'string' ? () => `enqueue: ${keyName}` : options.describeKey === undefined ? describe : (index: number) => `${describe(index)}: ${keyName}`;
    items.forEach((item, index) => {
      const row = this.rowFor(item, index, describe, notBefore, stamp, keyOf?.(index));
      rows.push(row);
      keys.push(this.keyIn(row, describeKey, index));
    });
    if (keyOf || keys.some((key) => key !== null)) {
      if (options.chunk !== undefined) throw new ConfigError('enqueue: keyed rows commit one at a time; give chunk or keys, not both');
      return this.enqueueKeyed(rows, keys, describe, notBefore);
    }
    const chunk = options.chunk ?? Math.max(1, items.length);
    if (!Number.isSafeInteger(chunk) || chunk < 1) throw new ConfigError(`enqueue chunk must be a positive integer, got ${chunk}`);
    const returningId = this.store.capabilities.insertReturning;
    // Rows are written as dispatched only where their ids are known after the insert, to publish: returned, MySQL's
    // AUTO_INCREMENT key, or the row's own. A row marked and never published would wait for the relay's redispatch age.
    const dispatching = this.dispatchesOnCommit(options, notBefore);
    const idComesBack = returningId || this.idColumn.autoIncrement === true;
    const dispatched = rows.map((row) => dispatching && (idComesBack || this.ownIdOf(row) !== null));
    const statements = rows.map((row, i) => this.sql.insert(row, { returningId, notBefore, dispatched: dispatched[i]! }));
    statements.forEach((statement, index) => this.checkStatementSize(statement, index, describe));
    const ids: Array<JobId | null> = [];
    const published: boolean[] = [];
    for (let start = 0; start < statements.length; start += chunk) {
      const slice = statements.slice(start, start + chunk);
      try {
        const results = await withStoreRetry(() => executeAll(this.store, slice), STORE_RETRY.write);
        results.forEach((result, i) => ids.push(this.insertedId(result, rows[start + i]!, returningId)));
      } catch (error) {
        if (!(error instanceof StoreError)) throw error;
        const item = error.statementIndex === undefined ? undefined : start + error.statementIndex;
        const where = item !== undefined ? describe(item) : `a row between ${describe(start)} and ${describe(start + slice.length - 1)}`;
        const message =
          options.chunk === undefined
            ? `${where} was rejected by the database, so nothing was committed: ${error.message}`
            : `${ids.length} row${ids.length === 1 ? '' : 's'} committed before ${where} failed: ${error.message}`;
        throw new EnqueueError(message, error, item, ids.length, ids);
      }
      const marked = (i: number) => dispatched[i]! && ids[i] !== null;
      const toPublish = ids.slice(start).filter((_, i) => marked(start + i));
      const went = toPublish.length > 0 && (await this.publishCommitted(options, toPublish));
      for (let i = start; i < ids.length; i++) published.push(went && marked(i));
    }
    if (options.dispatchTo === undefined) return inserted(ids);
    return ids.map((id, i) => ({ id, duplicate: false, published: published[i]! }));
  }

  /** Whether this enqueue publishes its rows itself (EnqueueOptions.dispatchTo); a ConfigError where it cannot. */
  private dispatchesOnCommit(options: EnqueueOptions, notBefore: NotBefore | undefined): boolean {
    if (options.dispatchTo === undefined) return false;
    if (typeof options.dispatchTo?.publish !== 'function') throw new ConfigError('enqueue: dispatchTo must be a broker (see connectBroker)');
    if (notBefore !== undefined) throw new ConfigError('enqueue: dispatchTo publishes at once; a delayed row is published by the relay when it is due');
    if (!this.table.columns.dispatchedAt) throw missingColumnError(this.table.table, 'dispatchedAt', 'enqueue with dispatchTo');
    return true;
  }

  /** The committed rows' messages, and whether the broker took them; rows it did not take go back to the relay. */
  private async publishCommitted(options: EnqueueOptions, ids: ReadonlyArray<JobId | null>): Promise<boolean> {
    const known = ids.filter((id): id is JobId => id !== null);
    if (known.length === 0) return false;
    try {
      await options.dispatchTo!.publish(known.map((id) => ({ table: this.table.table, id: dispatchId(id), attempt: 1 })));
      return true;
    } catch (error) {
      options.onDispatchError?.(error);
      await withStoreRetry(() => this.store.execute(this.sql.unmarkDispatched(known)), STORE_RETRY.write).catch((unmarkError: unknown) => options.onDispatchError?.(unmarkError));
      return false;
    }
  }

  /**
   * Rows of which some carry a deduplication key, one at a time in item order, each committing on its own. A keyed
   * row is inserted unless a live row holds its key (Queue.insertKeyed); a row without one as any other.
   */
  private async enqueueKeyed(rows: ReadonlyArray<Record<string, SqlValue>>, keys: ReadonlyArray<string | null>, describe: (index: number) => string, notBefore: NotBefore | undefined): Promise<EnqueueOutcome[]> {
    const returningId = this.store.capabilities.insertReturning;
    rows.forEach((row, index) => this.checkStatementSize(this.sql.insert(row, { returningId, notBefore }), index, describe));
    await this.assertKeyIndex();
    const outcomes: EnqueueOutcome[] = [];
    for (const [index, row] of rows.entries()) {
      try {
        const key = keys[index]!;
        if (key === null) {
          const result = await withStoreRetry(() => executeOne(this.store, this.sql.insert(row, { returningId, notBefore })), STORE_RETRY.write);
          outcomes.push({ id: this.insertedId(result, row, returningId), duplicate: false });
        } else {
          outcomes.push(await this.insertKeyed(row, key, notBefore));
        }
      } catch (error) {
        if (!(error instanceof StoreError)) throw error;
        const committed = outcomes.filter((o) => !o.duplicate).length;
        const message =
          committed === 0
            ? `${describe(index)} was rejected by the database, and no row of this call was committed: ${error.message}`
            : `${committed} row${committed === 1 ? '' : 's'} committed before ${describe(index)} failed: ${error.message}`;
        throw new EnqueueError(message, error, index, committed, outcomes.map((o) => o.id));
      }
    }
    return outcomes;
  }

  /**
   * One keyed row: the INSERT, and when the key index refuses it the id of the live row that holds the key. The
   * key index is the arbiter, so of any number of enqueuers racing with one key exactly one inserts. The holder
   * may settle between the refused INSERT and the read, freeing the key: then the INSERT runs again (at most
   * KEYED_INSERT_ATTEMPTS times). Where the store skips conflicts (PostgreSQL, SQLite), the first INSERT skips any
   * unique index's, so a later one does not: a conflict with another unique index of an application's table
   * then fails as the error it is, instead of passing for a duplicate.
   */
  private async insertKeyed(row: Record<string, SqlValue>, key: string, notBefore: NotBefore | undefined): Promise<EnqueueOutcome> {
    const returningId = this.store.capabilities.insertReturning;
    let skipConflicts = this.store.capabilities.insertOnConflictDoNothing;
    let refusal: StoreError | undefined;
    for (let attempt = 0; attempt < KEYED_INSERT_ATTEMPTS; attempt++) {
      const insert = this.sql.insert(row, { returningId, notBefore, skipConflicts });
      try {
        const result = await withStoreRetry(() => executeOne(this.store, insert), STORE_RETRY.write);
        if (result.affected > 0) return { id: this.insertedId(result, row, returningId), duplicate: false };
      } catch (error) {
        if (!(error instanceof StoreError) || error.kind !== 'UniqueViolation') throw error;
        refusal = error;
      }
      const holder = await withStoreRetry(() => this.store.execute(this.sql.liveKeyHolder(key)), STORE_RETRY.write);
      const id = holder.rows[0]?.id;
      if (typeof id === 'number' || typeof id === 'bigint' || typeof id === 'string') return { id, duplicate: true };
      skipConflicts = false;
    }
    throw refusal ?? new StoreError('WriteConflict', `the row with key ${JSON.stringify(key)} was refused ${KEYED_INSERT_ATTEMPTS} times, yet no live row holds the key`);
  }

  /**
   * One row, inserted only if `claim.update` (a guarded UPDATE of another table) changes a row, in the same
   * transaction: `claim.onlyWhere` is the FROM ... WHERE that finds the row that UPDATE just claimed (the
   * INSERT selects its values from it), so a claim lost to someone else inserts nothing. A schedule's tick is
   * claimed this way (scheduler.ts). `item` and `options` are enqueue's; the key, when given, is set on the row.
   */
  async enqueueIfClaimed(item: unknown, options: Pick<EnqueueOptions, 'priority' | 'key'>, claim: { update: Statement; onlyWhere: (p: Params) => string }): Promise<{ claimed: boolean; id: JobId | null }> {
    const describe = () => 'the scheduled row';
    const stamp = this.stampOf(options);
    const row = this.rowFor(item, 0, describe, undefined, stamp, this.keysOf([item], options)?.(0));
    this.keyIn(row, describe, 0);
    const returningId = this.store.capabilities.insertReturning;
    const insert = this.sql.insert(row, { returningId, onlyWhere: claim.onlyWhere });
    this.checkStatementSize(insert, 0, describe);
    const [update, inserted] = await withStoreRetry(() => this.store.executeBatch([claim.update, insert]), STORE_RETRY.write);
    if (update!.affected !== 1) return { claimed: false, id: null };
    return { claimed: true, id: this.insertedId(inserted!, row, returningId) };
  }

  private keyIndexChecked: Promise<void> | undefined;

  /**
   * Keys are race-safe only through the key index: a table with a dedupe_key column but without the index (the
   * column added by hand, the index dropped) would let two enqueuers insert one key. Checked once per queue.
   */
  private assertKeyIndex(): Promise<void> {
    const schema = this.store.schema;
    if (!schema) return Promise.resolve();
    this.keyIndexChecked ??= (async () => {
      const name = keyIndexName(this.table.table);
      if (await hasIndex(this.store, schema, this.table.table, name)) return;
      throw new SchemaError(
        `table ${this.table.table} has a ${this.table.columns.dedupeKey} column but not its key index ${name}, without which two enqueuers of one key could both insert (statusq migrate --with dedupe builds it)`,
      );
    })().catch((error: unknown) => {
      this.keyIndexChecked = undefined;
      throw error;
    });
    return this.keyIndexChecked;
  }

  /** Each item's key as EnqueueOptions.key gives it, checked against the table; undefined when the call gives none. */
  private keysOf(items: readonly unknown[], options: EnqueueOptions): ((index: number) => string | null) | undefined {
    const { key } = options;
    if (key === undefined) return undefined;
    if (typeof key !== 'string' && typeof key !== 'function') throw new ConfigError(`enqueue: key must be a string or a function of the item, got ${key === null ? 'null' : typeof key}`);
    if (this.table.columns.dedupeKey === undefined) throw missingColumnError(this.table.table, 'dedupeKey', 'a deduplication key');
    if (typeof key === 'string') {
      if (items.length !== 1) throw new ConfigError(`enqueue: a key string names one row, and ${items.length} items were given; give key as a function of the item`);
      return () => key;
    }
    return (index) => key(items[index], index) ?? null;
  }

  /** The deduplication key a row carries (checked), or null. */
  private keyIn(row: Record<string, SqlValue>, describe: (index: number) => string, index: number): string | null {
    const column = this.table.columns.dedupeKey;
    if (column === undefined) return null;
    const value = row[column];
    if (value === undefined || value === null) return null;
    // Characters as the databases count them (code points: an emoji is one), not UTF-16 units.
    if (typeof value !== 'string' || value.length === 0 || columnOverflow(value, { chars: MAX_KEY_LENGTH }) !== null || value.trim() !== value) {
      throw new ConfigError(`${describe(index)}: a deduplication key is 1 to ${MAX_KEY_LENGTH} characters without surrounding whitespace, got ${JSON.stringify(value) ?? String(value)}`);
    }
    const overflow = columnOverflow(value, this.table.limits.dedupeKey);
    if (overflow !== null) throw new ConfigError(`${describe(index)}: the key does not fit column ${column}: ${overflow}`);
    return value;
  }

  /** enqueue on the caller's open transaction: the INSERTs only, one by one, never retried. */
  private async enqueueInTransaction(
    handle: unknown,
    items: readonly unknown[],
    describe: (index: number) => string,
    chunk: number | undefined,
    notBefore: NotBefore | undefined,
    stamp: Record<string, SqlValue>,
  ): Promise<Array<JobId | null>> {
    if (chunk !== undefined) throw new ConfigError('enqueue: chunk commits rows on their own, which cannot happen inside the caller\'s transaction; give chunk or transaction, not both');
    if (!this.store.runnerFor) throw new ConfigError(`enqueue: this ${this.store.dialect.name} store cannot run in the caller's transaction (its adapter has no runnerFor)`);
    const runner = this.store.runnerFor(handle);
    const returningId = this.store.capabilities.insertReturning;
    const rows = items.map((item, index) => this.rowFor(item, index, describe, notBefore, stamp));
    const insert = (row: Record<string, SqlValue>) => this.sql.insert(row, { returningId, placeholder: runner.placeholder, notBefore });
    rows.forEach((row, index) => this.checkStatementSize(insert(row), index, describe));
    await runner.assertInTransaction?.();
    const ids: Array<JobId | null> = [];
    for (const [index, row] of rows.entries()) {
      let result: ExecResult;
      try {
        result = await runStatement(runner, insert(row));
      } catch (error) {
        if (!(error instanceof StoreError)) throw error;
        throw new EnqueueError(`${describe(index)} was rejected by the database; statusq committed nothing, roll the transaction back: ${error.message}`, error, index, 0);
      }
      ids.push(this.insertedId(result, row, returningId));
    }
    return ids;
  }

  /**
   * Refuses, before anything is written, a row whose INSERT the database would not take as one statement
   * (Store.statementLimit): MySQL answers one larger than max_allowed_packet by dropping the connection,
   * which looks like a network failure and would be retried to no end.
   */
  private checkStatementSize(statement: Statement, index: number, describe: (index: number) => string): void {
    const limit = this.store.statementLimit;
    if (limit && !fitsStatementLimit(statement, limit)) throw new ConfigError(`${describe(index)}: the row takes ${statementTooLarge(statement, limit)}`);
  }

  /** The id of the row `row` inserted (see enqueue). */
  private insertedId(result: ExecResult, row: Record<string, SqlValue>, returningId: boolean): JobId | null {
    if (returningId) {
      const id = result.rows[0]?.id;
      return typeof id === 'number' || typeof id === 'bigint' || typeof id === 'string' ? id : null;
    }
    const own = this.ownIdOf(row);
    if (own !== null) return own;
    // MySQL reports the key of whichever column is AUTO_INCREMENT: another column's when the id is not it.
    return this.idColumn.autoIncrement === true ? (result.insertId ?? null) : null;
  }

  /** The id a row to insert carries itself, or null when the database is to fill it. */
  private ownIdOf(row: Record<string, SqlValue>): JobId | null {
    const own = (idValueIn(this.table, row) ?? null) as SqlValue;
    if (own === null) return null;
    return this.idColumn.integer && typeof own !== 'number' ? integerIdOf(own) : (own as JobId);
  }

  /**
   * The column values enqueue's options set on every row (the priority), checked against the table: an option
   * whose column the table lacks is a SchemaError before anything is written.
   */
  private stampOf(options: EnqueueOptions): Record<string, SqlValue> {
    const stamp: Record<string, SqlValue> = {};
    if (options.priority !== undefined) {
      const { priority } = options;
      if (typeof priority !== 'number' || !Number.isInteger(priority) || priority < MIN_PRIORITY || priority > MAX_PRIORITY) {
        throw new ConfigError(`enqueue: priority must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}, got ${JSON.stringify(priority) ?? String(priority)}`);
      }
      const column = this.table.columns.priority;
      if (column === undefined) throw missingColumnError(this.table.table, 'priority', "a job's priority");
      stamp[column] = priority;
    }
    return stamp;
  }

  private rowFor(item: unknown, index: number, describe: (index: number) => string, notBefore: NotBefore | undefined, stamp: Record<string, SqlValue>, key?: string | null): Record<string, SqlValue> {
    const row = this.columnValuesOf(item, index, describe, notBefore, stamp);
    if (this.idColumn.filledOnInsert === false && this.ownIdOf(row) === null) {
      // Refused before any row is sent: the database's own words ("Field 'id' doesn't have a default value") name no fix.
      throw new ConfigError(`${describe(index)}: gives no ${this.table.id}, and ${this.table.table}.${this.table.id} gets none from the database (no AUTO_INCREMENT, identity, serial or DEFAULT): give each row its ${this.table.id}`);
    }
    if (key === undefined || key === null) return row;
    const column = this.table.columns.dedupeKey!;
    if (Object.keys(row).some((name) => name.toLowerCase() === column.toLowerCase())) {
      throw new ConfigError(`${describe(index)}: sets ${column} itself, and enqueue's key option gives one too; give one or the other`);
    }
    return { ...row, [column]: key };
  }

  private columnValuesOf(item: unknown, index: number, describe: (index: number) => string, notBefore: NotBefore | undefined, stamp: Record<string, SqlValue>): Record<string, SqlValue> {
    const payloadColumn = this.table.columns.payload;
    if (payloadColumn) {
      const text = jsonText(item, `${describe(index)}: the payload`);
      if (text === undefined) throw new ConfigError(`${describe(index)}: payload is not JSON-serialisable`);
      // Refused here, before any row of the batch is inserted, rather than by the database mid-batch.
      const overflow = columnOverflow(text, this.table.limits.payload);
      if (overflow !== null) throw new ConfigError(`${describe(index)}: the payload does not fit column ${payloadColumn}: ${overflow}`);
      return { [payloadColumn]: text, ...stamp };
    }
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      throw new ConfigError(`${describe(index)}: table ${this.table.table} has no payload column, so each item must be an object of column values`);
    }
    const row: Record<string, SqlValue> = {};
    for (const [key, value] of Object.entries(item)) {
      validateIdentifier(key, 'column name');
      if (!this.columnNames.has(key.toLowerCase())) throw new SchemaError(`${describe(index)}: table ${this.table.table} has no column ${JSON.stringify(key)}`);
      if (key.toLowerCase() === this.table.status.toLowerCase()) {
        throw new SchemaError(`${describe(index)}: the status column is set by statusq; enqueue leaves it NULL (pending)`);
      }
      if (notBefore && key.toLowerCase() === this.table.columns.nextAttemptAt?.toLowerCase()) {
        throw new ConfigError(`${describe(index)}: sets ${key} itself, and a delay or run time was given too; give one or the other`);
      }
      if (Object.keys(stamp).some((name) => name.toLowerCase() === key.toLowerCase())) {
        throw new ConfigError(`${describe(index)}: sets ${key} itself, and enqueue's options set it too; give one or the other`);
      }
      row[key] = toSqlValue(value, `${describe(index)}: column ${key}`);
    }
    return { ...row, ...stamp };
  }
}

/** The longest deduplication key: the dedupe_key column statusq creates is VARCHAR(255). */
const MAX_KEY_LENGTH = 255;
/** INSERTs of one keyed row before giving up: each refused one means a live holder existed a moment before. */
const KEYED_INSERT_ATTEMPTS = 5;

/** A priority is an INTEGER column's value on every dialect. */
const MIN_PRIORITY = -2_147_483_648;
const MAX_PRIORITY = 2_147_483_647;

/** The latest instant a time column holds on every dialect (MySQL's DATETIME ends with year 9999). */
const LAST_RUN_AT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
/** ISO 8601 with a time zone: a run time without one would be read in whatever zone this process runs in. */
const ZONED_ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/i;

/** Zoned ISO 8601 text naming a real day and time: Date.parse reads 2026-02-31 as March 3 and 24:30 as the next day. */
function isCalendarTime(text: string): boolean {
  const match = ZONED_ISO_TIME.exec(text);
  if (!match) return false;
  const [year, month, day, hour, minute, second] = [match[1], match[2], match[3], match[4], match[5], match[6] ?? '0'].map(Number) as [number, number, number, number, number, number];
  const zone = match[8]!.replace(':', '');
  const zoneOk = zone.toUpperCase() === 'Z' || (Number(zone.slice(1, 3)) <= 23 && Number(zone.slice(3)) <= 59);
  return month >= 1 && month <= 12 && day >= 1 && day <= new Date(Date.UTC(year, month, 0)).getUTCDate() && hour <= 23 && minute <= 59 && second <= 59 && zoneOk;
}

/**
 * An instant given as a Date or ISO 8601 text with a zone, in milliseconds since the epoch; anything else is a
 * ConfigError naming `what`. Shared by enqueue's runAt and the CLI's --run-at.
 */
export function parseRunAt(value: Date | string, what = 'runAt'): number {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'string' && isCalendarTime(value.trim()) ? Date.parse(value.trim()) : Number.NaN;
  if (!Number.isFinite(ms)) {
    throw new ConfigError(`${what} must be a date and time with a zone, such as 2026-12-01T10:00:00Z, got ${value instanceof Date ? 'an invalid Date' : JSON.stringify(value)}`);
  }
  if (ms < 0 || ms > LAST_RUN_AT_MS) throw new ConfigError(`${what} must lie between 1970 and the year 9999, got ${new Date(ms).toISOString()}`);
  return ms;
}

/** The first due time enqueue's options ask for, checked; undefined when the rows are due at once. */
function notBeforeOf(options: EnqueueOptions): NotBefore | undefined {
  const { delayMs, runAt } = options;
  if (delayMs !== undefined && runAt !== undefined) throw new ConfigError('enqueue: give delayMs or runAt, not both');
  if (delayMs !== undefined) return { delayMs: Math.round(parseDuration(delayMs, 'enqueue: delayMs', DELAY_LIMIT)) };
  if (runAt !== undefined) return { atEpochMs: parseRunAt(runAt, 'enqueue: runAt') };
  return undefined;
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

export function toSqlValue(value: unknown, where = 'a column value'): SqlValue {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (value instanceof Date) return value.toISOString();
  return jsonText(value, where) ?? null;
}

/**
 * A value's JSON text. What JSON.stringify refuses is a ConfigError naming `where` rather than a bare
 * TypeError or RangeError: a cycle or a BigInt inside, or nesting deeper than its recursion has stack for
 * (JSON.parse takes a line of 100,000 nested arrays that JSON.stringify then cannot write back).
 */
function jsonText(value: unknown, where: string): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (error instanceof RangeError) throw new ConfigError(`${where} is nested too deeply to store as JSON`);
    throw new ConfigError(`${where} is not JSON-serialisable: ${error instanceof Error ? error.message : String(error)}`);
  }
}
