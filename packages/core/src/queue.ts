import { claimConditionalUpdate } from './claim.js';
import { ConfigError, SchemaError } from './errors.js';
import { validateIdentifier } from './identifiers.js';
import { statusName, type StatusName } from './status.js';
import type { ClaimRequest, ClaimResult, ClaimStrategy, ExecResult, JobId, SqlValue, Statement, Store } from './store.js';
import { resolveTable, validateTableConfig, type ColumnInfo, type ResolvedTable, type TableConfig } from './table.js';
import { TransitionSql } from './transition-sql.js';

/**
 * Rows per status, plus `other`: rows whose status is none of the five codes (a stray 7, -1, 'done'), so the
 * counts always add up to the table's row count. These six keys are what `statusq stats --json` prints.
 */
export type StatusCounts = Record<StatusName | 'other', number>;

/** Rows per INSERT transaction when enqueueing many. */
const ENQUEUE_CHUNK = 500;

/**
 * One queue table on one store: the table checked against the database once, and every operation on its
 * rows. The worker and the CLI both go through this.
 */
export class Queue {
  readonly sql: TransitionSql;
  private readonly columnNames: ReadonlySet<string>;
  private constructor(
    readonly store: Store,
    readonly table: ResolvedTable,
    columns: readonly ColumnInfo[],
  ) {
    this.columnNames = new Set(columns.map((c) => c.name.toLowerCase()));
    this.sql = new TransitionSql(table, store.dialect);
  }

  /** Checks the configuration against the real table; a missing table or column is a SchemaError here. */
  static async open(store: Store, config: TableConfig): Promise<Queue> {
    // Names are checked before any of them reaches SQL, even the read-only introspection.
    validateTableConfig(config);
    const columns = await store.describeTable(config.table);
    return new Queue(store, resolveTable(config, columns, (c) => store.orderTimeEncoding(c)), columns ?? []);
  }

  async claim(request: ClaimRequest, strategy: ClaimStrategy = 'native'): Promise<ClaimResult> {
    if (!Number.isSafeInteger(request.limit) || request.limit < 1) throw new ConfigError(`claim limit must be a positive integer, got ${request.limit}`);
    return strategy === 'native' ? this.store.claim(this.table, request) : claimConditionalUpdate(this.store, this.table, request);
  }

  /**
   * Runs guarded transitions with one commit; `affected` of each says whether it happened. A single
   * statement runs in autocommit: it is atomic on its own, and BEGIN/COMMIT would triple its round trips
   * (a flush of grouped completions is usually one statement).
   */
  async apply(statements: readonly Statement[]): Promise<ExecResult[]> {
    if (statements.length === 0) return [];
    if (statements.length === 1) return [await this.store.execute(statements[0]!)];
    return this.store.executeBatch(statements);
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

  async hasRowsWithStatus(name: StatusName): Promise<boolean> {
    const code = name === 'pending' ? null : this.table.codes[name];
    const { rows } = await this.store.execute(this.sql.anyRowWithStatus(code));
    return rows.length > 0;
  }

  async reapExpired(leaseMs: number, maxAttempts: number): Promise<number> {
    const probe = this.sql.anyExpired(leaseMs);
    if (probe && (await this.store.execute(probe)).rows.length === 0) return 0;
    const results = await this.apply(this.sql.reapExpired(leaseMs, maxAttempts));
    return results.reduce((n, r) => n + r.affected, 0);
  }

  /** Operator requeue: failed or abuse rows (or rows stuck in processing) back to pending. */
  async requeue(from: 'failed' | 'abuse' | 'processing', ids?: readonly JobId[]): Promise<number> {
    const statement = from === 'processing' ? this.sql.requeueProcessing(ids) : this.sql.requeue(from, ids);
    return (await this.store.execute(statement)).affected;
  }

  /** abuse (pending -> abuse) without a claim, for a business rule applied outside a worker. */
  async markAbuse(id: JobId, reason: string): Promise<boolean> {
    return (await this.store.execute(this.sql.abuse(id, null, reason, 'pending'))).affected === 1;
  }

  /**
   * Inserts pending rows. On a table with a payload column each item is a payload, stored as JSON. On a
   * table without one each item must be an object of column values (an application's own rows).
   */
  async enqueue(items: readonly unknown[]): Promise<number> {
    const statements = items.map((item, index) => this.sql.insert(this.rowFor(item, index)));
    let inserted = 0;
    for (let i = 0; i < statements.length; i += ENQUEUE_CHUNK) {
      const results = await this.store.executeBatch(statements.slice(i, i + ENQUEUE_CHUNK));
      inserted += results.reduce((n, r) => n + r.affected, 0);
    }
    return inserted;
  }

  private rowFor(item: unknown, index: number): Record<string, SqlValue> {
    const payloadColumn = this.table.columns.payload;
    if (payloadColumn) {
      const text = JSON.stringify(item);
      if (text === undefined) throw new ConfigError(`item ${index + 1}: payload is not JSON-serialisable`);
      return { [payloadColumn]: text };
    }
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      throw new ConfigError(`item ${index + 1}: table ${this.table.table} has no payload column, so each item must be an object of column values`);
    }
    const row: Record<string, SqlValue> = {};
    for (const [key, value] of Object.entries(item)) {
      validateIdentifier(key, 'column name');
      if (!this.columnNames.has(key.toLowerCase())) throw new SchemaError(`item ${index + 1}: table ${this.table.table} has no column ${JSON.stringify(key)}`);
      if (key.toLowerCase() === this.table.status.toLowerCase()) {
        throw new SchemaError(`item ${index + 1}: the status column is set by statusq; enqueue leaves it NULL (pending)`);
      }
      row[key] = toSqlValue(value);
    }
    return row;
  }
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

export function toSqlValue(value: unknown): SqlValue {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (value instanceof Date) return value.toISOString();
  return JSON.stringify(value);
}
