/*
 * Over 350 lines because the store and its pool's set-up share one state (the pool, its sockets, the
 * deadlines, the conflict counters) and the value conversions the driver needs (bindValue, text limits)
 * sit next to the calls that use them. The claim's SQL and reasoning live in mysql-claim-sql.ts.
 */
import { Socket } from 'node:net';
import mysql from 'mysql2/promise';
import type { Pool, PoolConnection, PoolOptions } from 'mysql2/promise';
import type { PoolConnection as CorePoolConnection } from 'mysql2';
import {
  ConfigError,
  DEFAULT_CAPABILITIES,
  StoreError,
  atStatement,
  deadlineOf,
  deadlineOption,
  endWithin,
  raceDeadline,
  splitTableName,
  validateTableName,
  type ClaimStrategy,
  type ColumnInfo,
  type ColumnLimit,
  type ExecResult,
  type NativeClaim,
  type ResolvedTable,
  type Row,
  type SchemaSupport,
  type SqlValue,
  type Statement,
  type StatementRunner,
  type Store,
  type StoreCallDeadlines,
  type StoreCapabilities,
} from '@statusq/core/adapter';
import { mysqlNativeClaim, mysqlClaimWritesQuery } from './mysql-claim-sql.js';
import { mysqlDialect, mysqlOrderTimeEncoding } from './mysql-dialect.js';
import { isConnectionLost, isDeadlock, isLockWaitTimeout, toStoreError } from './mysql-errors.js';
import { mysqlSchema } from './mysql-schema.js';

/** Isolation of every transaction statusq runs on its connections. */
export type MysqlIsolation = 'read-committed' | 'repeatable-read';

export interface MysqlStoreOptions {
  host?: string;
  port?: number;
  user?: string;
  password?: string;
  database?: string;
  /** Most connections this store opens (claims, settles, heartbeats and reaps each take one briefly). Default 4. */
  maxConnections?: number;
  /**
   * `native` (default): SELECT ... FOR UPDATE SKIP LOCKED then UPDATE by id in one transaction where the
   * server has SKIP LOCKED (MySQL >= 8.0.1, MariaDB >= 10.6), else the conditional update.
   * `conditional-update`: core's portable claim (SELECT, then one guarded UPDATE per candidate), whatever
   * the Worker's claimStrategy says.
   */
  claimStrategy?: ClaimStrategy;
  /**
   * Default `read-committed`: no gap locks, so concurrent skip-locked claims and settles cannot deadlock
   * on each other's gaps (see mysql-claim-sql.ts). `repeatable-read` exists to measure the difference.
   */
  isolation?: MysqlIsolation;
  /** innodb_lock_wait_timeout for statusq's sessions, in seconds. Default 10 (the server's is usually 50). */
  lockWaitTimeoutSeconds?: number;
  /** How long to wait for a new connection (TCP and the server's handshake), in ms. Default 10000. */
  connectTimeoutMs?: number;
  /**
   * Longest one call may wait for the database once it holds a connection: every statement of it, COMMIT
   * included, in ms. Past it the call rejects with ConnectionLost and the connection is destroyed, never reused
   * (an answer arriving late would be taken for the next call's). Default 30000.
   */
  queryTimeoutMs?: number;
  /** The same for a call that changes the schema (CREATE, ALTER, DROP: init, migrate), which may rebuild a big table. Default 600000. */
  schemaTimeoutMs?: number;
  /** Any other mysql2 pool options (ssl, socketPath, ...). statusq's own settings win where they overlap. */
  mysql2?: PoolOptions;
}

/** The server behind the store, as detected at connect. */
export interface MysqlServerInfo {
  /** VERSION() as the server reports it. */
  version: string;
  flavor: 'mysql' | 'mariadb';
  major: number;
  minor: number;
  patch: number;
  /** FOR UPDATE SKIP LOCKED: MySQL >= 8.0.1, MariaDB >= 10.6. */
  skipLocked: boolean;
}

/** Counters of the conflicts this store met, so tests and operators can see a deadlock storm. */
export interface MysqlStoreStats {
  /** 1213 ER_LOCK_DEADLOCK errors, in any operation. */
  deadlocks: number;
  /** 1205 ER_LOCK_WAIT_TIMEOUT errors. */
  lockWaitTimeouts: number;
  /** Connections dropped because they were found dead. */
  connectionsLost: number;
  /** Native claim transactions committed (`transaction` runs nothing else). */
  claims: number;
}

