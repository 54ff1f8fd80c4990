/**
 * Every statement that changes a job's status, built once for all dialects. Each UPDATE is guarded by the
 * status it expects (and by the claim token when the table has a worker-id column): the affected-row count
 * says whether the transition happened, so a second worker, a late settle or a reaped lease changes nothing.
 * The legal moves are in status.ts; each builder here names the cause it implements and takes its status
 * guard from there (`guard`), so no builder writes a status condition of its own. (Slightly over 350 lines:
 * the builders share one guard, one parameter list and one table quoting, and read best side by side.)
 */
import { ConfigError, SchemaError } from '../protocol/errors.js';
import { missingColumnError } from './schema.js';
import { assertTransition, sourcesOf, statusCode, type StatusName, type TransitionCause } from '../protocol/status.js';
import type { JobId, SqlDialect, SqlParam, SqlValue, Statement, Upsert } from '../store/store.js';
import { BESIDE_COLUMNS, columnOverflow, idValueIn, isBesideColumn, type BesideColumn, type ColumnLimit, type OptionalColumn, type ResolvedTable } from '../protocol/table.js';

/** When a new row first becomes claimable: a delay from the database's now, or an instant (ms since the epoch, UTC). */
export type NotBefore = { readonly delayMs: number } | { readonly atEpochMs: number };

/** Collects parameters and hands out the dialect's placeholders in order. */
export class Params {
  readonly values: SqlParam[] = [];
  /** No list of values has added placeholders to the text: the same statement with other values has the same text. */
  fixedText = true;
  constructor(private readonly dialect: SqlDialect) {}
  add(value: SqlParam): string {
    this.values.push(value);
    return this.dialect.placeholder(this.values.length);
  }
  /** `column` is one of `ids`: one array parameter where the dialect takes one (anyOf), an IN list elsewhere. */
  in(column: string, ids: readonly JobId[]): string {
    if (this.dialect.anyOf) return this.dialect.anyOf(column, this.add(ids));
    this.fixedText = false;
    return `${column} IN (${ids.map((id) => this.add(id)).join(', ')})`;
  }
}

/** Rows read per page by a charge's `exhausted`: the rest are given up by the next page or the next reap. */
export const GIVE_UP_PAGE = 500;

/**
 * The statements that charge an attempt to claims whose worker is gone (see TransitionSql.chargeAttempt): run
 * `exhausted`, then `giveUp` for each row it found, then `back`.
 */
export interface AttemptCharge {
  /** The reason written to last_error (truncated to fit), which a dead letter repeats. */
  readonly error: string;
  /** SELECT id, attempts of up to GIVE_UP_PAGE rows that used their attempts; null without an attempt counter. */
  readonly exhausted: Statement | null;
  /** The guarded UPDATE of one of those rows to failed (the whole condition again): 1 row, or 0 if another took it. */
  readonly giveUp: ((id: JobId) => Statement) | null;
  /** The range UPDATE of the rest back to pending, one more attempt counted; null on a table with a claims table (`remaining`). */
  readonly back: Statement | null;
  /**
   * With a claims table, where one UPDATE cannot also write the claims table's rows of the rows it moved: SELECT id
   * of up to GIVE_UP_PAGE rows with attempts left, each sent back by `sendBack` (the whole condition again).
   */
  readonly remaining: Statement | null;
  readonly sendBack: ((id: JobId) => Statement) | null;
}

/** Quoted names of a resolved table, built once per queue. */
export interface QuotedTable {
  readonly table: string;
  readonly id: string;
  readonly status: string;
  readonly order: string;
  readonly claimedAt?: string;
  readonly workerId?: string;
  readonly attemptCount?: string;
  readonly nextAttemptAt?: string;
  readonly lastError?: string;
  readonly payload?: string;
  readonly result?: string;
  readonly finishedAt?: string;
  readonly priority?: string;
  readonly dedupeKey?: string;
  readonly progress?: string;
  readonly dispatchedAt?: string;
  /** The claims table (ResolvedTable.beside), whose columns are the ones of BESIDE_COLUMNS above. */
  readonly beside?: string;
}

export function quoteTable(t: ResolvedTable, d: SqlDialect): QuotedTable {
  const q: Record<string, string> = {
    table: d.quoteIdentifier(t.table),
    id: d.quoteIdentifier(t.id),
    status: d.quoteIdentifier(t.status),
    order: d.quoteIdentifier(t.order),
  };
  if (t.beside !== null) q.beside = d.quoteIdentifier(t.beside);
  for (const [key, name] of Object.entries(t.columns)) if (name) q[key] = d.quoteIdentifier(name);
  return q as unknown as QuotedTable;
}

/** Longest `last_error` kept; a stack trace or a huge message must not bloat the row. */
export const MAX_ERROR_LENGTH = 2000;

/**
 * The reason as `last_error` keeps it: at most MAX_ERROR_LENGTH, and within the column's own bound when it
 * has a smaller one (a VARCHAR(255) last_error would otherwise fail every settle that records a long reason).
 */
export function truncateError(message: string, limit?: ColumnLimit): string {
  const text = message.length > MAX_ERROR_LENGTH ? `${message.slice(0, MAX_ERROR_LENGTH - 1)}…` : message;
  if (columnOverflow(text, limit) === null) return text;
  // Whole code points only, leaving room for the ellipsis (one character, three UTF-8 bytes).
  let chars = (limit?.chars ?? Infinity) - 1;
  let bytes = (limit?.bytes ?? Infinity) - 3;
  let kept = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    const size = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (chars < 1 || bytes < size) break;
    kept += ch;
    chars -= 1;
    bytes -= size;
  }
  return chars < 0 || bytes < 0 ? '' : `${kept}…`;
}

/**
 * A value a move writes to an optional column: SQL text without parameters (the database's now, NULL, 0), a bound
 * parameter, the database's now shifted by a number of milliseconds, or one more than the column held (an
 * attempt counted; absent or NULL counts as 0).
 */
type Written = { readonly sql: string } | { readonly param: SqlValue } | { readonly nowPlusMs: number } | { readonly build: (p: Params) => string } | 'increment';

/**
 * The writes of one move: SET items of the table's own UPDATE, and the values of claims-table columns (on a table
 * whose claim state is beside it), which follow as an upsert in the same transaction (Statement.then).
 */
class Writes {
  readonly own: Array<(p: Params) => string> = [];
  readonly beside: Array<{ column: string; value: Written }> = [];
}

const ON_CONFLICT_UPSERT = (table: string, key: string): Upsert => ({
  // PostgreSQL refuses an unqualified column in DO UPDATE (it could be the proposed row's), so the target is aliased.
  into: `${table} AS statusq_claims`,
  existing: 'statusq_claims',
  proposed: (column) => `excluded.${column}`,
  clause: (sets) => `ON CONFLICT (${key}) DO UPDATE SET ${sets}`,
});

/** Pending rows an idle worker's look-ahead for the next due time reads at most (TransitionSql.nextDueTime). */
export const LOOK_AHEAD_ROWS = 100;

