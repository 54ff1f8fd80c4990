/**
 * Test-only: a Store on sql.js (SQLite compiled to WebAssembly), so the worker's unit tests run in memory
 * with no server and no native driver. Its dialect copies the SQLite adapter's shape; its native claim
 * can take each of the claim pipeline's paths (SqlJsClaim), so they run without a server. Hooks let a test fail a call before it runs or after it commits, which no
 * real database does on demand. Never part of the build: sql.js is a devDependency.
 */
import initSqlJs, { type Database, type SqlValue as SqlJsValue } from 'sql.js';
import { afterEach } from 'vitest';
import { ConnectionGate } from '../store/connection-gate.js';
import { StoreError } from '../protocol/errors.js';
import { quoteIdentifierWith } from '../protocol/identifiers.js';
import { DEFAULT_CAPABILITIES, type ExecResult, type NativeClaim, type Row, type SqlDialect, type Statement, type StatementRunner, type Store, type StoreCapabilities } from '../store/store.js';
import type { OrderTimeEncoding } from '../protocol/table.js';
import type { ColumnInfo } from '../protocol/columns.js';

const NOW_MS = `CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)`;

const dialect: SqlDialect = {
  name: 'sql.js',
  quoteIdentifier: quoteIdentifierWith('"'),
  placeholder: () => '?',
  now: NOW_MS,
  nowPlusMs: (ms) => `(${NOW_MS} + ${ms})`,
  atEpochMs: (ms) => `CAST(${ms} AS INTEGER)`,
  orderCutoff: (ms, encoding) => (encoding === 'text' ? `strftime('%Y-%m-%d %H:%M:%f', 'now', (${ms} / 1000.0) || ' seconds')` : `(${NOW_MS} + ${ms})`),
};

/** Which call a hook sees: the statements of one execute (one) or one executeBatch (its transaction). */
export type StoreHook = (statements: readonly Statement[]) => void;

/**
 * Which path the native claim takes. `one-statement`: `UPDATE ... IN (...) RETURNING *` (as SQLite);
 * `returning`: a transaction whose UPDATE returns the rows (as PostgreSQL with aging); `built`: no RETURNING,
 * the rows built from the candidates and the clock they carried (as MySQL); `read-back`: no RETURNING and
 * the rows read back; `none`: no native claim, so native claims are conditional updates.
 */
export type SqlJsClaim = 'one-statement' | 'returning' | 'built' | 'read-back' | 'none';

function nativeClaim(path: SqlJsClaim): NativeClaim | undefined {
  switch (path) {
    case 'one-statement':
      return { lockCandidates: '', oneStatement: ({ table, id, set, candidates, returning }) => `UPDATE ${table} SET ${set} WHERE ${id} IN (${candidates}) RETURNING ${returning}` };
    case 'returning':
    case 'read-back':
      return { lockCandidates: '' };
    case 'built':
      return { lockCandidates: '', clockWithCandidates: true, claimWritesAreKnown: async () => true };
    case 'none':
      return undefined;
  }
}

export class SqlJsStore implements Store {
  readonly dialect = dialect;
  readonly capabilities: StoreCapabilities;
  readonly nativeClaim: NativeClaim | undefined;
  /** Runs before a call; what it throws rejects the call with nothing run. */
  beforeRun: StoreHook | null = null;
  /** Runs after a call committed; what it throws rejects the call as a reply lost after the commit would. */
  afterCommit: StoreHook | null = null;
  private closed = false;
  private readonly gate = new ConnectionGate();

  private constructor(
    readonly db: Database,
    claim: SqlJsClaim,
  ) {
    this.nativeClaim = nativeClaim(claim);
    this.capabilities = { ...DEFAULT_CAPABILITIES, batchClaim: claim !== 'none', returning: claim === 'one-statement' || claim === 'returning' };
  }

  static async open(ddl: string, claim: SqlJsClaim = 'one-statement'): Promise<SqlJsStore> {
    const SQL = await initSqlJs();
    const store = new SqlJsStore(new SQL.Database(), claim);
    store.db.run(ddl);
    return store;
  }

  async execute(statement: Statement): Promise<ExecResult> {
    return (await this.executeBatch([statement]))[0]!;
  }

