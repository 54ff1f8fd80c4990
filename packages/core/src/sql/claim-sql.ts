/**
 * The claim's statements: the candidates in queue order, the guarded claim by ids (or over ids kept on the
 * server), and the claimed rows read back. The pipeline that runs them is claim.ts.
 */
import { ConfigError } from '../protocol/errors.js';
import type { JobId, SqlValue, Statement } from '../store/store.js';
import { Params, TableSql, type Writes } from './table-sql.js';

export class ClaimStatements extends TableSql {
  /**
   * Candidate selection: the due rows in queue order. With `agedMs`, only rows older than that, oldest
   * first (aging takes these before the configured order). Both shapes are served by the pending index.
   * `columns`: the id alone, or the claimed row's columns (rowColumns).
   */
  candidates(p: Params, options: { limit: number; columns: 'id' | 'row'; agedMs?: number | undefined; clock?: string | undefined; alsoWhere?: string | undefined; now?: string; group?: string }): string {
    let what = options.columns === 'id' ? this.q.id : this.rowColumns;
    // Each candidate's group beside it, for a claim under a group limit that decides row by row (limits/group-limits.ts).
    if (options.group !== undefined) what += `, ${this.groupColumn()} AS ${this.dialect.quoteIdentifier(options.group)}`;
    // The database's own time alongside the candidates, for a claim that writes it back as claimed_at.
    if (options.clock !== undefined) what += `, ${this.dialect.now} AS ${this.dialect.quoteIdentifier(options.clock)}`;
    let where = this.dueCondition(options.now);
    // A condition of the caller's own, ANDed (an `idleProbe` store's probe ties each of its checks to its step).
    if (options.alsoWhere !== undefined) where += ` AND ${options.alsoWhere}`;
    let orderBy = this.queueOrder();
    if (options.agedMs !== undefined) {
      // Aged rows oldest first whatever their priority: that is what bounds a low priority's wait.
      where += ` AND ${this.q.order} <= ${this.dialect.orderCutoff(p.add(-options.agedMs), this.table.orderTime)}`;
      orderBy = `${this.q.order} ASC`;
    }
    return `SELECT ${what} FROM ${this.q.table} WHERE ${where} ORDER BY ${orderBy} LIMIT ${p.add(options.limit)}`;
  }

  /**
   * Rows outside `groups` (rows without a group included): a claim under a group limit skips the groups at their
   * limit in SQL, so one busy group's rows at the head of the queue do not fill every page of candidates.
   */
  outsideGroups(p: Params, groups: readonly SqlValue[]): string | undefined {
    if (groups.length === 0) return undefined;
    const column = this.groupColumn();
    return `(${column} IS NULL OR ${column} NOT IN (${groups.map((group) => p.add(group)).join(', ')}))`;
  }

  protected groupColumn(): string {
    if (!this.q.group) throw new ConfigError(`table ${this.table.table} has no group column`);
    return this.q.group;
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
   * a server that locks index gaps lock the claims table's gaps, which the claim's own upsert then waits on). With a claims table the
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
   * claim (NULL -> processing) of the rows `rows` keeps (ClaimIdsOnServer.rowsOf: candidates this transaction
   * holds locked), guarded like claimByIds. Not for a table with a claims table.
   */
  claimJoined(rows: string, token: string | null): Statement {
    const p = new Params(this.dialect);
    return { sql: `UPDATE ${rows} SET ${this.claimAssignments(p, token)} WHERE ${this.dueCondition()}`, params: p.values };
  }

  /** The rows `rows` (ClaimIdsOnServer.rowsOf) keeps, as rowColumns (the table's own where every column is read). */
  selectJoined(rows: string): Statement {
    const columns = this.table.returned === null ? `${this.q.table}.*` : this.rowColumns;
    return { sql: `SELECT ${columns} FROM ${rows}`, params: [] };
  }

  /** The claimed rows of `ids` (rowColumns), read back after a claim that could not return them. */
  selectByIds(ids: readonly JobId[]): Statement {
    const p = new Params(this.dialect);
    return { sql: `SELECT ${this.rowColumns} FROM ${this.q.table} WHERE ${p.in(this.q.id, ids)}`, params: p.values };
  }
}