export class TransitionSql {
  readonly q: QuotedTable;
  /** What a claim reads of each row: `*`, or the quoted list of ResolvedTable.returned (TableConfig.select). */
  readonly rowColumns: string;
  constructor(
    readonly table: ResolvedTable,
    readonly dialect: SqlDialect,
  ) {
    this.q = quoteTable(table, dialect);
    const own = table.returned === null ? (this.q.beside ? `${this.q.table}.*` : '*') : table.returned.map((name) => dialect.quoteIdentifier(name)).join(', ');
    // A claims table's columns come with the row under their own names, as in-table ones would.
    this.rowColumns = [own, ...this.besideColumnsRead()].join(', ');
  }

  /** Each claims-table column as the table's row would carry it: read beside it, under its own name. */
  private besideColumnsRead(): string[] {
    return BESIDE_COLUMNS.filter((key) => this.isBeside(key)).map((key) => `${this.read(key)} AS ${this.q[key]!}`);
  }

  /** Whether optional column `key` is one of the claims table's (ResolvedTable.beside) rather than the table's. */
  isBeside(key: OptionalColumn): key is BesideColumn {
    return this.q.beside !== undefined && isBesideColumn(key) && this.q[key] !== undefined;
  }

  /** `<claims table> WHERE <its id> = <the table's id>`: the claims-table row of the row a statement on the table is at. */
  private besideRow(): string {
    return `${this.q.beside!} WHERE ${this.q.beside!}.${this.q.id} = ${this.q.table}.${this.q.id}`;
  }

  /** Optional column `key` of the row a statement on the table is at: the column, or its claims-table value (NULL without a claims-table row). */
  read(key: OptionalColumn): string {
    const column = this.q[key]!;
    return this.isBeside(key) ? `(SELECT ${this.q.beside!}.${column} FROM ${this.besideRow()})` : column;
  }

  /** The claims-table row of the row a statement on the table is at exists and meets `condition`. */
  private besideHas(condition: string): string {
    return `EXISTS (SELECT 1 FROM ${this.besideRow()} AND ${condition})`;
  }

  /** In a statement on the claims table: the table's row of the claims-table row it is at exists (and meets `condition`). */
  private claimedRow(condition?: string): string {
    return `EXISTS (SELECT 1 FROM ${this.q.table} WHERE ${this.q.table}.${this.q.id} = ${this.q.beside!}.${this.q.id}${condition === undefined ? '' : ` AND ${condition}`})`;
  }

  /** A claims-table column, qualified (inside besideHas, and in statements on the claims table). */
  private besideColumn(key: BesideColumn): string {
    return `${this.q.beside!}.${this.q[key]!}`;
  }

  /** Adds the write of `value` to optional column `key` to `w`, in the table's UPDATE or in its claims-table upsert. */
  private write(w: Writes, key: OptionalColumn, value: Written): void {
    const column = this.q[key];
    if (column === undefined) return;
    if (this.isBeside(key)) w.beside.push({ column, value });
    else w.own.push((p) => `${column} = ${this.render(p, value, column)}`);
  }

  private render(p: Params, value: Written, column: string): string {
    if (value === 'increment') return `COALESCE(${column}, 0) + 1`;
    if ('sql' in value) return value.sql;
    if ('param' in value) return p.add(value.param);
    if ('build' in value) return value.build(p);
    return this.dialect.nowPlusMs(p.add(value.nowPlusMs));
  }

  /** A move's writes that begin with the status column's new value. */
  private moveTo(status: number | null): Writes {
    const w = new Writes();
    w.own.push(() => `${this.q.status} = ${status === null ? 'NULL' : status}`);
    return w;
  }

  /** The SET list of the table's own writes, parameters added in text order. */
  private setList(p: Params, w: Writes): string {
    return w.own.map((item) => item(p)).join(', ');
  }

  /**
   * The claims-table rows of `ids` take the values of `w`: created where missing (an attempt counted starts at 1),
   * updated where present. One statement: `INSERT ... VALUES ... ON CONFLICT DO UPDATE` (SqlDialect.upsert).
   */
  private upsertBeside(ids: readonly JobId[], w: Writes, placeholder?: (index: number) => string): Statement {
    const p = new Params(placeholder ? { ...this.dialect, placeholder } : this.dialect);
    const rows = ids.map((id) => `(${[p.add(id as SqlValue), ...this.besideValues(p, w)].join(', ')})`);
    return { sql: this.besideUpsert(w, `VALUES ${rows.join(', ')}`), params: p.values };
  }

  /** The values of `w`'s claims-table columns for a new claims-table row (an attempt counted is its first). */
  private besideValues(p: Params, w: Writes): string[] {
    return w.beside.map((v) => (v.value === 'increment' ? '1' : this.render(p, v.value, v.column)));
  }

  /** INSERT into the claims table of `source` (VALUES or a SELECT of id and besideValues), an existing row updated instead. */
  private besideUpsert(w: Writes, source: string): string {
    const upsert = (this.dialect.upsert ?? ON_CONFLICT_UPSERT)(this.q.beside!, this.q.id);
    const sets = w.beside.map((v) => `${v.column} = ${v.value === 'increment' ? `COALESCE(${upsert.existing}.${v.column}, 0) + 1` : upsert.proposed(v.column)}`);
    return `INSERT INTO ${upsert.into} (${[this.q.id, ...w.beside.map((v) => v.column)].join(', ')}) ${source} ${upsert.clause(sets.join(', '))}`;
  }

  /**
   * `statement` (an UPDATE of the rows `ids`, decided by its affected rows) with the claims-table writes of `w` after
   * it, and before it the lock of those rows (`lock`, see lockRows). A claim of locked candidates needs no lock again.
   */
  private withBeside(statement: Statement, ids: readonly JobId[], w: Writes, lock = true): Statement {
    if (w.beside.length === 0) return statement;
    const first = lock ? this.lockRows((p) => p.in(this.q.id, ids)) : [];
    return { ...statement, first, then: [this.upsertBeside(ids, w)] };
  }

  /**
   * With a claims table: the rows meeting `where` locked (SqlDialect.forUpdate) before a move's guarded UPDATE, a
   * statement of its own, reads the claims table. Every writer of a claims-table row holds its row first (a claim, a
   * settle, a reap), so once the lock is held the claims table says what its last holder left: a settle behind a
   * reap and a new claim sees the new token, a reap behind a new claim its fresh lease. Empty where the store's
   * transaction excludes every other writer.
   */
  private lockRows(where: (p: Params) => string): Statement[] {
    if (!this.dialect.forUpdate) return [];
    const p = new Params(this.dialect);
    return [{ sql: `SELECT ${this.q.id} FROM ${this.q.table} WHERE ${where(p)} ORDER BY ${this.q.id}${this.dialect.forUpdate}`, params: p.values }];
  }

