import Database from 'better-sqlite3';
import {
  ConfigError,
  DEFAULT_CAPABILITIES,
  StoreError,
  TransitionSql,
  atStatement,
  candidateStatements,
  mergeCandidates,
  orderLike,
  sortByQueueOrder,
  splitTableName,
  validateTableName,
  type ClaimRequest,
  type ClaimResult,
  type ColumnInfo,
  type ExecResult,
  type JobId,
  type ResolvedTable,
  type Row,
  type SchemaSupport,
  type Statement,
  type Store,
  type StoreCapabilities,
} from '@statusq/core/adapter';
import { sqliteClaimStatement } from './sqlite-claim-sql.js';
import { sqliteDialect, sqliteHoldsIntegers, sqliteOrderTimeEncoding } from './sqlite-dialect.js';
import { toStoreError } from './sqlite-errors.js';
import { sqliteSchema } from './sqlite-schema.js';

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

/** Prepared statements kept per connection; claims and settles reuse a handful of SQL texts. */
const STATEMENT_CACHE_SIZE = 256;

/**
 * A Store on one better-sqlite3 connection. Every transaction runs synchronously from BEGIN IMMEDIATE to
 * COMMIT inside one call, so connections in the same process never interleave and never wait on each
 * other; connections in other processes wait up to the busy timeout. WAL lets readers run beside the
 * single writer.
 */
export class SqliteStore implements Store {
  readonly dialect = sqliteDialect;
  readonly schema: SchemaSupport = sqliteSchema;
  readonly capabilities: StoreCapabilities = { ...DEFAULT_CAPABILITIES, batchClaim: true, skipLocked: true, returning: true };
  private readonly db: Database.Database;
  private readonly cache = new Map<string, Database.Statement>();

  constructor(options: SqliteStoreOptions) {
    if (!options || typeof options.filename !== 'string' || options.filename.length === 0) {
      throw new ConfigError('SQLite store needs a filename');
    }
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
  }

  async execute(statement: Statement): Promise<ExecResult> {
    return this.guard(() => this.run(statement));
  }

  async executeBatch(statements: readonly Statement[]): Promise<ExecResult[]> {
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

  async describeTable(table: string): Promise<ColumnInfo[] | null> {
    const [schema, name] = splitTableName(validateTableName(table));
    // The table-valued pragmas take names as parameters, so index names reach no SQL text.
    const rows = await this.guard(
      () =>
        this.db
          .prepare(
            `SELECT ti.name AS name, ti.type AS type, ti.pk AS pk, EXISTS (SELECT 1 FROM pragma_index_list(@name, @schema) il ` +
              `WHERE il."unique" AND NOT il.partial AND (SELECT COUNT(*) FROM pragma_index_info(il.name, @schema)) = 1 ` +
              `AND (SELECT ii.name FROM pragma_index_info(il.name, @schema) ii) = ti.name COLLATE NOCASE) AS uniq ` +
              `FROM pragma_table_info(@name, @schema) ti ORDER BY ti.cid`,
          )
          .all({ name, schema }) as Array<{ name: string; type: string; pk: number; uniq: number }>,
    );
    if (rows.length === 0) return null;
    // A lone INTEGER PRIMARY KEY is the rowid and has no index of its own; a wider key makes no column unique.
    const keyColumns = rows.filter((r) => r.pk > 0).length;
    return rows.map((r) => ({
      name: r.name,
      type: r.type.toLowerCase(),
      unique: r.uniq === 1 || (r.pk > 0 && keyColumns === 1),
      integer: sqliteHoldsIntegers(r.type),
      // SQLite does not enforce a declared length: VARCHAR(10) holds any text.
      maxLength: null,
    }));
  }

  orderTimeEncoding(column: ColumnInfo) {
    return sqliteOrderTimeEncoding(column.type);
  }

  async claim(table: ResolvedTable, request: ClaimRequest): Promise<ClaimResult> {
    const sql = new TransitionSql(table, this.dialect);
    const aging = request.agingMs !== undefined && table.direction === 'newest';
    const rows = await this.guard(() =>
      this.db
        .transaction(() => (aging ? this.claimWithAging(sql, request) : sortByQueueOrder(this.run(sqliteClaimStatement(sql, request)).rows, table)))
        .immediate(),
    );
    return { rows, lost: 0 };
  }

  private claimWithAging(sql: TransitionSql, request: ClaimRequest): Row[] {
    const lists: Row[][] = [];
    for (const statement of candidateStatements(sql, request, 'id')) {
      lists.push(this.run(statement).rows);
      if (lists.flat().length >= request.limit) break;
    }
    const candidates = mergeCandidates(lists, request.limit, sql.table.id);
    if (candidates.length === 0) return [];
    const claimed = this.run(sql.claimByIds(candidates.map((r) => r[sql.table.id] as JobId), request.token, true)).rows;
    return orderLike(candidates, claimed, sql.table);
  }

  async close(): Promise<void> {
    this.cache.clear();
    if (this.db.open) this.db.close();
  }

  /** Runs one statement synchronously; RETURNING statements report their rows as affected. */
  private run(statement: Statement): ExecResult {
    let prepared = this.cache.get(statement.sql);
    if (!prepared) {
      prepared = this.db.prepare(statement.sql);
      if (this.cache.size >= STATEMENT_CACHE_SIZE) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(statement.sql, prepared);
    }
    if (prepared.reader) {
      const rows = prepared.all(...statement.params) as Row[];
      return { rows, affected: rows.length };
    }
    return { rows: [], affected: prepared.run(...statement.params).changes };
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