const DEFAULT_QUERY_TIMEOUT_MS = 30_000;
const DEFAULT_SCHEMA_TIMEOUT_MS = 600_000;
/** How long close() lets connections end politely before it cuts the sockets that have not. */
const CLOSE_GRACE_MS = 1000;
/** TCP keepalive probes start after this much silence, so a peer that vanished (host down, no RST) is noticed. */
const KEEPALIVE_DELAY_MS = 10_000;

/** mysql2's own formatting of a toISOString() value would be refused by DATETIME; see bindValue. */
const ISO_UTC = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d(?:\.\d{1,6})?)Z$/;

/**
 * Core turns a Date into `toISOString()` text (Queue.enqueue); DATETIME rejects the `T` and the `Z`
 * (MariaDB: error 1292). The session zone is UTC, so the same instant is `YYYY-MM-DD HH:MM:SS.sss`. Only a
 * string of exactly that shape is rewritten.
 */
export function bindValue(value: SqlValue): SqlValue {
  if (typeof value === 'string') {
    const m = ISO_UTC.exec(value);
    if (m) return `${m[1]} ${m[2]}`;
  }
  return value;
}

export function parseServerVersion(version: string): MysqlServerInfo {
  const flavor = /mariadb/i.test(version) ? 'mariadb' : 'mysql';
  const m = /(\d+)\.(\d+)\.(\d+)/.exec(version);
  const [major, minor, patch] = m ? [Number(m[1]), Number(m[2]), Number(m[3])] : [0, 0, 0];
  const atLeast = (a: number, b: number, c: number) => major > a || (major === a && (minor > b || (minor === b && patch >= c)));
  const skipLocked = flavor === 'mariadb' ? atLeast(10, 6, 0) : atLeast(8, 0, 1);
  return { version, flavor, major, minor, patch, skipLocked };
}

/**
 * A Store on a mysql2 connection pool. Every pooled connection runs with time_zone '+00:00' and (by
 * default) READ COMMITTED. `execute` runs one autocommit statement; `executeBatch` and the native claim
 * run BEGIN .. COMMIT on one connection. A connection found dead is destroyed (dropped from the pool), so
 * the call that met it rejects with ConnectionLost and the next call gets a fresh connection. Every call has a
 * deadline (connectTimeoutMs for a new connection, queryTimeoutMs for the rest), so a database that stops
 * answering without closing anything (a frozen network) fails calls instead of hanging them.
 */
export class MysqlStore implements Store {
  readonly dialect = mysqlDialect;
  readonly schema: SchemaSupport = mysqlSchema;
  readonly capabilities: StoreCapabilities;
  readonly stats: MysqlStoreStats = { deadlocks: 0, lockWaitTimeouts: 0, connectionsLost: 0, claims: 0 };
  /** The claim this store runs: `native` (SKIP LOCKED) or `conditional-update` (forced, or the server has no SKIP LOCKED). */
  readonly claimStrategy: ClaimStrategy;
  readonly nativeClaim: NativeClaim | undefined;
  private closed = false;
  private readonly knownClaimWrites = new Map<string, Promise<boolean>>();

  private constructor(
    private readonly pool: Pool,
    private readonly sockets: Set<Socket>,
    private readonly deadlines: StoreCallDeadlines,
    readonly server: MysqlServerInfo,
    strategy: ClaimStrategy,
  ) {
    this.claimStrategy = strategy === 'conditional-update' || !server.skipLocked ? 'conditional-update' : 'native';
    const native = this.claimStrategy === 'native';
    this.nativeClaim = native ? { ...mysqlNativeClaim, claimWritesAreKnown: (table) => this.claimWritesAreKnown(table) } : undefined;
    this.capabilities = { ...DEFAULT_CAPABILITIES, batchClaim: native, skipLocked: native, returning: false, listenNotify: false };
  }

