/** New rows: the INSERT of a pending row (delayed, deduplicated, already dispatched) and the live holder of a key. */
import { ConfigError, SchemaError } from '../protocol/errors.js';
import { idValueIn } from '../protocol/table.js';
import type { SqlValue, Statement } from '../store/store.js';
import { missingColumnError } from './schema.js';
import { Params, TableSql, Writes } from './table-sql.js';

/** When a new row first becomes claimable: a delay from the database's now, or an instant (ms since the epoch, UTC). */
export type NotBefore = { readonly delayMs: number } | { readonly atEpochMs: number };

export class InsertStatements extends TableSql {
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