  /**
   * `status = <code>` or `status IS NULL` for the states `cause` may start from. A builder asked for one
   * named move (`only`) gets IllegalTransitionError for a move the table does not allow, never a guard
   * that matches nothing.
   */
  private guard(cause: TransitionCause, only?: readonly [from: StatusName, to: StatusName]): string {
    if (only) assertTransition(only[0], only[1], cause);
    const conditions = (only ? [only[0]] : sourcesOf(cause)).map((name) => this.statusIs(name));
    return conditions.length === 1 ? conditions[0]! : `(${conditions.join(' OR ')})`;
  }

  /** The status column holds `name` (pending is NULL). */
  private statusIs(name: StatusName): string {
    return this.statusHolds(statusCode(name, this.table.codes));
  }

  private statusHolds(code: number | null): string {
    return code === null ? `${this.q.status} IS NULL` : `${this.q.status} = ${code}`;
  }

  private tokenGuard(p: Params, token: string | null): string {
    if (!this.q.workerId || token === null) return '';
    if (this.isBeside('workerId')) return ` AND ${this.besideHas(`${this.besideColumn('workerId')} = ${p.add(token)}`)}`;
    return ` AND ${this.q.workerId} = ${p.add(token)}`;
  }

  /** The attempt a charge counts, as a condition reads it. */
  private attemptsPlusOne(): string {
    return `COALESCE(${this.read('attemptCount')}, 0) + 1`;
  }

  /**
   * Claimable (pending) and due: no retry scheduled for later. `now`: the database's time as another
   * expression (MySQL's idle probe needs one that moves within a statement).
   */
  dueCondition(now = this.dialect.now): string {
    const pending = this.guard('claim');
    if (!this.q.nextAttemptAt) return pending;
    // Not "read(...) IS NULL OR ... <= now": the claims-table row is looked up once, and one without a time is due.
    if (this.isBeside('nextAttemptAt')) return `${pending} AND NOT ${this.besideHas(`${this.besideColumn('nextAttemptAt')} > ${now}`)}`;
    return `${pending} AND (${this.q.nextAttemptAt} IS NULL OR ${this.q.nextAttemptAt} <= ${now})`;
  }

  /**
   * Candidate selection: the due rows in queue order. With `agedMs`, only rows older than that, oldest
   * first (aging takes these before the configured order). Both shapes are served by the pending index.
   * `columns`: the id alone, or the claimed row's columns (rowColumns).
   */
  candidates(p: Params, options: { limit: number; columns: 'id' | 'row'; agedMs?: number | undefined; clock?: string | undefined; alsoWhere?: string; now?: string }): string {
    let what = options.columns === 'id' ? this.q.id : this.rowColumns;
    // The database's own time alongside the candidates, for a claim that writes it back as claimed_at.
    if (options.clock !== undefined) what += `, ${this.dialect.now} AS ${this.dialect.quoteIdentifier(options.clock)}`;
    let where = this.dueCondition(options.now);
    // A condition of the caller's own, ANDed (MySQL's idle probe ties each of its checks to its step).
    if (options.alsoWhere !== undefined) where += ` AND ${options.alsoWhere}`;
    let orderBy = this.queueOrder();
    if (options.agedMs !== undefined) {
      // Aged rows oldest first whatever their priority: that is what bounds a low priority's wait.
      where += ` AND ${this.q.order} <= ${this.dialect.orderCutoff(p.add(-options.agedMs), this.table.orderTime)}`;
      orderBy = `${this.q.order} ASC`;
    }
    return `SELECT ${what} FROM ${this.q.table} WHERE ${where} ORDER BY ${orderBy} LIMIT ${p.add(options.limit)}`;
  }

  /** The claim's order: highest priority first where the table has a priority column, then the order column. */
  private queueOrder(): string {
    const byOrder = `${this.q.order} ${this.table.direction === 'newest' ? 'DESC' : 'ASC'}`;
    return this.q.priority ? `${this.q.priority} DESC, ${byOrder}` : byOrder;
  }

  /**
   * The SET list of a claim: processing, and the lease start and token when those columns exist. The lease
   * starts at the database's now, or at `claimedAt` when the caller read that clock earlier in the claim. A
   * claim uses up the row's dispatch (dispatched_at = NULL), whoever claims: if the row is pending again later
   * (a retry, an expired lease, a hand-back) the relay's indexed "never dispatched" branch publishes it again.
   */
  claimAssignments(p: Params, token: string | null, claimedAt?: SqlValue): string {
    if (this.q.beside) throw new ConfigError(`a claim of ${this.table.table} writes its claims table too, so it is not one UPDATE (see claimByIds)`);
    return this.setList(p, this.claimWrites(token, claimedAt));
  }

  private claimWrites(token: string | null, claimedAt?: SqlValue): Writes {
    const w = this.moveTo(this.table.codes.processing);
    this.write(w, 'claimedAt', claimedAt === undefined ? { sql: this.dialect.now } : { param: claimedAt });
    this.write(w, 'workerId', { param: token });
    this.write(w, 'dispatchedAt', { sql: 'NULL' });
    return w;
  }

  /**
   * claim (NULL -> processing) of the given ids, guarded so only still-pending, due rows change; `returning`: their
   * rowColumns. `locked`: the ids are candidates this transaction holds locked, so the due condition was judged
   * under the lock and is not asked again (on a table with a claims table, asking it again there would make
   * MySQL lock the claims table's gaps, which the claim's own upsert then waits on). With a claims table the
   * claim writes its rows of `ids` after the UPDATE (Statement.then): exact only when every id was claimed, as
   * locked candidates are and a lone id whose UPDATE changed its row is.
   */
  claimByIds(ids: readonly JobId[], token: string | null, returning: boolean, claimedAt?: SqlValue, locked = false): Statement {
    if (returning && this.q.beside) throw new ConfigError(`a claim of ${this.table.table} cannot return its rows: they are read after its claims table is written`);
    const p = new Params(this.dialect);
    const w = this.claimWrites(token, claimedAt);
    const guard = locked && this.q.beside ? this.guard('claim') : this.dueCondition();
    const sql = `UPDATE ${this.q.table} SET ${this.setList(p, w)} WHERE ${p.in(this.q.id, ids)} AND ${guard}` + (returning ? ` RETURNING ${this.rowColumns}` : '');
    return this.withBeside({ sql, params: p.values }, ids, w, false);
  }

  /**
   * A pending, due row a relay should publish: not dispatched since its last claim (every claim sets
   * dispatched_at back to NULL: a new row, a retry, a lease that ran out, a hand-back), or dispatched longer
   * than `redispatchMs` ago and still not claimed (the broker lost the message, or the relay died between
   * marking and publishing). A row waiting in the broker's queue matches neither, so a backlog is published
   * once, and the dispatch index (status, dispatched_at, order) serves both without reading the backlog:
   * measured with 50,000 dispatched rows waiting, a pass read them all without it (44 ms on MariaDB, 9 ms on
   * PostgreSQL, growing with the backlog).
   */
  private needsDispatch(p: Params, redispatchMs: number): string {
    const d = this.q.dispatchedAt!;
    return `${this.dueCondition()} AND (${d} IS NULL OR ${d} < ${this.dialect.nowPlusMs(p.add(-redispatchMs))})`;
  }

