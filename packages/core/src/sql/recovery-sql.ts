/**
 * Claims whose worker is gone, and an operator's requeue: expired leases and dead owners charged an attempt
 * (or given up), rows sent back to pending, and what a requeue reports about the rows it left.
 */
import type { StatusName, TransitionCause } from '../protocol/status.js';
import type { JobId, SqlValue, Statement } from '../store/store.js';
import type { Writes} from './table-sql.js';
import { Params, TableSql, truncateError } from './table-sql.js';

/** How a cancelled row's last_error begins (Queue.cancel); a worker tells a cancel from a lost lease by it. */
export const CANCEL_PREFIX = 'cancelled: ';

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

export class RecoveryStatements extends TableSql {
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
   * the caller must know which rows it gave up (to publish their dead letters) on every store, and a store
   * without `capabilities.returning` cannot return them from the UPDATE. Poison rows are few, so the extra
   * statements cost nothing that matters; a
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
    // UPDATE moved is what its claims-table rows need, and a store without `capabilities.returning` cannot return it.
    if (this.q.beside && writes('pending').beside.length > 0) return { error, exhausted, giveUp, back: null, remaining: page(true), sendBack: one('pending') };
    const back = new Params(this.dialect);
    const backSql = `UPDATE ${this.q.table} SET ${this.setList(back, writes('pending'))} WHERE ${condition(back)}${attemptsLeft(back, true)}`;
    return { error, exhausted, giveUp, back: { sql: backSql, params: back.values }, remaining: null, sendBack: null };
  }

  /**
   * A plain (non-locking) read: is any claim's lease expired? The reaper runs its locking UPDATEs only
   * then. On a server that locks index entries, a range UPDATE over the pending index locks them before rows, the reverse of
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
   * cancel (pending or processing -> failed) by an operator: `last_error` says `cancelled: <reason>`, the
   * attempt count stays (a cancel is no attempt's failure). A running row is failed here directly rather than
   * flagged for its worker: its worker's next heartbeat, guarded by the status like every write of a claim,
   * then matches nothing, which is how it learns, and its late settle is guarded the same way, so nothing it
   * writes afterwards brings the row back.
   */
  cancel(ids: readonly JobId[], reason: string): Statement {
    const w = this.moveTo(this.table.codes.failed);
    this.write(w, 'lastError', { param: truncateError(reason, this.table.limits.lastError) });
    this.write(w, 'finishedAt', { sql: this.dialect.now });
    return this.rangeMove(w, (p) => `${this.guard('cancel')} AND ${p.in(`${this.q.table}.${this.q.id}`, ids)}`);
  }

  /**
   * The cancel reason of each of `ids` that is failed with a last_error of a cancel: what a worker whose
   * heartbeat found those claims gone aborts their handlers with (a cancel, not a lease taken over).
   */
  cancelledAmong(ids: readonly JobId[]): Statement | null {
    if (!this.q.lastError) return null;
    const p = new Params(this.dialect);
    const where = `${p.in(this.q.id, ids)} AND ${this.statusIs('failed')} AND ${this.read('lastError')} LIKE ${p.add(`${CANCEL_PREFIX}%`)}`;
    return { sql: `SELECT ${this.q.id} AS id, ${this.read('lastError')} AS reason FROM ${this.q.table} WHERE ${where}`, params: p.values };
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
}
