import { resolve } from 'node:path';
import Database from 'better-sqlite3';
import {
  ConfigError,
  ConnectionGate,
  DEFAULT_CAPABILITIES,
  StoreError,
  atStatement,
  integerRangeOfBits,
  splitTableName,
  validateTableName,
  type ColumnInfo,
  type ExecResult,
  type NativeClaim,
  type CallerRunner,
  type SchemaSupport,
  type Statement,
  type StatementRunner,
  type Store,
  type StoreCapabilities,
  type StoreInspection,
  type LentTransaction,
} from '@statusq/core/adapter';
import { sqliteRunnerFor } from './sqlite-caller-transaction.js';
import { sqliteNativeClaim } from './sqlite-claim-sql.js';
import { sqliteDialect, sqliteHoldsIntegers, sqliteOrderTimeEncoding } from './sqlite-dialect.js';
import { sqliteInspection } from './sqlite-doctor.js';
import { toStoreError } from './sqlite-errors.js';
import { sqliteSchema } from './sqlite-schema.js';
import { cacheable, runCached, type CachedSqlite } from './sqlite-statements.js';
import { SqliteWakeUps } from './sqlite-wake-ups.js';

export interface SqliteStoreOptions {
  /** Path of the database file, or `:memory:`. */
  filename: string;
  /** Fail instead of creating the file when it does not exist. Default false. */
  fileMustExist?: boolean;
  /**
   * How long a write waits for another process's write lock before SQLITE_BUSY (mapped to a Busy
   * StoreError that the worker retries). Default 5000 ms.
   */
  busyTimeoutMs?: number;
}

const BEGIN_IMMEDIATE: Statement = { sql: 'BEGIN IMMEDIATE', params: [] };
const COMMIT: Statement = { sql: 'COMMIT', params: [] };

/**
 * One gate per database file for every store of this process. better-sqlite3 is synchronous: a store that waits
 * for the write lock another store of this process holds across an await (`transaction`) busy-waits on the one
 * thread, so the holder can never reach its COMMIT and the waiter fails after the busy timeout (8 workers on
 * their own stores over a table with a claims table: 20 s and "database is locked" for 500 jobs, 0.2 s without).
 * Sharing the gate makes them wait their turn instead, which costs nothing: two calls of one process never ran at
 * once anyway. Stores in other processes still wait out each other's writes with the busy timeout.
 */
const GATES = new Map<string, ConnectionGate>();

function gateOf(filename: string): ConnectionGate {
  if (filename === ':memory:') return new ConnectionGate();
  const key = resolve(filename);
  let gate = GATES.get(key);
  if (!gate) GATES.set(key, (gate = new ConnectionGate()));
  return gate;
}

/** Prepared statements kept per connection; claims and settles reuse a handful of SQL texts. */
const STATEMENT_CACHE_SIZE = 256;

/**
 * A Store on one better-sqlite3 connection. `execute` and `executeBatch` run synchronously from BEGIN
 * IMMEDIATE to COMMIT inside one call; `transaction` (the aging claim's, and every move of a table with a claims
 * table) awaits between its statements, so the gate holds every other call of the stores of this process on the
 * same file back until it ends (see GATES). Connections in other processes wait up to the busy timeout. WAL lets
 * readers run beside the single writer.
 */
export class SqliteStore implements Store {
  readonly dialect = sqliteDialect;
  readonly schema: SchemaSupport = sqliteSchema;
  readonly capabilities: StoreCapabilities;
  readonly nativeClaim: NativeClaim;
  readonly inspection: StoreInspection = sqliteInspection(this);
  private readonly db: Database.Database;
  private readonly cache = new Map<string, CachedSqlite>();
  private schemaVersionStatement: Database.Statement | null = null;
  /** PRAGMA schema_version, prepared once (see CachedSqlite). */
  private readonly schemaVersion = (): number => {
    this.schemaVersionStatement ??= this.db.prepare('PRAGMA schema_version').pluck();
    return this.schemaVersionStatement.get() as number;
  };
  private readonly gate: ConnectionGate;
  /** Watches the database file for other connections' commits; null for `:memory:`, which no one else writes. */
  private readonly wakeUps: SqliteWakeUps | null;

