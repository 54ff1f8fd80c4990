/**
 * What every statement of a statusq table is built from: its quoted names, the parameter list, the status
 * guards taken from the legal moves (protocol/status.ts: no builder writes a status condition of its own), the
 * claim token guard, and the writes of a move, in the table's own UPDATE or in its claims table (ResolvedTable.beside).
 * The statements themselves are grouped by operation beside it (claim-sql.ts, settle-sql.ts, recovery-sql.ts,
 * dispatch-sql.ts, read-sql.ts, insert-sql.ts) and put together as TransitionSql (transition-sql.ts).
 */
import { ConfigError } from '../protocol/errors.js';
import { assertTransition, sourcesOf, statusCode, type StatusName, type TransitionCause } from '../protocol/status.js';
import type { JobId, SqlDialect, SqlParam, SqlValue, Statement, Upsert } from '../store/store.js';
import { BESIDE_COLUMNS, isBesideColumn, validateKind, type BesideColumn, type OptionalColumn, type ResolvedTable } from '../protocol/table.js';
import { columnOverflow, type ColumnLimit } from '../protocol/columns.js';

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
  readonly kind?: string;
  readonly group?: string;
  readonly traceContext?: string;
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
export type Written = { readonly sql: string } | { readonly param: SqlValue } | { readonly nowPlusMs: number } | { readonly build: (p: Params) => string } | 'increment';

/**
 * The writes of one move: SET items of the table's own UPDATE, and the values of claims-table columns (on a table
 * whose claim state is beside it), which follow as an upsert in the same transaction (Statement.then).
 */
export class Writes {
  readonly own: Array<(p: Params) => string> = [];
  readonly beside: Array<{ column: string; value: Written }> = [];
}

const ON_CONFLICT_UPSERT = (table: string, key: string): Upsert => ({
  // A server may refuse an unqualified column in DO UPDATE (it could be the proposed row's), so the target is aliased.
  into: `${table} AS statusq_claims`,
  existing: 'statusq_claims',
  proposed: (column) => `excluded.${column}`,
  clause: (sets) => `ON CONFLICT (${key}) DO UPDATE SET ${sets}`,
});

/** The table, its quoted names and the parts every statement shares; the operations' statements extend it. */
export class TableSql {
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
  protected besideColumnsRead(): string[] {
    return BESIDE_COLUMNS.filter((key) => this.isBeside(key)).map((key) => `${this.read(key)} AS ${this.q[key]!}`);
  }

  /** Whether optional column `key` is one of the claims table's (ResolvedTable.beside) rather than the table's. */
  isBeside(key: OptionalColumn): key is BesideColumn {
    return this.q.beside !== undefined && isBesideColumn(key) && this.q[key] !== undefined;
  }

  /** `<claims table> WHERE <its id> = <the table's id>`: the claims-table row of the row a statement on the table is at. */
  protected besideRow(): string {
    return `${this.q.beside!} WHERE ${this.q.beside!}.${this.q.id} = ${this.q.table}.${this.q.id}`;
  }

  /** Optional column `key` of the row a statement on the table is at: the column, or its claims-table value (NULL without a claims-table row). */
  read(key: OptionalColumn): string {
    const column = this.q[key]!;
    return this.isBeside(key) ? `(SELECT ${this.q.beside!}.${column} FROM ${this.besideRow()})` : column;
  }

  /** The claims-table row of the row a statement on the table is at exists and meets `condition`. */
  protected besideHas(condition: string): string {
    return `EXISTS (SELECT 1 FROM ${this.besideRow()} AND ${condition})`;
  }

  /** In a statement on the claims table: the table's row of the claims-table row it is at exists (and meets `condition`). */
  protected claimedRow(condition?: string): string {
    return `EXISTS (SELECT 1 FROM ${this.q.table} WHERE ${this.q.table}.${this.q.id} = ${this.q.beside!}.${this.q.id}${condition === undefined ? '' : ` AND ${condition}`})`;
  }

  /** A claims-table column, qualified (inside besideHas, and in statements on the claims table). */
  protected besideColumn(key: BesideColumn): string {
    return `${this.q.beside!}.${this.q[key]!}`;
  }

  /** Adds the write of `value` to optional column `key` to `w`, in the table's UPDATE or in its claims-table upsert. */
  protected write(w: Writes, key: OptionalColumn, value: Written): void {
    const column = this.q[key];
    if (column === undefined) return;
    if (this.isBeside(key)) w.beside.push({ column, value });
    else w.own.push((p) => `${column} = ${this.render(p, value, column)}`);
  }

  protected render(p: Params, value: Written, column: string): string {
    if (value === 'increment') return `COALESCE(${column}, 0) + 1`;
    if ('sql' in value) return value.sql;
    if ('param' in value) return p.add(value.param);
    if ('build' in value) return value.build(p);
    return this.dialect.nowPlusMs(p.add(value.nowPlusMs));
  }

  /** A move's writes that begin with the status column's new value. */
  protected moveTo(status: number | null): Writes {
    const w = new Writes();
    w.own.push(() => `${this.q.status} = ${status === null ? 'NULL' : status}`);
    return w;
  }

  /** The SET list of the table's own writes, parameters added in text order. */
  protected setList(p: Params, w: Writes): string {
    return w.own.map((item) => item(p)).join(', ');
  }