  /** Opens the pool, checks the server is reachable and detects its flavor and version. */
  static async open(options: MysqlStoreOptions): Promise<MysqlStore> {
    const strategy = claimStrategyOption(options.claimStrategy);
    if ('connectionLimit' in options) throw new ConfigError('the MySQL option connectionLimit was renamed maxConnections');
    if ('deadlockRetries' in options) throw new ConfigError("the MySQL option deadlockRetries was removed: the store no longer retries, a deadlock reaches the worker's retry policy as WriteConflict");
    const isolation = options.isolation ?? 'read-committed';
    if (isolation !== 'read-committed' && isolation !== 'repeatable-read') {
      throw new ConfigError(`isolation must be read-committed or repeatable-read, got ${JSON.stringify(isolation)}`);
    }
    const maxConnections = options.maxConnections ?? 4;
    if (!Number.isSafeInteger(maxConnections) || maxConnections < 1) throw new ConfigError('maxConnections must be a positive integer');
    const lockWait = options.lockWaitTimeoutSeconds ?? 10;
    if (!Number.isSafeInteger(lockWait) || lockWait < 1) throw new ConfigError('lockWaitTimeoutSeconds must be a positive integer');
    const connectTimeout = deadlineOption(options.connectTimeoutMs, 10_000, 'connectTimeout');
    const deadlines: StoreCallDeadlines = {
      queryTimeoutMs: deadlineOption(options.queryTimeoutMs, DEFAULT_QUERY_TIMEOUT_MS, 'queryTimeout'),
      schemaTimeoutMs: deadlineOption(options.schemaTimeoutMs, DEFAULT_SCHEMA_TIMEOUT_MS, 'schemaTimeout'),
    };

    const pool = mysql.createPool({
      ...options.mysql2,
      ...(options.host !== undefined ? { host: options.host } : {}),
      ...(options.port !== undefined ? { port: options.port } : {}),
      ...(options.user !== undefined ? { user: options.user } : {}),
      ...(options.password !== undefined ? { password: options.password } : {}),
      ...(options.database !== undefined ? { database: options.database } : {}),
      connectionLimit: maxConnections,
      maxIdle: maxConnections,
      waitForConnections: true,
      connectTimeout,
      enableKeepAlive: true,
      keepAliveInitialDelay: KEEPALIVE_DELAY_MS,
      // Ids and counts come back as numbers when they fit a double, as decimal strings otherwise.
      supportBigNumbers: true,
      bigNumberStrings: false,
      // DATETIME values are UTC (the session zone below) and come back as Date objects of that instant.
      timezone: 'Z',
      dateStrings: false,
      charset: 'utf8mb4',
      multipleStatements: false,
    });
    const level = isolation === 'read-committed' ? 'READ COMMITTED' : 'REPEATABLE READ';
    const setup: string[] = [`SET time_zone = '+00:00', SESSION innodb_lock_wait_timeout = ${lockWait}`, `SET SESSION TRANSACTION ISOLATION LEVEL ${level}`];
    const errors: unknown[] = [];
    const sockets = new Set<Socket>();
    // Runs before any command a caller sends on a new connection: mysql2 queues commands per connection.
    pool.pool.on('connection', (connection: CorePoolConnection) => {
      const socket = socketOf(connection);
      if (socket) {
        sockets.add(socket);
        socket.once('close', () => sockets.delete(socket));
      }
      for (const sql of setup) {
        connection.query(sql, (error: unknown) => {
          if (!error) return;
          errors.push(error);
          // A session without UTC or the isolation level must not run statusq's SQL: drop it, so the
          // caller meets ConnectionLost and its retry gets a fresh connection.
          connection.destroy();
        });
      }
    });
    let version: string;
    try {
      const probeMs = connectTimeout + deadlines.queryTimeoutMs;
      const [rows] = await raceDeadline(pool.query('SELECT VERSION() AS version'), probeMs, () => deadlineError(probeMs));
      version = String((rows as Row[])[0]?.version ?? '');
    } catch (error) {
      await endPool(pool, sockets);
      throw toStoreError(error);
    }
    if (errors.length > 0) {
      await endPool(pool, sockets);
      throw toStoreError(errors[0]);
    }
    return new MysqlStore(pool, sockets, deadlines, parseServerVersion(version), strategy);
  }

  async execute(statement: Statement): Promise<ExecResult> {
    return this.withConnection((conn) => this.run(conn, statement), deadlineOf([statement], this.deadlines));
  }

  async executeBatch(statements: readonly Statement[]): Promise<ExecResult[]> {
    if (statements.length === 0) return [];
    let failing: number | undefined;
    try {
      return await this.withConnection(
        (conn) =>
          this.inTransaction(conn, async () => {
            const results: ExecResult[] = [];
            for (const [i, s] of statements.entries()) {
              failing = i;
              results.push(await this.run(conn, s));
            }
            failing = undefined;
            return results;
          }),
        deadlineOf(statements, this.deadlines),
      );
    } catch (error) {
      throw atStatement(error, failing);
    }
  }