  constructor(options: SqliteStoreOptions) {
    if (!options || typeof options.filename !== 'string' || options.filename.length === 0) {
      throw new ConfigError('SQLite store needs a filename');
    }
    this.gate = gateOf(options.filename);
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    if (!Number.isSafeInteger(busyTimeoutMs) || busyTimeoutMs < 0) throw new ConfigError('busyTimeoutMs must be a non-negative integer');
    try {
      this.db = new Database(options.filename, { fileMustExist: options.fileMustExist ?? false, timeout: busyTimeoutMs });
      if (options.filename !== ':memory:') this.db.pragma('journal_mode = WAL');
      // NORMAL is durable in WAL mode against application crashes; only a power loss can drop the last commits.
      this.db.pragma('synchronous = NORMAL');
      this.db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    } catch (error) {
      if (/SQLITE_CANTOPEN|does not exist/i.test(String((error as { code?: string }).code ?? '') + String(error))) {
        throw new ConfigError(`cannot open SQLite database ${JSON.stringify(options.filename)}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
      }
      throw toStoreError(error);
    }
    this.wakeUps = options.filename === ':memory:' ? null : new SqliteWakeUps(options.filename);
    this.capabilities = { ...DEFAULT_CAPABILITIES, batchClaim: true, skipLocked: true, returning: true, insertReturning: true, insertOnConflictDoNothing: true, listenNotify: this.wakeUps !== null };
    const wakeUps = this.wakeUps;
    this.nativeClaim = wakeUps ? { ...sqliteNativeClaim, beforeClaim: () => wakeUps.claimStarts() } : sqliteNativeClaim;
    // A :memory: database is polled: no waitForWork at all.
    if (!wakeUps) {
      (this as { waitForWork?: unknown }).waitForWork = undefined;
      (this as { waitForChange?: unknown }).waitForChange = undefined;
    }
  }

  /**
   * Resolves when the database file changed (another connection committed; see SqliteWakeUps), after
   * `timeoutMs`, or at once when `signal` aborts.
   */
  waitForWork(timeoutMs: number, signal: AbortSignal): Promise<void> {
    return this.wakeUps ? this.wakeUps.wait(timeoutMs, signal) : Promise.resolve();
  }

  /**
   * Resolves when the database file changed (any commit, a settle included), after `timeoutMs`, or at once when
   * `signal` aborts (Queue.waitFor). A change names no row: null, every awaited row is read again.
   */
  async waitForChange(timeoutMs: number, signal: AbortSignal): Promise<null> {
    if (this.wakeUps) await this.wakeUps.waitForChange(timeoutMs, signal);
    return null;
  }

  /** Whether the database's directory is watched yet (a commit before that is heard only by polling). */
  get watchingForWork(): boolean {
    return this.wakeUps?.watching ?? false;
  }

  execute(statement: Statement): Promise<ExecResult> {
    return this.gate.call(() => this.guard(() => this.run(statement)));
  }

  executeBatch(statements: readonly Statement[]): Promise<ExecResult[]> {
    return this.gate.call(() => this.runBatch(statements));
  }

  /**
   * BEGIN IMMEDIATE takes the write lock first, so the statements read what they write with no other writer
   * in between, in this process or another; the gate keeps this store's other calls out until COMMIT.
   */
  transaction<T>(body: (tx: StatementRunner) => Promise<T>): Promise<T> {
    // The lent transaction with core's runner alone; what fails inside is mapped, as core's body raises only store errors.
    return this.lendTransaction((tx) => body(tx.runner)).catch((error: unknown) => Promise.reject(toStoreError(error)));
  }

  /**
   * A transaction lent to a handler (ctx.transaction): the handle is this store's better-sqlite3 `Database`, for
   * `db.prepare(...).run(...)`, inside BEGIN IMMEDIATE. It holds the database's write lock, and this process's
   * other calls of the database wait (the gate), until COMMIT: keep the callback short. A body's own error is
   * rethrown as it was thrown (`transaction` maps them).
   */
  lendTransaction<T>(body: (tx: LentTransaction) => Promise<T>): Promise<T> {
    return this.gate.hold(async () => {
      this.guard(() => this.run(BEGIN_IMMEDIATE));
      const runner = {
        execute: async (statement: Statement) => {
          // The application's own COMMIT or ROLLBACK on the handle would make this statement commit on its own.
          if (this.db.open && !this.db.inTransaction) throw new StoreError('Unknown', 'the lent transaction was ended by the application (a COMMIT or ROLLBACK on the handle); nothing of it is settled', 'LENT_TRANSACTION_ENDED');
          return this.guard(() => this.run(statement));
        },
      };
      try {
        const result = await body({ handle: this.db, runner });
        this.guard(() => this.run(COMMIT));
        return result;
      } catch (error) {
        if (this.db.open && this.db.inTransaction) this.db.exec('ROLLBACK');
        throw error;
      }
    });
  }

  private runBatch(statements: readonly Statement[]): ExecResult[] {
    let failing: number | undefined;
    try {
      return this.guard(() =>
        this.db
          .transaction(() => {
            const results: ExecResult[] = [];
            for (const [i, s] of statements.entries()) {
              failing = i;
              results.push(this.run(s));
            }
            failing = undefined;
            return results;
          })
          .immediate(),
      );
    } catch (error) {
      throw atStatement(error, failing);
    }
  }

  /** A knex transaction or a better-sqlite3 Database in a transaction, the application's own (see sqliteRunnerFor). */
  runnerFor(handle: unknown): CallerRunner {
    return sqliteRunnerFor(handle);
  }

  async describeTable(table: string): Promise<ColumnInfo[] | null> {
    const [schema, name] = splitTableName(validateTableName(table));
    // The table-valued pragmas take names as parameters, so index names reach no SQL text.
    const rows = await this.guard(
      () =>
        this.db
          .prepare(
            `SELECT ti.name AS name, ti.type AS type, ti.pk AS pk, (ti.dflt_value IS NOT NULL AND upper(ti.dflt_value) <> 'NULL') AS has_default, EXISTS (SELECT 1 FROM pragma_index_list(@name, @schema) il ` +
              `WHERE il."unique" AND NOT il.partial AND (SELECT COUNT(*) FROM pragma_index_info(il.name, @schema)) = 1 ` +
              `AND (SELECT ii.name FROM pragma_index_info(il.name, @schema) ii) = ti.name COLLATE NOCASE) AS uniq ` +
              // table_xinfo, not table_info: generated columns (hidden 2 virtual, 3 stored) are columns a queue may
              // read, a group column computed from a URL among them; hidden 1 is a virtual table's own, never one.
              `FROM pragma_table_xinfo(@name, @schema) ti WHERE ti.hidden IN (0, 2, 3) ORDER BY ti.cid`,
          )
          .all({ name, schema }) as Array<{ name: string; type: string; pk: number; has_default: number; uniq: number }>,
    );
    if (rows.length === 0) return null;
    // A lone INTEGER PRIMARY KEY is the rowid and has no index of its own; a wider key makes no column unique.
    const keyColumns = rows.filter((r) => r.pk > 0).length;
    return rows.map((r) => ({
      name: r.name,
      type: r.type.toLowerCase(),
      unique: r.uniq === 1 || (r.pk > 0 && keyColumns === 1),
      integer: sqliteHoldsIntegers(r.type),
      // Whatever its declared width, an integer column holds SQLite's 64-bit integers (a larger number is a REAL).
      ...(sqliteHoldsIntegers(r.type) && { integerRange: integerRangeOfBits(64) }),
      // SQLite does not enforce a declared length: VARCHAR(10) holds any text.
      maxLength: null,
      // A lone column declared exactly INTEGER PRIMARY KEY is the rowid: SQLite numbers it.
      filledOnInsert: r.has_default === 1 || (r.pk > 0 && keyColumns === 1 && r.type.toUpperCase() === 'INTEGER'),
    }));
  }

  orderTimeEncoding(column: ColumnInfo) {
    return sqliteOrderTimeEncoding(column.type);
  }

  async close(): Promise<void> {
    this.wakeUps?.close();
    this.cache.clear();
    if (this.db.open) this.db.close();
  }

  /** Runs one statement synchronously (see runCached). */
  private run(statement: Statement): ExecResult {
    let cached = this.cache.get(statement.sql);
    if (!cached) {
      cached = cacheable(this.db.prepare(statement.sql), this.schemaVersion);
      if (this.cache.size >= STATEMENT_CACHE_SIZE) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(statement.sql, cached);
    }
    return runCached(cached, statement.params, this.schemaVersion);
  }

  private guard<T>(operation: () => T): T {
    if (!this.db.open) throw new StoreError('ConnectionLost', 'the SQLite store is closed', 'CLOSED');
    try {
      return operation();
    } catch (error) {
      throw toStoreError(error);
    }
  }
}