  /**
   * Up to `limit` rows to dispatch (id and attempt): those never dispatched since their last claim, in queue
   * order, then those whose dispatch is oldest, before the cutoff. Two selections, each a range of the dispatch
   * index (status, dispatched_at, order), wrapped as derived tables because SQLite allows a LIMIT only on the
   * last SELECT of a UNION. Measured with 50,000 dispatched rows waiting in the broker: PostgreSQL 9 ms a pass
   * with one OR'd selection over the pending index, 0.4 ms this way. `dispatchIndex`: the dispatch index's name
   * when the table has it, for a dialect that hints (forceIndex).
   */
  dispatchCandidates(limit: number, redispatchMs: number, dispatchIndex: string | null = null): Statement {
    const p = new Params(this.dialect);
    const d = this.q.dispatchedAt!;
    const attempts = this.dialect.quoteIdentifier('attempts');
    const what = `${this.q.id}${this.q.attemptCount ? `, ${this.read('attemptCount')} AS ${attempts}` : ''}`;
    // MariaDB 10.11 (50,000 rows waiting in the broker, 100 due) chose the pending index for this text in most
    // runs of the last session and in the first second after a bulk mark here (36-42 ms a pass, growing with the
    // backlog), against 0.5-0.7 ms through the dispatch index, with or without ANALYZE, whatever the ORDER BY:
    // its statistics trail the relay's own writes. Where the dialect can name an index, it is named.
    const hint = dispatchIndex !== null && this.dialect.forceIndex ? ` ${this.dialect.forceIndex(this.dialect.quoteIdentifier(dispatchIndex))}` : '';
    const branch = (where: string, orderBy: string, alias: string) =>
      `SELECT * FROM (SELECT ${what} FROM ${this.q.table}${hint} WHERE ${this.dueCondition()} AND ${where} ORDER BY ${orderBy} LIMIT ${p.add(limit)}) ${this.dialect.quoteIdentifier(alias)}`;
    // dispatched_at is NULL throughout this branch: leading the ORDER BY with it changes no order, and only the
    // dispatch index gives it; with the queue order alone MariaDB walked the pending index at run time.
    const fresh = branch(`${d} IS NULL`, `${d} ${this.table.direction === 'newest' ? 'DESC' : 'ASC'}, ${this.queueOrder()}`, 'never_dispatched');
    const stale = branch(`${d} < ${this.dialect.nowPlusMs(p.add(-redispatchMs))}`, `${d} ASC`, 'dispatch_too_old');
    return { sql: `${fresh} UNION ALL ${stale}`, params: p.values };
  }

  /**
   * Marks rows dispatched before they are published, guarded by the same condition, so a consumer's claim
   * (which can only follow the publish, and sets dispatched_at back to NULL) always comes after the mark.
   */
  markDispatched(ids: readonly JobId[], redispatchMs: number): Statement {
    const p = new Params(this.dialect);
    const sql = `UPDATE ${this.q.table} SET ${this.q.dispatchedAt} = ${this.dialect.now} WHERE ${p.in(this.q.id, ids)} AND ${this.needsDispatch(p, redispatchMs)}`;
    return { sql, params: p.values };
  }

  /** Pending rows published to the broker and not claimed since: waiting in its queue. */
  countWaitingInBroker(): Statement {
    return { sql: `SELECT COUNT(*) AS n FROM ${this.q.table} WHERE ${this.guard('claim')} AND ${this.q.dispatchedAt!} IS NOT NULL`, params: [] };
  }

  /** Rows whose publish failed after marking: dispatched again at the relay's next pass, not after the redispatch age. */
  unmarkDispatched(ids: readonly JobId[]): Statement {
    const p = new Params(this.dialect);
    return { sql: `UPDATE ${this.q.table} SET ${this.q.dispatchedAt} = NULL WHERE ${p.in(this.q.id, ids)} AND ${this.dueCondition()}`, params: p.values };
  }

  /**
   * claim (NULL -> processing) of the rows `join` keeps (NativeClaim.idsOnServer: candidates this transaction
   * holds locked), guarded like claimByIds. Not for a table with a claims table.
   */
  claimJoined(join: string, token: string | null): Statement {
    const p = new Params(this.dialect);
    return { sql: `UPDATE ${this.q.table} ${join} SET ${this.claimAssignments(p, token)} WHERE ${this.dueCondition()}`, params: p.values };
  }

  /** The rows `join` keeps (rowColumns, the table's own where every column is read). */
  selectJoined(join: string): Statement {
    const columns = this.table.returned === null ? `${this.q.table}.*` : this.rowColumns;
    return { sql: `SELECT ${columns} FROM ${this.q.table} ${join}`, params: [] };
  }

  /** The claimed rows of `ids` (rowColumns), read back after a claim that could not return them. */
  selectByIds(ids: readonly JobId[]): Statement {
    const p = new Params(this.dialect);
    return { sql: `SELECT ${this.rowColumns} FROM ${this.q.table} WHERE ${p.in(this.q.id, ids)}`, params: p.values };
  }

  /** complete (processing -> done), storing the result when the table has a result column. */
  complete(id: JobId, token: string | null, result: string | null): Statement {
    const w = this.moveTo(this.table.codes.done);
    this.write(w, 'result', { param: result });
    this.write(w, 'finishedAt', { sql: this.dialect.now });
    return this.guardedUpdate(w, id, token, 'complete');
  }

  /**
   * complete (processing -> done) of many rows claimed under one token (or, on a table without a token
   * column, claimed by this worker): one statement instead of one per job. `results`, when given (one per id,
   * null for none), are stored row by row through a CASE on the id (see StoreCapabilities.groupedResults);
   * without them the result column is left alone. Its affected count is enough when it covers every id (each
   * row it matches changes: its status moves 9 -> 1); only when it falls short does `completedUnder` tell
   * which rows it changed. No RETURNING even where the dialect has it: the list of ids it would send back
   * costs the server and the worker a row per job, to answer a question that only a lost claim raises.
   */
  completeMany(ids: readonly JobId[], token: string | null, results?: ReadonlyArray<string | null>): Statement {
    const p = new Params(this.dialect);
    const w = this.moveTo(this.table.codes.done);
    if (results !== undefined && this.q.result) {
      if (results.length !== ids.length) throw new Error(`completeMany: ${results.length} results for ${ids.length} ids`);
      const result = this.q.result;
      w.own.push((sp) => {
        sp.fixedText = false;
        return `${result} = CASE ${this.q.id} ${ids.map((id, i) => `WHEN ${sp.add(id)} THEN ${sp.add(results[i]!)}`).join(' ')} END`;
      });
    }
    this.write(w, 'finishedAt', { sql: this.dialect.now });
    const setSql = this.setList(p, w);
    const where = `${p.in(this.q.id, ids)} AND ${this.guard('complete')}${this.tokenGuard(p, token)}`;
    const statement: Statement = { sql: `UPDATE ${this.q.table} SET ${setSql} WHERE ${where}`, params: p.values, reusable: p.fixedText };
    // Not an upsert (withBeside): only the rows done under this token get their end time, which its count cannot name.
    if (w.beside.length === 0) return statement;
    return { ...statement, first: this.lockRows((lp) => lp.in(this.q.id, ids)), then: [this.updateClaims('finishedAt', ids, token, this.statusIs('done'))] };
  }