  async describeTable(table: string): Promise<ColumnInfo[] | null> {
    const [schema, name] = splitTableName(validateTableName(table));
    const { rows } = await this.execute({
      sql:
        'SELECT c.COLUMN_NAME AS name, c.COLUMN_TYPE AS type, c.DATA_TYPE AS data_type, ' +
        'c.CHARACTER_MAXIMUM_LENGTH AS max_chars, c.CHARACTER_OCTET_LENGTH AS max_bytes, @@max_allowed_packet AS packet, ' +
        // Unique alone: a unique index (the primary key's included) whose only key part is this column. A
        // prefix of the column is enough: rows sharing the id would share the prefix too.
        'EXISTS (SELECT 1 FROM information_schema.STATISTICS s WHERE s.TABLE_SCHEMA = c.TABLE_SCHEMA AND s.TABLE_NAME = c.TABLE_NAME ' +
        'AND s.COLUMN_NAME = c.COLUMN_NAME AND s.NON_UNIQUE = 0 AND s.SEQ_IN_INDEX = 1 AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS o ' +
        'WHERE o.TABLE_SCHEMA = s.TABLE_SCHEMA AND o.TABLE_NAME = s.TABLE_NAME AND o.INDEX_NAME = s.INDEX_NAME AND o.SEQ_IN_INDEX = 2)) AS is_unique ' +
        'FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = COALESCE(?, DATABASE()) AND c.TABLE_NAME = ? ORDER BY c.ORDINAL_POSITION',
      params: [schema, name],
    });
    return rows.length === 0
      ? null
      : rows.map((r) => {
          const dataType = String(r.data_type).toLowerCase();
          return {
            name: String(r.name),
            type: String(r.type).toLowerCase(),
            unique: Number(r.is_unique) === 1,
            integer: MYSQL_INTEGER_TYPES.has(dataType),
            maxLength: mysqlTextLimit(dataType, r.max_chars, r.max_bytes, r.packet),
          };
        });
  }

  orderTimeEncoding(column: ColumnInfo) {
    return mysqlOrderTimeEncoding(column.type);
  }

  /** NativeClaim.claimWritesAreKnown (see mysqlClaimWritesQuery), asked once per table and store. */
  private claimWritesAreKnown(table: ResolvedTable): Promise<boolean> {
    const key = `${table.table}\u0000${table.status}\u0000${table.columns.claimedAt ?? ''}`;
    let known = this.knownClaimWrites.get(key);
    if (!known) {
      known = this.execute(mysqlClaimWritesQuery(table)).then(({ rows }) => Number(rows[0]?.surprises) === 0);
      // A failed look is asked again next time rather than remembered.
      known.catch(() => this.knownClaimWrites.delete(key));
      this.knownClaimWrites.set(key, known);
    }
    return known;
  }

  /** START TRANSACTION, `body`, COMMIT on one pooled connection, within the query deadline (the native claim's). */
  async transaction<T>(body: (tx: StatementRunner) => Promise<T>): Promise<T> {
    const result = await this.withConnection((conn) => this.inTransaction(conn, () => body({ execute: (statement) => this.run(conn, statement) })));
    this.stats.claims++;
    return result;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await endPool(this.pool, this.sockets);
  }

  /** Runs `body` on a pooled connection, within `deadlineMs` of getting it (see MysqlStoreOptions.queryTimeoutMs). */
  private async withConnection<T>(body: (conn: PoolConnection) => Promise<T>, deadlineMs = this.deadlines.queryTimeoutMs): Promise<T> {
    if (this.closed) throw new StoreError('ConnectionLost', 'the MySQL store is closed', 'CLOSED');
    let conn: PoolConnection;
    try {
      conn = await this.pool.getConnection();
    } catch (error) {
      throw this.fail(error);
    }
    let handedBack = false;
    const handBack = (lost: boolean) => {
      if (handedBack) return;
      handedBack = true;
      if (lost) {
        this.stats.connectionsLost++;
        conn.destroy();
      } else conn.release();
    };
    const call = (async () => {
      try {
        const result = await body(conn);
        handBack(false);
        return result;
      } catch (error) {
        handBack(isConnectionLost(error));
        throw this.fail(error);
      }
    })();
    return raceDeadline(call, deadlineMs, () => {
      // What was sent may still be answered; that answer must never reach another call. destroy() alone only
      // half-closes the socket, which a frozen network keeps open.
      handBack(true);
      socketOf(conn.connection)?.destroy();
      return deadlineError(deadlineMs);
    });
  }