  /**
   * The claims-table rows of `ids` take the values of `w`: created where missing (an attempt counted starts at 1),
   * updated where present. One statement: `INSERT ... VALUES ... ON CONFLICT DO UPDATE` (SqlDialect.upsert).
   */
  protected upsertBeside(ids: readonly JobId[], w: Writes, placeholder?: (index: number) => string): Statement {
    const p = new Params(placeholder ? { ...this.dialect, placeholder } : this.dialect);
    const rows = ids.map((id) => `(${[p.add(id as SqlValue), ...this.besideValues(p, w)].join(', ')})`);
    return { sql: this.besideUpsert(w, `VALUES ${rows.join(', ')}`), params: p.values };
  }

  /** The values of `w`'s claims-table columns for a new claims-table row (an attempt counted is its first). */
  protected besideValues(p: Params, w: Writes): string[] {
    return w.beside.map((v) => (v.value === 'increment' ? '1' : this.render(p, v.value, v.column)));
  }

  /** INSERT into the claims table of `source` (VALUES or a SELECT of id and besideValues), an existing row updated instead. */
  protected besideUpsert(w: Writes, source: string): string {
    const upsert = (this.dialect.upsert ?? ON_CONFLICT_UPSERT)(this.q.beside!, this.q.id);
    const sets = w.beside.map((v) => `${v.column} = ${v.value === 'increment' ? `COALESCE(${upsert.existing}.${v.column}, 0) + 1` : upsert.proposed(v.column)}`);
    return `INSERT INTO ${upsert.into} (${[this.q.id, ...w.beside.map((v) => v.column)].join(', ')}) ${source} ${upsert.clause(sets.join(', '))}`;
  }

  /**
   * `statement` (an UPDATE of the rows `ids`, decided by its affected rows) with the claims-table writes of `w` after
   * it, and before it the lock of those rows (`lock`, see lockRows). A claim of locked candidates needs no lock again.
   */
  protected withBeside(statement: Statement, ids: readonly JobId[], w: Writes, lock = true): Statement {
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
  protected lockRows(where: (p: Params) => string): Statement[] {
    if (!this.dialect.forUpdate) return [];
    const p = new Params(this.dialect);
    return [{ sql: `SELECT ${this.q.id} FROM ${this.q.table} WHERE ${where(p)} ORDER BY ${this.q.id}${this.dialect.forUpdate}`, params: p.values }];
  }

  /**
   * `status = <code>` or `status IS NULL` for the states `cause` may start from. A builder asked for one
   * named move (`only`) gets IllegalTransitionError for a move the table does not allow, never a guard
   * that matches nothing.
   */
  protected guard(cause: TransitionCause, only?: readonly [from: StatusName, to: StatusName]): string {
    if (only) assertTransition(only[0], only[1], cause);
    const conditions = (only ? [only[0]] : sourcesOf(cause)).map((name) => this.statusIs(name));
    return conditions.length === 1 ? conditions[0]! : `(${conditions.join(' OR ')})`;
  }

  /** The status column holds `name` (pending is NULL). */
  protected statusIs(name: StatusName): string {
    return this.statusHolds(statusCode(name, this.table.codes));
  }

  protected statusHolds(code: number | null): string {
    return code === null ? `${this.q.status} IS NULL` : `${this.q.status} = ${code}`;
  }

  protected tokenGuard(p: Params, token: string | null): string {
    if (!this.q.workerId || token === null) return '';
    if (this.isBeside('workerId')) return ` AND ${this.besideHas(`${this.besideColumn('workerId')} = ${p.add(token)}`)}`;
    return ` AND ${this.q.workerId} = ${p.add(token)}`;
  }

  /** The attempt a charge counts, as a condition reads it. */
  protected attemptsPlusOne(): string {
    return `COALESCE(${this.read('attemptCount')}, 0) + 1`;
  }

  /**
   * Claimable (pending) and due: no retry scheduled for later. `now`: the database's time as another
   * expression (an `idleProbe` store's probe needs one that moves within a statement).
   */
  dueCondition(now = this.dialect.now): string {
    const pending = this.guard('claim') + this.kindsCondition();
    if (!this.q.nextAttemptAt) return pending;
    // Not "read(...) IS NULL OR ... <= now": the claims-table row is looked up once, and one without a time is due.
    if (this.isBeside('nextAttemptAt')) return `${pending} AND NOT ${this.besideHas(`${this.besideColumn('nextAttemptAt')} > ${now}`)}`;
    return `${pending} AND (${this.q.nextAttemptAt} IS NULL OR ${this.q.nextAttemptAt} <= ${now})`;
  }

  /**
   * ` AND kind IN (...)` for a view that claims some kinds only (ResolvedTable.claimKinds), else nothing. The
   * kinds are literals: validated names (validateKind) whose alphabet has no quote, and one list serves every
   * statement that asks what is claimable, the reusable (prepared) claim among them.
   */
  protected kindsCondition(): string {
    const kinds = this.table.claimKinds;
    if (kinds === null) return '';
    if (!this.q.kind) throw new ConfigError(`table ${this.table.table} has no kind column to claim kinds by`);
    return ` AND ${this.q.kind} IN (${kinds.map((kind) => `'${validateKind(kind)}'`).join(', ')})`;
  }

  /** The claim's order: highest priority first where the table has a priority column, then the order column. */
  protected queueOrder(): string {
    const byOrder = `${this.q.order} ${this.table.direction === 'newest' ? 'DESC' : 'ASC'}`;
    return this.q.priority ? `${this.q.priority} DESC, ${byOrder}` : byOrder;
  }
}