  /**
   * `column` = the database's now on the claims-table rows of `ids` that hold `token` and whose row in the table meets
   * `rowCondition`: a heartbeat (the row still processing), the end time of a grouped completion (the rows done
   * under the token, completedUnder's question asked in the same statement).
   */
  private updateClaims(column: BesideColumn, ids: readonly JobId[], token: string | null, rowCondition: string): Statement {
    const p = new Params(this.dialect);
    const side = this.q.beside!;
    let where = p.in(`${side}.${this.q.id}`, ids);
    if (token !== null && this.q.workerId) where += ` AND ${this.besideColumn('workerId')} = ${p.add(token)}`;
    where += ` AND ${this.claimedRow(rowCondition)}`;
    return { sql: `UPDATE ${side} SET ${this.q[column]!} = ${this.dialect.now} WHERE ${where}`, params: p.values, reusable: p.fixedText };
  }

  /**
   * Of `ids`, the rows done under `token`. Exact even after the completing commit: a claim token is written
   * by one claim call only, so no one else can have finished a row with it. Without a token (a table with no
   * token column, so no fencing) it is the rows that are done: one that another actor set done while this
   * worker held it counts as this worker's, a difference only a token could tell; the row's state is the
   * same either way.
   */
  completedUnder(ids: readonly JobId[], token: string | null): Statement {
    const p = new Params(this.dialect);
    const sql = `SELECT ${this.q.id} AS id FROM ${this.q.table} WHERE ${p.in(this.q.id, ids)} AND ${this.statusIs('done')}${this.tokenGuard(p, token)}`;
    return { sql, params: p.values };
  }

  /** giveUp (processing -> failed): the attempt counts, the reason is kept. */
  giveUp(id: JobId, token: string | null, reason: string): Statement {
    const w = this.moveTo(this.table.codes.failed);
    this.write(w, 'attemptCount', 'increment');
    this.write(w, 'lastError', { param: truncateError(reason, this.table.limits.lastError) });
    this.write(w, 'finishedAt', { sql: this.dialect.now });
    return this.guardedUpdate(w, id, token, 'giveUp');
  }

  /** abuse from processing (after a claim) or, with `token` undefined and `fromPending`, from pending. */
  abuse(id: JobId, token: string | null, reason: string, from: 'processing' | 'pending' = 'processing'): Statement {
    const w = this.moveTo(this.table.codes.abuse);
    this.write(w, 'lastError', { param: truncateError(reason, this.table.limits.lastError) });
    this.write(w, 'finishedAt', { sql: this.dialect.now });
    return this.guardedUpdate(w, id, from === 'processing' ? token : null, 'abuse', [from, 'abuse']);
  }

  /**
   * retry (processing -> pending) as a scheduled retry: attempt_count + 1, next_attempt_at = now + delay,
   * last_error kept. Never the seed's bare "set back to NULL".
   */
  retry(id: JobId, token: string | null, reason: string, delayMs: number): Statement {
    if (!this.q.attemptCount) throw missingColumnError(this.table.table, 'attemptCount', 'a retry');
    const w = this.moveTo(null);
    this.write(w, 'attemptCount', 'increment');
    this.write(w, 'nextAttemptAt', { nowPlusMs: Math.round(delayMs) });
    this.write(w, 'lastError', { param: truncateError(reason, this.table.limits.lastError) });
    return this.guardedUpdate(w, id, token, 'retry');
  }

  /** release (processing -> pending) by a draining worker: the attempt does not count. */
  release(id: JobId, token: string | null): Statement {
    return this.guardedUpdate(this.moveTo(null), id, token, 'release');
  }

  /** progress: what the handler of a claim this token still holds last reported (ctx.progress), as JSON text. */
  progress(id: JobId, token: string | null, text: string): Statement {
    if (!this.q.progress) throw missingColumnError(this.table.table, 'progress', 'ctx.progress');
    const w = new Writes();
    this.write(w, 'progress', { param: text });
    return this.guardedUpdate(w, id, token, 'progress');
  }

  /** heartbeat: extends the lease of a claim this token still holds. */
  heartbeat(id: JobId, token: string | null): Statement {
    if (!this.q.claimedAt) throw missingColumnError(this.table.table, 'claimedAt', 'a heartbeat');
    if (!this.isBeside('claimedAt')) {
      const w = new Writes();
      this.write(w, 'claimedAt', { sql: this.dialect.now });
      return this.guardedUpdate(w, id, token, 'heartbeat');
    }
    // The lease is the claims table's alone: one UPDATE there, guarded by the row's status in the table.
    return this.updateClaims('claimedAt', [id], token, this.guard('heartbeat'));
  }

  /**
   * An UPDATE of one row guarded by the states `cause` may start from (or its one move `only`) and the token, with
   * its claims-table writes after it.
   */
  private guardedUpdate(w: Writes, id: JobId, token: string | null, cause: TransitionCause, only?: readonly [StatusName, StatusName]): Statement {
    const p = new Params(this.dialect);
    // Placeholders may be positional (`?`), so parameters are added in the order they appear in the text.
    const setSql = this.setList(p, w);
    const idParam = p.add(id as SqlValue);
    const sql = `UPDATE ${this.q.table} SET ${setSql} WHERE ${this.q.id} = ${idParam} AND ${this.guard(cause, only)}${this.tokenGuard(p, token)}`;
    return this.withBeside({ sql, params: p.values }, [id], w);
  }

  /**
   * leaseExpired: claims whose lease ran out go back to pending, or to failed once they have used their
   * attempts (a job that kills its worker every time must not loop forever). A processing row with no
   * claim time was claimed before leases existed on this table and counts as expired.
   */
  reapExpired(leaseMs: number, maxAttempts: number): AttemptCharge | null {
    if (!this.q.claimedAt) return null;
    return this.chargeAttempt(`lease expired after ${leaseMs} ms (worker stopped or stalled)`, maxAttempts, (p) => this.leaseExpired(p, leaseMs));
  }

  /**
   * ownerDied: the claims of a worker process that died while their handlers ran (every token it wrote
   * starts with its worker id) cost one attempt each, as an expired lease would, without waiting for the lease.
   */
  ownerDied(workerId: string, reason: string, maxAttempts: number): AttemptCharge | null {
    if (!this.q.workerId) return null;
    const prefix = `${workerId}:`;
    return this.chargeAttempt(reason, maxAttempts, (p) => `${this.guard('ownerDied')} AND SUBSTR(${this.read('workerId')}, 1, ${p.add(prefix.length)}) = ${p.add(prefix)}`);
  }