  async executeBatch(statements: readonly Statement[]): Promise<ExecResult[]> {
    const results = await this.gate.call(() => {
      if (this.closed) throw new StoreError('ConnectionLost', 'store closed');
      this.beforeRun?.(statements);
      return this.inTransaction(() => statements.map((s) => this.run(s)));
    });
    this.afterCommit?.(statements);
    return results;
  }

  /** The hooks see each statement of the transaction as its own call. */
  transaction<T>(body: (tx: StatementRunner) => Promise<T>): Promise<T> {
    return this.gate.hold(async () => {
      if (this.closed) throw new StoreError('ConnectionLost', 'store closed');
      const tx: StatementRunner = {
        execute: async (statement) => {
          this.beforeRun?.([statement]);
          return this.run(statement);
        },
      };
      this.db.run('BEGIN IMMEDIATE');
      try {
        const result = await body(tx);
        this.db.run('COMMIT');
        return result;
      } catch (error) {
        this.db.run('ROLLBACK');
        throw asStoreError(error);
      }
    });
  }

  private inTransaction(body: () => ExecResult[]): ExecResult[] {
    this.db.run('BEGIN IMMEDIATE');
    try {
      const results = body();
      this.db.run('COMMIT');
      return results;
    } catch (error) {
      this.db.run('ROLLBACK');
      throw asStoreError(error);
    }
  }

  /** Rows of a query run outside the hooks, for a test's own assertions. */
  rows(sql: string, params: SqlJsValue[] = []): Row[] {
    const statement = this.db.prepare(sql, params);
    const rows: Row[] = [];
    while (statement.step()) rows.push(statement.getAsObject());
    statement.free();
    return rows;
  }

  private run(statement: Statement): ExecResult {
    const before = this.totalChanges();
    const rows = this.rows(
      statement.sql,
      statement.params.map((v) => {
        // Core builds an array parameter only for a dialect with anyOf, and this one has none.
        if (Array.isArray(v)) throw new TypeError('sql.js store: an array parameter on a dialect without anyOf');
        return typeof v === 'bigint' ? Number(v) : (v as SqlJsValue);
      }),
    );
    return { rows, affected: this.totalChanges() - before };
  }

  private totalChanges(): number {
    return Number(this.db.exec('SELECT total_changes()')[0]!.values[0]![0]);
  }

  async describeTable(table: string): Promise<ColumnInfo[] | null> {
    const rows = this.rows('SELECT name, type, pk FROM pragma_table_info(?)', [table]);
    if (rows.length === 0) return null;
    // A lone INTEGER PRIMARY KEY is the rowid, which SQLite numbers itself.
    const rowid = rows.filter((r) => Number(r.pk) > 0).length === 1 ? rows.find((r) => Number(r.pk) > 0 && /^integer$/i.test(String(r.type))) : undefined;
    return rows.map((r) => ({ name: String(r.name), type: String(r.type).toLowerCase(), unique: Number(r.pk) > 0, integer: /INT/i.test(String(r.type)), maxLength: null, autoIncrement: r === rowid }));
  }

  orderTimeEncoding(column: ColumnInfo): OrderTimeEncoding {
    return /INT/i.test(column.type) ? 'epochMs' : 'text';
  }

  async close(): Promise<void> {
    this.closed = true;
    this.db.close();
  }
}

function asStoreError(error: unknown): StoreError {
  if (error instanceof StoreError) return error;
  return new StoreError('Unknown', error instanceof Error ? error.message : String(error), undefined, { cause: error });
}

/** A statusq-managed table with every optional column, as `statusq init` makes it on SQLite. */
export const JOBS_DDL = `CREATE TABLE jobs (
  id INTEGER PRIMARY KEY, status INTEGER, date INTEGER NOT NULL, claimed_at INTEGER, worker_id TEXT,
  attempt_count INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER, last_error TEXT, payload TEXT, result TEXT, finished_at INTEGER
)`;

/**
 * For a test file's top level: `withJobs(n)` opens a store on JOBS_DDL holding jobs 1..n (date = id), and the
 * store a test opened this way is closed after it.
 */
export function jobsStoreEachTest(): (count: number) => Promise<SqlJsStore> {
  let store: SqlJsStore | null = null;
  afterEach(async () => {
    await store?.close();
    store = null;
  });
  return async (count) => {
    const opened = await SqlJsStore.open(JOBS_DDL);
    store = opened;
    for (let i = 1; i <= count; i++) opened.db.run('INSERT INTO jobs (id, date) VALUES (?, ?)', [i, i]);
    return opened;
  };
}