  /** BEGIN .. COMMIT around `body`; any failure rolls back (unless the connection is gone) and rethrows. */
  private async inTransaction<T>(conn: PoolConnection, body: () => Promise<T>): Promise<T> {
    await conn.query('START TRANSACTION');
    try {
      const result = await body();
      await conn.query('COMMIT');
      return result;
    } catch (error) {
      if (!isConnectionLost(error)) {
        try {
          await conn.query('ROLLBACK');
        } catch {
          // The original error says more; a connection that cannot roll back is dropped by its error.
        }
      }
      throw error;
    }
  }

  private async run(conn: PoolConnection, statement: Statement): Promise<ExecResult> {
    const [result] = await conn.query({ sql: statement.sql, values: statement.params.map(bindValue) });
    if (Array.isArray(result)) return { rows: result as Row[], affected: 0 };
    // With mysql2's default FOUND_ROWS flag, affectedRows counts matched rows: an UPDATE whose guard
    // matched reports 1 even when it wrote the same values (a heartbeat in the same millisecond).
    return { rows: [], affected: Number((result as { affectedRows?: number }).affectedRows ?? 0) };
  }

  private fail(error: unknown): unknown {
    if (isDeadlock(error)) this.stats.deadlocks++;
    else if (isLockWaitTimeout(error)) this.stats.lockWaitTimeouts++;
    if (this.closed && !(error instanceof StoreError)) return new StoreError('ConnectionLost', 'the MySQL store is closed', 'CLOSED', { cause: error });
    return toStoreError(error);
  }
}

const MYSQL_INTEGER_TYPES = new Set(['tinyint', 'smallint', 'mediumint', 'int', 'bigint']);

/** Room in a packet for the rest of a settle statement around the value (table, column names, token). */
const STATEMENT_OVERHEAD_BYTES = 4096;

/**
 * How much text a column takes in one statement: VARCHAR(n)/CHAR(n) count characters, the TEXT/BLOB types
 * bytes. mysql2 sends values inside the statement text, escaped (a quote or backslash doubles), and the
 * server refuses a statement longer than max_allowed_packet and drops the connection, so whatever the type,
 * a value of up to half the packet (less the statement around it) is all one statement is sure to carry.
 */
export function mysqlTextLimit(dataType: string, maxChars: unknown, maxBytes: unknown, packet: unknown): ColumnLimit | null {
  const isText = maxBytes !== null && maxBytes !== undefined;
  if (!isText && dataType !== 'json') return null;
  const statementBytes = Math.max(0, Math.floor((Number(packet) - STATEMENT_OVERHEAD_BYTES) / 2));
  if (dataType === 'char' || dataType === 'varchar') return { chars: Number(maxChars), bytes: statementBytes };
  return { bytes: isText ? Math.min(Number(maxBytes), statementBytes) : statementBytes };
}

function deadlineError(ms: number): StoreError {
  return new StoreError('ConnectionLost', `MySQL did not answer within ${ms} ms (queryTimeout); the connection was dropped`, 'QUERY_TIMEOUT');
}

/** mysql2 keeps a connection's socket on `stream`, which its typings do not declare. */
function socketOf(connection: unknown): Socket | undefined {
  const stream = (connection as { stream?: unknown }).stream;
  return stream instanceof Socket ? stream : undefined;
}

/** Ends the pool politely (COM_QUIT on each connection; the sockets close when the server answers), bounded. */
function endPool(pool: Pool, sockets: Set<Socket>): Promise<void> {
  return endWithin(pool.end(), sockets, CLOSE_GRACE_MS);
}

/** The store's claimStrategy: `native` unless `conditional-update` is asked for; the old names are refused, naming the new one. */
function claimStrategyOption(value: unknown): ClaimStrategy {
  if (value === undefined || value === 'native' || value === 'conditional-update') return value ?? 'native';
  if (value === 'auto' || value === 'skip-locked') throw new ConfigError(`claimStrategy ${value} was renamed native (SKIP LOCKED where the server has it, else conditional-update)`);
  throw new ConfigError(`claimStrategy must be native or conditional-update, got ${JSON.stringify(value)}`);
}
