/** The broker relay's statements: which pending rows to publish, and their dispatch marks. */
import type { JobId, Statement } from '../store/store.js';
import { Params, TableSql } from './table-sql.js';

export class DispatchStatements extends TableSql {
  /**
   * A pending, due row a relay should publish: not dispatched since its last claim (every claim sets
   * dispatched_at back to NULL: a new row, a retry, a lease that ran out, a hand-back), or dispatched longer
   * than `redispatchMs` ago and still not claimed (the broker lost the message, or the relay died between
   * marking and publishing). A row waiting in the broker's queue matches neither, so a backlog is published
   * once, and the dispatch index (status, dispatched_at, order) serves both without reading the backlog:
   * measured with 50,000 dispatched rows waiting, a pass read them all without it (44 ms on one adapter's
   * server, 9 ms on another's, growing with the backlog).
   */
  private needsDispatch(p: Params, redispatchMs: number): string {
    const d = this.q.dispatchedAt!;
    return `${this.dueCondition()} AND (${d} IS NULL OR ${d} < ${this.dialect.nowPlusMs(p.add(-redispatchMs))})`;
  }

  /**
   * Up to `limit` rows to dispatch (id and attempt): those never dispatched since their last claim, in queue
   * order, then those whose dispatch is oldest, before the cutoff. Two selections, each a range of the dispatch
   * index (status, dispatched_at, order), wrapped as derived tables because a server may allow a LIMIT only on
   * the last SELECT of a UNION. Measured with 50,000 dispatched rows waiting in the broker on one adapter's
   * server: 9 ms a pass with one OR'd selection over the pending index, 0.4 ms this way. `dispatchIndex`: the dispatch index's name
   * when the table has it, for a dialect that hints (forceIndex).
   */
  dispatchCandidates(limit: number, redispatchMs: number, dispatchIndex: string | null = null): Statement {
    const p = new Params(this.dialect);
    const d = this.q.dispatchedAt!;
    const attempts = this.dialect.quoteIdentifier('attempts');
    const what = `${this.q.id}${this.q.attemptCount ? `, ${this.read('attemptCount')} AS ${attempts}` : ''}`;
    // One adapter's server (50,000 rows waiting in the broker, 100 due) chose the pending index for this text in most
    // runs of the last session and in the first second after a bulk mark here (36-42 ms a pass, growing with the
    // backlog), against 0.5-0.7 ms through the dispatch index, with or without ANALYZE, whatever the ORDER BY:
    // its statistics trail the relay's own writes. Where the dialect can name an index, it is named.
    const hint = dispatchIndex !== null && this.dialect.forceIndex ? ` ${this.dialect.forceIndex(this.dialect.quoteIdentifier(dispatchIndex))}` : '';
    const branch = (where: string, orderBy: string, alias: string) =>
      `SELECT * FROM (SELECT ${what} FROM ${this.q.table}${hint} WHERE ${this.dueCondition()} AND ${where} ORDER BY ${orderBy} LIMIT ${p.add(limit)}) ${this.dialect.quoteIdentifier(alias)}`;
    // dispatched_at is NULL throughout this branch: leading the ORDER BY with it changes no order, and only the
    // dispatch index gives it; with the queue order alone that server walked the pending index at run time.
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
}
