/** Reads, never writes: an operator's listing, counts by status and their estimates, the look-ahead for the next due row. */
import { ConfigError, SchemaError } from '../protocol/errors.js';
import { validateKind } from '../protocol/table.js';
import type { StatusName } from '../protocol/status.js';
import type { JobId, Statement } from '../store/store.js';
import { Params, TableSql } from './table-sql.js';

/** Pending rows an idle worker's look-ahead for the next due time reads at most (TransitionSql.nextDueTime). */
export const LOOK_AHEAD_ROWS = 100;

export class ReadStatements extends TableSql {
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
    for (const key of ['kind', 'priority', 'dedupeKey', 'attemptCount', 'dispatchedAt', 'claimedAt', 'workerId', 'progress', 'nextAttemptAt', 'lastError', 'finishedAt'] as const) {
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
   *   claimed_at. No index is kept for it: a composite pending index (status first) finds the processing rows
   *   by status and sorts those few; a partial pending index covers pending rows only, so a store with one
   *   reads the table.
   * - failed and abuse: newest finished first (finished_at, rows without one last), else newest id first.
   *   A sort of that status's rows (a composite pending index finds them through its status prefix; with a
   *   partial pending index the server reads the table, or walks the primary key backwards for id order): cost grows with
   *   the table, which an operator's look can afford and a worker's loop could not.
   */
  inspect(status: StatusName, limit: number, clock: string, kind?: string): Statement {
    const p = new Params(this.dialect);
    // One kind's rows (kind first in the kind index on some dialects, status first on others: both seek them).
    const ofKind = kind === undefined ? '' : ` AND ${this.kindColumn()} = ${p.add(validateKind(kind, 'inspect: kind'))}`;
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
      `WHERE ${this.statusIs(status)}${ofKind} ORDER BY ${orderBy} LIMIT ${p.add(limit)}`;
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
   * What Queue.waitFor reads of the rows it awaits, by their primary key: each one's id and status, and its
   * result and last error where the table has those columns. A lookup by id costs one index probe per row however
   * big the table is, which is what lets waitFor read them again on every wake-up (and on its backoff) without
   * weighing on the database.
   */
  outcomeOfIds(ids: readonly JobId[]): Statement {
    const p = new Params(this.dialect);
    const q = (name: string) => this.dialect.quoteIdentifier(name);
    let what = `${this.q.id} AS ${q('id')}, ${this.q.status} AS ${q('status')}`;
    if (this.q.result) what += `, ${this.q.result} AS ${q('result')}`;
    if (this.q.lastError) what += `, ${this.read('lastError')} AS ${q('last_error')}`;
    return { sql: `SELECT ${what} FROM ${this.q.table} WHERE ${p.in(this.q.id, ids)}`, params: p.values };
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

  /** How many rows hold one non-pending status code; of the view's kinds on a view of some kinds (a kind's limit counts its own). */
  countWithStatus(code: number): Statement {
    return { sql: `SELECT COUNT(*) AS n FROM ${this.q.table} WHERE ${this.q.status} = ${code}${this.kindsCondition()}`, params: [] };
  }

  /** Processing rows per group (rows without one left out), the count a group limit is held to; read through the group index. */
  processingByGroup(groupAlias: string): Statement {
    if (!this.q.group) throw new ConfigError(`table ${this.table.table} has no group column to count by`);
    return {
      sql: `SELECT ${this.q.group} AS ${this.dialect.quoteIdentifier(groupAlias)}, COUNT(*) AS n FROM ${this.q.table} WHERE ${this.q.status} = ${this.table.codes.processing} AND ${this.q.group} IS NOT NULL GROUP BY ${this.q.group}`,
      params: [],
    };
  }

  countByStatus(): Statement {
    return { sql: `SELECT ${this.q.status} AS status, COUNT(*) AS n FROM ${this.q.table} GROUP BY ${this.q.status}`, params: [] };
  }

  /** Rows by kind and status, on a table with a kind column (a whole-table count, as countByStatus). */
  countByKindAndStatus(): Statement {
    if (!this.q.kind) throw new ConfigError(`table ${this.table.table} has no kind column to count by`);
    return { sql: `SELECT ${this.q.kind} AS kind, ${this.q.status} AS status, COUNT(*) AS n FROM ${this.q.table} GROUP BY ${this.q.kind}, ${this.q.status}`, params: [] };
  }

  /**
   * Pending and processing rows by kind and status (rows without a kind under a NULL kind), for a gauge read on
   * an interval: the kind index holds exactly these rows, so the count reads them and never the finished ones.
   */
  countLiveByKind(): Statement {
    const kind = this.kindColumn();
    const live = `(${this.statusHolds(null)} OR ${this.statusIs('processing')})`;
    return { sql: `SELECT ${kind} AS kind, ${this.q.status} AS status, COUNT(*) AS n FROM ${this.q.table} WHERE ${live} GROUP BY ${kind}, ${this.q.status}`, params: [] };
  }

  /**
   * Per kind of the whole table, its due pending rows (what a claim would take now): how many, the least order
   * value (the one that has waited longest, where the order column is a time) and the database's clock. What
   * tells a kind no worker claims from one that is merely busy.
   */
  duePendingByKind(): Statement {
    const kind = this.kindColumn();
    return {
      sql: `SELECT ${kind} AS kind, COUNT(*) AS n, MIN(${this.q.order}) AS oldest, ${this.dialect.now} AS clock FROM ${this.q.table} WHERE ${this.dueCondition()} GROUP BY ${kind}`,
      params: [],
    };
  }

  private kindColumn(): string {
    if (!this.q.kind) throw new SchemaError(`table ${this.table.table} has no kind column (statusq migrate --with kinds adds it; an application's own column: columns.kind, --kind-column)`);
    return this.q.kind;
  }

  /** The rows whose status holds `code` (null: pending), as a bare SELECT to plan, estimate or count. */
  rowsWithStatus(code: number | null): Statement {
    return { sql: `SELECT 1 AS one FROM ${this.q.table} WHERE ${this.statusHolds(code)}`, params: [] };
  }

  /**
   * The rows whose status is none of the table's codes (and not NULL), spelled as the ranges between the
   * codes: a status index seeks them, and a planner that keeps column statistics estimates them from those.
   * `NOT IN` was estimated as independent inequalities: 13,746 rows for 10 on a million (measured on one
   * adapter's server).
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
    const pending = `SELECT ${due} AS due FROM ${this.q.table} WHERE ${this.guard('claim')}${this.kindsCondition()} AND ${due} > ${this.dialect.now} ORDER BY ${this.queueOrder()} LIMIT ${LOOK_AHEAD_ROWS}`;
    return { sql: `SELECT MIN(${ahead}.due) AS due, ${this.dialect.now} AS now FROM (${pending}) ${ahead}`, params: [] };
  }

  /** Whether a claim would find a row now: read-only, served by the pending index. */
  anyDueRow(): Statement {
    return { sql: `SELECT 1 AS found FROM ${this.q.table} WHERE ${this.dueCondition()} LIMIT 1`, params: [] };
  }

  /**
   * A row whose status holds any of `codes` (null: pending), in one statement: one snapshot of the table. Of the
   * view's kinds only, on a view of some kinds.
   */
  anyRowWithStatus(...codes: Array<number | null>): Statement {
    const holds = codes.map((code) => this.statusHolds(code));
    const where = holds.length === 1 ? holds[0]! : `(${holds.join(' OR ')})`;
    // A view of some kinds (a worker with handlers by kind) asks about its own rows: others' are not its work.
    return { sql: `SELECT 1 AS found FROM ${this.q.table} WHERE ${where}${this.kindsCondition()} LIMIT 1`, params: [] };
  }
}