  /**
   * Claims whose worker is gone go back to pending with one more attempt counted, or to failed once they
   * have used their attempts (a job that kills its worker every time must not loop forever). Without an
   * attempt counter nothing can tell a poison job from a crash, so they are always retried.
   *
   * The rows given up are read first and failed one guarded UPDATE each, rather than by one range UPDATE:
   * the caller must know which rows it gave up (to publish their dead letters) on every dialect, and MySQL
   * has no UPDATE ... RETURNING. Poison rows are few, so the extra statements cost nothing that matters; a
   * row another reaper failed meanwhile no longer meets the condition and reports 0 rows.
   */
  private chargeAttempt(reason: string, maxAttempts: number, condition: (p: Params) => string): AttemptCharge {
    const error = truncateError(reason, this.table.limits.lastError);
    const writes = (to: 'pending' | 'failed'): Writes => {
      const w = this.moveTo(to === 'pending' ? null : this.table.codes.failed);
      this.write(w, 'attemptCount', 'increment');
      this.write(w, 'lastError', { param: error });
      if (to === 'failed') this.write(w, 'finishedAt', { sql: this.dialect.now });
      return w;
    };
    // Parameters are added in text order (SET, then WHERE) because placeholders may be positional.
    const attemptsLeft = (p: Params, left: boolean): string => (this.q.attemptCount ? ` AND ${this.attemptsPlusOne()} ${left ? '<' : '>='} ${p.add(maxAttempts)}` : '');
    const page = (left: boolean): Statement => {
      const found = new Params(this.dialect);
      const attempts = this.q.attemptCount ? `, ${this.read('attemptCount')} AS attempts` : '';
      const where = condition(found) + attemptsLeft(found, left);
      return { sql: `SELECT ${this.q.id} AS id${attempts} FROM ${this.q.table} WHERE ${where} ORDER BY ${this.q.id} LIMIT ${found.add(GIVE_UP_PAGE)}`, params: found.values };
    };
    const one = (to: 'pending' | 'failed') => (id: JobId): Statement => {
      const w = writes(to);
      const p = new Params(this.dialect);
      const setSql = this.setList(p, w);
      const sql = `UPDATE ${this.q.table} SET ${setSql} WHERE ${this.q.id} = ${p.add(id as SqlValue)} AND ${condition(p)}${attemptsLeft(p, to === 'pending')}`;
      return this.withBeside({ sql, params: p.values }, [id], w);
    };
    const exhausted = this.q.attemptCount ? page(false) : null;
    const giveUp = this.q.attemptCount ? one('failed') : null;
    // With a claims table each row goes back by its own UPDATE and upsert, page by page: which rows one range
    // UPDATE moved is what its claims-table rows need, and MySQL cannot return it.
    if (this.q.beside && writes('pending').beside.length > 0) return { error, exhausted, giveUp, back: null, remaining: page(true), sendBack: one('pending') };
    const back = new Params(this.dialect);
    const backSql = `UPDATE ${this.q.table} SET ${this.setList(back, writes('pending'))} WHERE ${condition(back)}${attemptsLeft(back, true)}`;
    return { error, exhausted, giveUp, back: { sql: backSql, params: back.values }, remaining: null, sendBack: null };
  }

  /**
   * A plain (non-locking) read: is any claim's lease expired? The reaper runs its locking UPDATEs only
   * then. On InnoDB a range UPDATE over the pending index locks index entries before rows, the reverse of
   * a settle, so reaping when nothing has expired would only deadlock with the settles of live workers.
   */
  anyExpired(leaseMs: number): Statement | null {
    if (!this.q.claimedAt) return null;
    const p = new Params(this.dialect);
    return { sql: `SELECT 1 AS found FROM ${this.q.table} WHERE ${this.leaseExpired(p, leaseMs)} LIMIT 1`, params: p.values };
  }

  /**
   * A row `cause` may take (processing, for the reaper and the operator's requeue alike) whose claim is
   * older than the lease, or has no claim time at all.
   */
  private leaseExpired(p: Params, leaseMs: number, cause: TransitionCause = 'leaseExpired'): string {
    const cutoff = this.dialect.nowPlusMs(p.add(-leaseMs));
    // A row without a claims-table row (set to processing by someone else) has no claim time: expired.
    if (this.isBeside('claimedAt')) return `${this.guard(cause)} AND NOT ${this.besideHas(`${this.besideColumn('claimedAt')} >= ${cutoff}`)}`;
    return `${this.guard(cause)} AND (${this.q.claimedAt} IS NULL OR ${this.q.claimedAt} < ${cutoff})`;
  }

  /** requeue (failed or abuse -> pending) by an operator; attempts start over. */
  requeue(from: StatusName, ids: readonly JobId[] | undefined): Statement {
    const w = this.moveTo(null);
    this.write(w, 'attemptCount', { sql: '0' });
    this.write(w, 'nextAttemptAt', { sql: 'NULL' });
    const where = (p: Params) => `${this.guard('requeue', [from, 'pending'])}${ids ? ` AND ${p.in(`${this.q.table}.${this.q.id}`, ids)}` : ''}`;
    return this.rangeMove(w, where);
  }

  /**
   * The UPDATE of every row that meets `where` (a condition on the table, built once per statement) with the writes
   * of `w`. With a claims table its rows of those rows are written first, in the same transaction (Statement.first),
   * selected by the same condition: an UPDATE of the table cannot say which rows it changed on every database, and
   * rows that leave the condition in between (an operator's requeue beside working workers) are the only ones the
   * two could disagree on.
   */
  private rangeMove(w: Writes, where: (p: Params) => string): Statement {
    const p = new Params(this.dialect);
    const main: Statement = { sql: `UPDATE ${this.q.table} SET ${this.setList(p, w)} WHERE ${where(p)}`, params: p.values };
    if (w.beside.length === 0) return main;
    const sp = new Params(this.dialect);
    const select = `SELECT ${this.q.table}.${this.q.id}, ${this.besideValues(sp, w).join(', ')} FROM ${this.q.table} WHERE ${where(sp)}`;
    return { ...main, first: [...this.lockRows(where), { sql: this.besideUpsert(w, select), params: sp.values }] };
  }

  /**
   * requeueProcessing: operator requeue of rows in processing. With `leaseMs` (a table with leases) only claims whose lease ran
   * out, by the reaper's own leaseExpired condition; with null every processing row (an operator who stopped
   * every worker, or a status-only table). As with the reaper the interrupted attempt counts and the reason
   * is kept; unlike it the row always goes back to pending, never to failed: the operator asked for it back,
   * and a row past its attempts is given up after its next failure anyway.
   */
  requeueProcessing(ids: readonly JobId[] | undefined, leaseMs: number | null = null): Statement {
    const reason = leaseMs !== null ? `lease expired after ${leaseMs} ms (requeued by an operator)` : 'requeued by an operator while processing';
    const w = this.moveTo(null);
    this.write(w, 'attemptCount', 'increment');
    this.write(w, 'lastError', { param: truncateError(reason, this.table.limits.lastError) });
    const where = (p: Params) =>
      (leaseMs !== null && this.q.claimedAt ? this.leaseExpired(p, leaseMs, 'requeueProcessing') : this.guard('requeueProcessing')) +
      (ids ? ` AND ${p.in(`${this.q.table}.${this.q.id}`, ids)}` : '');
    return this.rangeMove(w, where);
  }

