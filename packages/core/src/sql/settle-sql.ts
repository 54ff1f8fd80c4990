/**
 * A claim's settles and what its holder writes meanwhile: complete (one row or many under one token), give up,
 * abuse, retry, release, progress and heartbeat, each one guarded UPDATE decided by its affected rows.
 */
import type { BesideColumn } from '../protocol/table.js';
import type { StatusName, TransitionCause } from '../protocol/status.js';
import type { JobId, SqlValue, Statement } from '../store/store.js';
import { missingColumnError } from './schema.js';
import { Params, TableSql, Writes, truncateError } from './table-sql.js';

export class SettleStatements extends TableSql {
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
}