  /**
   * The named rows' status and, with `leaseMs`, whether their lease ran out (`expired` 1 or 0): what a
   * requeue of those ids reports about the ones it leaves.
   */
  statusOfIds(ids: readonly JobId[], leaseMs: number | null): Statement {
    const p = new Params(this.dialect);
    let what = `${this.q.id} AS id, ${this.q.status} AS status`;
    if (leaseMs !== null && this.q.claimedAt) what += `, CASE WHEN ${this.leaseExpired(p, leaseMs, 'requeueProcessing')} THEN 1 ELSE 0 END AS expired`;
    return { sql: `SELECT ${what} FROM ${this.q.table} WHERE ${p.in(this.q.id, ids)}`, params: p.values };
  }

  /**
   * The columns an operator's listing shows: id, order, status, then each optional column this table has that
   * says where a job stands. Payload and result are left to the whole-row view (inspectIds).
   */
  inspectColumns(): string[] {
    return [...new Set(this.inspected().map(([name]) => name))];
  }

  /** inspectColumns with what reads each: the column, or its claims-table value. */
  private inspected(): Array<[name: string, read: string]> {
    const t = this.table;
    const q = (name: string) => this.dialect.quoteIdentifier(name);
    const columns: Array<[string, string]> = [[t.id, q(t.id)], [t.order, q(t.order)], [t.status, q(t.status)]];
    for (const key of ['priority', 'dedupeKey', 'attemptCount', 'dispatchedAt', 'claimedAt', 'workerId', 'progress', 'nextAttemptAt', 'lastError', 'finishedAt'] as const) {
      const name = t.columns[key];
      if (name !== undefined && !columns.some(([seen]) => seen === name)) columns.push([name, this.isBeside(key) ? `${this.read(key)} AS ${q(name)}` : q(name)]);
    }
    return columns;
  }

  /**
   * Up to `limit` rows of one status for an operator, with the database's clock as `clock` (for ages). Order:
   * - pending: the claim's own ORDER BY (the order column, the table's direction), rows scheduled for a
   *   later retry included. The pending index serves it: a walk of the index that stops after `limit` rows,
   *   however many finished rows the table keeps.
   * - processing: oldest claim first (the stuck ones), claims without a claim time before all; by id without
   *   claimed_at. No index is kept for it: the composite pending index of MySQL/MariaDB and SQLite finds the
   *   processing rows by status and sorts those few; PostgreSQL's partial index covers pending rows only, so
   *   it reads the table.
   * - failed and abuse: newest finished first (finished_at, rows without one last), else newest id first.
   *   A sort of that status's rows (MySQL/MariaDB and SQLite find them through the pending index's status
   *   prefix; PostgreSQL reads the table, or walks the primary key backwards for id order): cost grows with
   *   the table, which an operator's look can afford and a worker's loop could not.
   */
  inspect(status: StatusName, limit: number, clock: string): Statement {
    const p = new Params(this.dialect);
    const what = this.inspected().map(([, read]) => read).join(', ');
    const { id } = this.q;
    let orderBy: string;
    if (status === 'pending') orderBy = this.queueOrder();
    else if (status === 'processing') {
      const claimed = this.q.claimedAt && this.read('claimedAt');
      orderBy = claimed ? `CASE WHEN ${claimed} IS NULL THEN 0 ELSE 1 END, ${claimed} ASC, ${id} ASC` : `${id} ASC`;
    } else {
      const finished = this.q.finishedAt && this.read('finishedAt');
      orderBy = finished ? `CASE WHEN ${finished} IS NULL THEN 1 ELSE 0 END, ${finished} DESC, ${id} DESC` : `${id} DESC`;
    }
    const sql =
      `SELECT ${what}, ${this.dialect.now} AS ${this.dialect.quoteIdentifier(clock)} FROM ${this.q.table} ` +
      `WHERE ${this.statusIs(status)} ORDER BY ${orderBy} LIMIT ${p.add(limit)}`;
    return { sql, params: p.values };
  }

  /** The named rows whole, with the database's clock as `clock`. */
  inspectIds(ids: readonly JobId[], clock: string): Statement {
    const p = new Params(this.dialect);
    const all = this.q.beside ? [`${this.q.table}.*`, ...this.besideColumnsRead()].join(', ') : '*';
    const sql = `SELECT ${all}, ${this.dialect.now} AS ${this.dialect.quoteIdentifier(clock)} FROM ${this.q.table} WHERE ${p.in(this.q.id, ids)}`;
    return { sql, params: p.values };
  }

  /**
   * A claims-table row (in a statement on the claims table) whose row is gone from the table: the application
   * deleted it. The claim never reads such rows (it starts from the table); prune removes them, the doctor counts them.
   */
  orphanedClaim(): string {
    return `NOT ${this.claimedRow()}`;
  }

  /** How many claims-table rows have lost their row (see orphanedClaim). */
  countOrphanedClaims(): Statement {
    return { sql: `SELECT COUNT(*) AS n FROM ${this.q.beside!} WHERE ${this.orphanedClaim()}`, params: [] };
  }

  /** How many rows hold one non-pending status code. */
  countWithStatus(code: number): Statement {
    return { sql: `SELECT COUNT(*) AS n FROM ${this.q.table} WHERE ${this.q.status} = ${code}`, params: [] };
  }

  countByStatus(): Statement {
    return { sql: `SELECT ${this.q.status} AS status, COUNT(*) AS n FROM ${this.q.table} GROUP BY ${this.q.status}`, params: [] };
  }

  /** The rows whose status holds `code` (null: pending), as a bare SELECT to plan, estimate or count. */
  rowsWithStatus(code: number | null): Statement {
    return { sql: `SELECT 1 AS one FROM ${this.q.table} WHERE ${this.statusHolds(code)}`, params: [] };
  }

  /**
   * The rows whose status is none of the table's codes (and not NULL), spelled as the ranges between the
   * codes: a status index seeks them, and PostgreSQL estimates them from its statistics. `NOT IN` was
   * estimated as independent inequalities: 13,746 rows for 10 on a million (PostgreSQL 15).
   */
  rowsWithOtherStatus(): Statement {
    const codes = [...new Set(Object.values(this.table.codes))].sort((a, b) => a - b);
    const s = this.q.status;
    const ranges = [`${s} < ${codes[0]!}`];
    for (const [i, code] of codes.entries()) {
      const next = codes[i + 1];
      if (next === undefined) ranges.push(`${s} > ${code}`);
      else if (next > code + 1) ranges.push(`(${s} > ${code} AND ${s} < ${next})`);
    }
    return { sql: `SELECT 1 AS one FROM ${this.q.table} WHERE ${ranges.join(' OR ')}`, params: [] };
  }

  /** Every row, as a bare SELECT for the planner's estimate of the table's size. */
  allRows(): Statement {
    return { sql: `SELECT 1 AS one FROM ${this.q.table}`, params: [] };
  }

  /** How many rows `select` returns, counting no further than `cap` (a positive integer). */
  countUpTo(select: Statement, cap: number): Statement {
    if (!Number.isSafeInteger(cap) || cap < 1) throw new ConfigError(`count cap must be a positive integer, got ${cap}`);
    return { sql: `SELECT COUNT(*) AS n FROM (${select.sql} LIMIT ${cap}) capped`, params: select.params };
  }

  /**
   * When the earliest pending row that waits for its next_attempt_at comes due, beside the database's now, in one
   * statement (one clock, one type, so the two subtract). It looks at the first LOOK_AHEAD_ROWS pending rows not
   * yet due, in queue order, only: the pending index serves that, bounded however many rows wait. A due row further back is
   * picked up at the next poll, as before.
   */
  nextDueTime(): Statement {
    const due = this.read('nextAttemptAt');
    const ahead = this.dialect.quoteIdentifier('statusq_ahead');
    // Only rows still to come due: one due already (another worker is claiming it) must not hide a later one.
    const pending = `SELECT ${due} AS due FROM ${this.q.table} WHERE ${this.guard('claim')} AND ${due} > ${this.dialect.now} ORDER BY ${this.queueOrder()} LIMIT ${LOOK_AHEAD_ROWS}`;
    return { sql: `SELECT MIN(${ahead}.due) AS due, ${this.dialect.now} AS now FROM (${pending}) ${ahead}`, params: [] };
  }

  /** Whether a claim would find a row now: read-only, served by the pending index. */
  anyDueRow(): Statement {
    return { sql: `SELECT 1 AS found FROM ${this.q.table} WHERE ${this.dueCondition()} LIMIT 1`, params: [] };
  }

  /** A row whose status holds any of `codes` (null: pending), in one statement: one snapshot of the table. */
  anyRowWithStatus(...codes: Array<number | null>): Statement {
    const holds = codes.map((code) => this.statusHolds(code));
    const where = holds.length === 1 ? holds[0]! : `(${holds.join(' OR ')})`;
    return { sql: `SELECT 1 AS found FROM ${this.q.table} WHERE ${where} LIMIT 1`, params: [] };
  }

  /**
   * One pending row. `returningId`: the INSERT returns the new row's id as `id` (StoreCapabilities.insertReturning).
   * `placeholder`: the one the runner takes when it is not the dialect's (CallerRunner.placeholder).
   * `skipConflicts`: a row that would break a unique index is not inserted, without an error (see
   * StoreCapabilities.insertOnConflictDoNothing); the INSERT then affects and returns nothing.
   * `onlyWhere`: the row is inserted only when this FROM ... WHERE (written with the statement's own
   * parameters) finds one row, as `INSERT ... SELECT <values> FROM ...`: a schedule's tick claim (scheduler.ts).
   */
  insert(
    row: Record<string, SqlValue>,
    options: {
      returningId?: boolean;
      placeholder?: ((index: number) => string) | undefined;
      notBefore?: NotBefore | undefined;
      skipConflicts?: boolean;
      onlyWhere?: ((p: Params) => string) | undefined;
      /** The row is published by its enqueuer right after the commit (EnqueueOptions.dispatchTo): dispatched_at = now. */
      dispatched?: boolean;
    } = {},
  ): Statement {
    const p = new Params(options.placeholder ? { ...this.dialect, placeholder: options.placeholder } : this.dialect);
    const names = Object.keys(row);
    const quoted = names.map((n) => this.dialect.quoteIdentifier(n));
    const values = names.map((n) => p.add(row[n]!));
    const notBefore = options.notBefore;
    const besideDue = notBefore !== undefined && this.isBeside('nextAttemptAt');
    if (notBefore && !besideDue) {
      if (!this.q.nextAttemptAt) throw missingColumnError(this.table.table, 'nextAttemptAt', 'a delayed job');
      quoted.push(this.q.nextAttemptAt);
      values.push(this.notBeforeValue(p, notBefore));
    }
    if (options.dispatched) {
      if (!this.q.dispatchedAt) throw missingColumnError(this.table.table, 'dispatchedAt', 'enqueue with dispatchTo');
      quoted.push(this.q.dispatchedAt);
      values.push(this.dialect.now);
    }
    const columns = quoted.join(', ');
    const conflicts = options.skipConflicts ? ' ON CONFLICT DO NOTHING' : '';
    const returning = options.returningId ? ` RETURNING ${this.q.id} AS id` : '';
    const source = options.onlyWhere ? `SELECT ${values.join(', ')} FROM ${options.onlyWhere(p)}` : `VALUES (${values.join(', ')})`;
    const statement = { sql: `INSERT INTO ${this.q.table} (${columns}) ${source}${conflicts}${returning}`, params: p.values };
    if (!besideDue) return statement;
    // The due time goes to the claims table, keyed by the row's id, which is known only when the row carries it.
    const id = idValueIn(this.table, row) as SqlValue | undefined;
    if (id === null || id === undefined) {
      throw new SchemaError(
        `a delayed job on ${this.table.table} needs its ${this.table.id}: the table keeps its claim state in ${this.table.beside}, keyed by ${this.table.id}, so each delayed row must give its ${this.table.id}`,
      );
    }
    const w = new Writes();
    this.write(w, 'nextAttemptAt', { build: (sp) => this.notBeforeValue(sp, notBefore) });
    return { ...statement, then: [this.upsertBeside([id], w, options.placeholder)] };
  }

  /**
   * The id of the live row (pending or processing) holding deduplication key `key`, if there is one: one read of
   * the key index (SqlDialect.liveKey).
   */
  liveKeyHolder(key: string): Statement {
    if (!this.q.dedupeKey) throw missingColumnError(this.table.table, 'dedupeKey', 'a deduplication key');
    const p = new Params(this.dialect);
    const value = p.add(key);
    const live = `(${this.statusHolds(null)} OR ${this.statusHolds(this.table.codes.processing)})`;
    const condition = this.dialect.liveKey ? this.dialect.liveKey({ keyColumn: this.q.dedupeKey, live, placeholder: value }) : `${this.q.dedupeKey} = ${value} AND ${live}`;
    return { sql: `SELECT ${this.q.id} AS id FROM ${this.q.table} WHERE ${condition} LIMIT 1`, params: p.values };
  }

  /** A delayed job's first due time, computed by the database: its now plus the delay, or the instant given. */
  private notBeforeValue(p: Params, notBefore: NotBefore): string {
    if ('delayMs' in notBefore) return this.dialect.nowPlusMs(p.add(notBefore.delayMs));
    if (!this.dialect.atEpochMs) throw new ConfigError(`the ${this.dialect.name} dialect cannot store a run time (its SqlDialect has no atEpochMs); give a delay instead`);
    return this.dialect.atEpochMs(p.add(notBefore.atEpochMs));
  }

}
