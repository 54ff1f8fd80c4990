import type { Socket } from 'node:net';
import type { Connection, Pool, PoolConnection } from 'mysql2/promise';
import {
  ConfigError,
  DEFAULT_CAPABILITIES,
  SERVER_CONNECTION,
  StoreError,
  atStatement,
  emitStoreWarning,
  deadlineOf,
  fitsStatementLimit,
  inTransaction,
  raceDeadline,
  runInOrder,
  sleep,
  statementTooLarge,
  withPooledConnection,
  type PooledConnectionOps,
  type ClaimStrategy,
  type CallerRunner,
  type ClaimIdsOnServer,
  type ColumnInfo,
  type ExecResult,
  type NativeClaim,
  type ResolvedTable,
  type SchemaSupport,
  type Statement,
  type StatementLimit,
  type StatementRunner,
  type Store,
  type StoreCallDeadlines,
  type StoreCapabilities,
  type StoreInspection,
  type StoreWarning,
  lendPooledConnection,
  type LendingOps,
  type LentTransaction,
} from '@statusq/core/adapter';
import { mysqlRunnerFor } from './mysql-caller-transaction.js';
import { bindValue, mysqlExecResult } from './mysql-results.js';
import { describeMysqlTable } from './mysql-catalog.js';
import type { MysqlBinlogPlan } from './mysql-binlog.js';
import { mysqlClaimIdsOnServer, mysqlClaimWritesQuery, mysqlIdTypeQuery, mysqlNativeClaim } from './mysql-claim-sql.js';
import { mysqlDialect, mysqlOrderTimeEncoding } from './mysql-dialect.js';
import { mysqlInspection } from './mysql-doctor.js';
import { isConnectionLost, isDeadlock, isLockWaitTimeout, isReadOnlyRefusal, toStoreError } from './mysql-errors.js';
import { DEFAULT_IDLE_PROBE_MS, MysqlIdleProbe, idleProbeSetup } from './mysql-idle-probe.js';
import { claimGateOption, claimStrategyOption, idleProbeOption, type MysqlStoreOptions } from './mysql-options.js';
import { DEFAULT_CLAIM_GATE_WIDTH, MysqlClaimGate, probeClaimGate, type ClaimGateStats } from './mysql-claim-gate.js';
import { pipelinedTransaction, probePipeline } from './mysql-pipeline.js';
import { deadlineError, endPool, mysqlStatementLimit, openMysqlPool, socketOf, type MysqlServerInfo, type MysqlServerSettings } from './mysql-pool.js';
import { mysqlSchema } from './mysql-schema.js';

/** Counters of the conflicts this store met, so tests and operators can see a deadlock storm. */
export interface MysqlStoreStats extends ClaimGateStats {
  /** 1213 ER_LOCK_DEADLOCK errors, in any operation. */
  deadlocks: number;
  /** 1205 ER_LOCK_WAIT_TIMEOUT errors. */
  lockWaitTimeouts: number;
  /** Connections dropped because they were found dead. */
  connectionsLost: number;
  /** Native claim transactions committed (`transaction` runs nothing else). */
  claims: number;
  /** Rounds of the idle probe the server answered (see mysql-idle-probe.ts). */
  idleProbes: number;
  /** Rounds of the idle probe that failed (each drops the probe's connection; the next wait opens another). */
  idleProbeFailures: number;
}

/**
 * A Store on a mysql2 connection pool, opened and its sessions set up by mysql-pool.ts. `execute` runs one
 * autocommit statement; `executeBatch` and the native claim run BEGIN .. COMMIT on one connection. A connection found dead is destroyed (dropped from the pool), so
 * the call that met it rejects with ConnectionLost and the next call gets a fresh connection. Every call has a
 * deadline (connectTimeoutMs for a new connection, queryTimeoutMs for the rest), so a database that stops
 * answering without closing anything (a frozen network) fails calls instead of hanging them.
 */
export class MysqlStore implements Store {
  readonly dialect = mysqlDialect;
  readonly schema: SchemaSupport = mysqlSchema;
  readonly capabilities: StoreCapabilities;
  readonly stats: MysqlStoreStats = { deadlocks: 0, lockWaitTimeouts: 0, connectionsLost: 0, claims: 0, idleProbes: 0, idleProbeFailures: 0, claimGateTimeouts: 0 };
  /**
   * The claim this store runs: `native` (SKIP LOCKED) or `conditional-update` (forced, the server has no SKIP
   * LOCKED, or it logs by statement and this account may not switch to ROW: `binlog.fallback`).
   */
  readonly claimStrategy: ClaimStrategy;
  readonly nativeClaim: NativeClaim | undefined;
  readonly inspection: StoreInspection;
  /** The native claim's gate (mysql-claim-gate.ts): how many claims of a table run at once, and whether it is on. */
  readonly claimGate: MysqlClaimGate;
  /**
   * Why the native claim's transaction sends one statement per round trip (multi-statement packets turned
   * off, refused by the server or a proxy at open, a Galera node, or a store without the native claim), or
   * null: it sends them in one or two (mysql-pipeline.ts, mysqlClaimIdsOnServer).
   */
  pipelineRefusal: string | null = 'not probed';
  /** One statement's bound, from max_allowed_packet (see mysqlStatementLimit). */
  readonly statementLimit: StatementLimit;
  private closed = false;
  private readonly idleProbe: MysqlIdleProbe | null;
  /** The idle probe's pace, which waitFor's reads keep too (waitForChange). */
  private readonly probeMs: number;
  private readonly knownClaimWrites = new Map<string, Promise<boolean>>();
  private readonly knownIdsOnServer = new Map<string, Promise<ClaimIdsOnServer | null>>();

  private constructor(
    private readonly pool: Pool,
    private readonly sockets: Set<Socket>,
    private readonly deadlines: StoreCallDeadlines,
    readonly server: MysqlServerInfo,
    /** The server's settings as read at open (binlog, read_only, max_allowed_packet, ...). */
    readonly settings: MysqlServerSettings,
    /** How statusq's writes reach the binary log, and the isolation its sessions run at (mysql-binlog.ts). */
    readonly binlog: MysqlBinlogPlan,
    strategy: ClaimStrategy,
    openConnection: (extraSetup?: readonly string[]) => Promise<Connection>,
    idleProbeMs: number,
    claimGateWidth: number,
    warn: (warning: StoreWarning) => void,
  ) {
    // Null when idleProbeMs is 0: idle workers poll with claims.
    const idleProbe = idleProbeMs > 0 ? new MysqlIdleProbe(() => openConnection(idleProbeSetup(server)), idleProbeMs, deadlines.queryTimeoutMs, this.stats, (threadId) => this.killThread(threadId)) : null;
    this.idleProbe = idleProbe;
    this.probeMs = idleProbeMs;
    this.claimStrategy = strategy === 'conditional-update' || !server.skipLocked || binlog.fallback ? 'conditional-update' : 'native';
    const native = this.claimStrategy === 'native';
    const gate = new MysqlClaimGate(claimGateWidth, this.stats, warn);
    this.claimGate = gate;
    this.nativeClaim = native
      ? {
          ...mysqlNativeClaim,
          claimWritesAreKnown: (table) => this.claimWritesAreKnown(table),
          idsOnServer: (table) => this.claimIdsOnServer(table),
          admit: (table, tx, claim) => gate.admit(table, tx, claim),
        }
      : undefined;
    // groupedResults: a batch of statements costs MySQL a round trip each (no pipelining), so completions with results share one UPDATE.
    this.capabilities = { ...DEFAULT_CAPABILITIES, batchClaim: native, skipLocked: native, returning: false, listenNotify: false, idleProbe: idleProbe !== null, groupedResults: true };
    // Without the probe the worker polls and waitFor backs off: no waitForWork or waitForChange at all.
    if (idleProbe === null) {
      (this as { waitForWork?: unknown }).waitForWork = undefined;
      (this as { waitForChange?: unknown }).waitForChange = undefined;
    }
    this.inspection = mysqlInspection(this, server, settings, binlog, native ? gate : undefined, native ? this : undefined);
    this.statementLimit = mysqlStatementLimit(settings.maxAllowedPacket);
  }

  /** Opens the pool, checks the server is reachable and detects its flavor and version. */
  static async open(options: MysqlStoreOptions): Promise<MysqlStore> {
    const strategy = claimStrategyOption(options.claimStrategy);
    if ('connectionLimit' in options) throw new ConfigError('the MySQL option connectionLimit was renamed maxConnections');
    if ('deadlockRetries' in options) throw new ConfigError("the MySQL option deadlockRetries was removed: the store no longer retries, a deadlock reaches the worker's retry policy as WriteConflict");
    const idleProbeMs = idleProbeOption(options.idleProbeMs, DEFAULT_IDLE_PROBE_MS);
    const claimGateWidth = claimGateOption(options.claimGate, DEFAULT_CLAIM_GATE_WIDTH);
    if (options.onWarning !== undefined && typeof options.onWarning !== 'function') throw new ConfigError('MySQL store: onWarning must be a function');
    const { pool, sockets, deadlines, server, settings, binlog, openConnection } = await openMysqlPool({ ...options, claimStrategy: strategy });
    const warn = options.onWarning ?? emitStoreWarning;
    const store = new MysqlStore(pool, sockets, deadlines, server, settings, binlog, strategy, openConnection, idleProbeMs, claimGateWidth, warn);
    try {
      if (store.nativeClaim) {
        await probeClaimGate(store.claimGate, (sql) => store.execute({ sql, params: [] }));
        await store.probePipeline(options.mysql2?.multipleStatements === false, warn);
      }
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  async execute(statement: Statement): Promise<ExecResult> {
    return this.withConnection((conn) => this.run(conn, statement), deadlineOf([statement], this.deadlines));
  }

  async executeBatch(statements: readonly Statement[]): Promise<ExecResult[]> {
    if (statements.length === 0) return [];
    const position: { failing?: number | undefined } = {};
    try {
      return await this.withConnection(
        (conn) => this.inTransaction(conn, () => runInOrder(statements, (s) => this.run(conn, s), position)),
        deadlineOf(statements, this.deadlines),
      );
    } catch (error) {
      throw atStatement(error, position.failing);
    }
  }

  /** A knex transaction or a mysql2 connection in a transaction, the application's own (see mysqlRunnerFor). */
  runnerFor(handle: unknown): CallerRunner {
    return mysqlRunnerFor(handle);
  }

  describeTable(table: string): Promise<ColumnInfo[] | null> {
    return describeMysqlTable(this, table);
  }

  orderTimeEncoding(column: ColumnInfo) {
    return mysqlOrderTimeEncoding(column.type);
  }

  /** Asks once, at open, whether the claim may send multi-statement packets (probePipeline); warns once of a refusal. */
  private async probePipeline(turnedOff: boolean, warn: (warning: StoreWarning) => void): Promise<void> {
    if (turnedOff) {
      this.pipelineRefusal = 'turned off: mysql2 multipleStatements false';
      return;
    }
    const probe = await this.withConnection((conn) => probePipeline(conn, isConnectionLost));
    if (probe.verdict === 'use') {
      this.pipelineRefusal = null;
      return;
    }
    this.pipelineRefusal = probe.why;
    if (probe.verdict !== 'refused') return;
    warn({
      code: 'multi-statements-refused',
      message: `the server (or a proxy before it) refused a multi-statement packet (${probe.why}): each claim takes four to six round trips instead of two`,
      fix: 'let statusq\'s connections send multi-statement packets (CLIENT_MULTI_STATEMENTS; no privilege is needed), or keep the database close to the workers',
    });
  }

  /** NativeClaim.claimWritesAreKnown (see mysqlClaimWritesQuery), asked once per table and store. */
  private claimWritesAreKnown(table: ResolvedTable): Promise<boolean> {
    return askedOnce(this.knownClaimWrites, `${table.table}\u0000${table.status}\u0000${table.columns.claimedAt ?? ''}`, () =>
      this.execute(mysqlClaimWritesQuery(table)).then(({ rows }) => Number(rows[0]?.surprises) === 0),
    );
  }

  /** NativeClaim.idsOnServer: the one-packet claim where packets are sent and the table's id is an integer (asked once per table). */
  private claimIdsOnServer(table: ResolvedTable): Promise<ClaimIdsOnServer | null> {
    if (this.pipelineRefusal !== null) return Promise.resolve(null);
    return askedOnce(this.knownIdsOnServer, `${table.table}\u0000${table.id}`, () =>
      this.execute(mysqlIdTypeQuery(table)).then(({ rows }) => {
        const type = rows[0]?.id_type;
        return type === 'signed' || type === 'unsigned' ? mysqlClaimIdsOnServer(this.dialect.quoteIdentifier(table.id), type === 'unsigned') : null;
      }),
    );
  }

  /**
   * START TRANSACTION, `body`, COMMIT on one pooled connection, within the query deadline (the native claim's):
   * in as few round trips as the body allows when the server takes multi-statement packets (mysql-pipeline.ts).
   */
  async transaction<T>(body: (tx: StatementRunner) => Promise<T>): Promise<T> {
    const result = await this.withConnection((conn) =>
      this.pipelineRefusal === null
        ? pipelinedTransaction(conn, body, { isLost: isConnectionLost, statementLimit: this.statementLimit, check: (statement) => this.refuseOversized(statement) })
        : this.inTransaction(conn, () => body({ execute: (statement) => this.run(conn, statement) })),
    );
    this.stats.claims++;
    return result;
  }

  /**
   * Resolves once the idle probe sees a due row in `table`, after `timeoutMs`, or at once when `signal`
   * aborts (see mysql-idle-probe.ts). Without a table there is nothing to probe: it waits `timeoutMs`.
   */
  waitForWork(timeoutMs: number, signal: AbortSignal, table?: ResolvedTable): Promise<void> {
    if (this.closed || this.idleProbe === null || table === undefined) return sleep(timeoutMs, signal);
    return this.idleProbe.wait(table, timeoutMs, signal);
  }

  /**
   * Queue.waitFor's wake-up. MySQL/MariaDB send no notification of a settle, so it names no row and ends
   * after the idle probe's pace (idleProbeMs): waitFor's watcher reads every awaited row in one SELECT per
   * tick while anyone waits, so a settle is seen within that pace however long the job ran (its backoff alone
   * would reach a second), and N waiters cost one read per tick. A settle is not a due row, so the probe
   * itself cannot see it; and a probe of the awaited ids on the server would need a new statement each time
   * a waiter joins or leaves.
   */
  async waitForChange(timeoutMs: number, signal: AbortSignal): Promise<null> {
    if (!this.closed) await sleep(Math.min(timeoutMs, this.probeMs), signal);
    return null;
  }

  /** KILL of one of this store's own server threads (the idle probe's), through the pool even while closing. */
  private async killThread(threadId: number): Promise<void> {
    const ms = SERVER_CONNECTION.closeGraceMs;
    await raceDeadline(this.pool.query('KILL ?', [threadId]), ms, () => deadlineError(ms));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.idleProbe?.close();
    await endPool(this.pool, this.sockets);
  }

  /**
   * A transaction on a pooled connection lent to a handler (ctx.transaction): the handle is that mysql2/promise
   * `PoolConnection`, for `conn.query(...)`; never `release()` it, statusq gives it back after COMMIT.
   */
  async lendTransaction<T>(body: (tx: LentTransaction) => Promise<T>): Promise<T> {
    return lendPooledConnection(await this.acquire(), body, this.deadlines.queryTimeoutMs, this.lendingOps);
  }

  private async acquire(): Promise<PoolConnection> {
    if (this.closed) throw new StoreError('ConnectionLost', 'the MySQL store is closed', 'CLOSED');
    try {
      return await this.pool.getConnection();
    } catch (error) {
      throw this.fail(error);
    }
  }

  /** Runs `body` on a pooled connection, within `deadlineMs` of getting it (see MysqlStoreOptions.queryTimeoutMs). */
  private async withConnection<T>(body: (conn: PoolConnection) => Promise<T>, deadlineMs = this.deadlines.queryTimeoutMs): Promise<T> {
    return withPooledConnection(await this.acquire(), body, deadlineMs, this.connectionOps);
  }

  private readonly connectionOps: PooledConnectionOps<PoolConnection> = {
    release: (conn, lost) => {
      if (!lost) return conn.release();
      this.stats.connectionsLost++;
      conn.destroy();
    },
    // destroy() alone only half-closes the socket, which a frozen network keeps open.
    cut: (conn) => socketOf(conn.connection)?.destroy(),
    // A read-only refusal drops its connection too (see isReadOnlyRefusal; counted in stats.connectionsLost):
    // the next check of the worker's read-only wait connects afresh, to wherever the writer is now.
    isLost: (error) => isConnectionLost(error) || isReadOnlyRefusal(error),
    mapError: (error) => this.fail(error),
    timeoutError: deadlineError,
  };

  private readonly lendingOps: LendingOps<PoolConnection> = {
    ...this.connectionOps,
    begin: 'START TRANSACTION',
    query: (conn, sql) => conn.query(sql),
    run: (conn, statement) => this.run(conn, statement),
  };

  /** START TRANSACTION .. COMMIT around `body` (see inTransaction). */
  private inTransaction<T>(conn: PoolConnection, body: () => Promise<T>): Promise<T> {
    return inTransaction((sql) => conn.query(sql), body, isConnectionLost, 'START TRANSACTION');
  }

  private async run(conn: PoolConnection, statement: Statement): Promise<ExecResult> {
    this.refuseOversized(statement);
    const [result] = await conn.query({ sql: statement.sql, values: statement.params.map(bindValue) });
    return mysqlExecResult(result);
  }

  /**
   * Refused here rather than by the server, which answers a statement over max_allowed_packet with 1153 and
   * closes the connection, or, when the statement is still being written, with a reset socket that looks like
   * any lost connection (measured both on MariaDB 10.11 with a 16 KB packet), and is retried.
   */
  private refuseOversized(statement: Statement): void {
    if (!fitsStatementLimit(statement, this.statementLimit)) {
      throw new StoreError('Unsupported', `statement refused: ${statementTooLarge(statement, this.statementLimit)}`, 'ER_NET_PACKET_TOO_LARGE');
    }
  }

  private fail(error: unknown): unknown {
    if (isDeadlock(error)) this.stats.deadlocks++;
    else if (isLockWaitTimeout(error)) this.stats.lockWaitTimeouts++;
    if (this.closed && !(error instanceof StoreError)) return new StoreError('ConnectionLost', 'the MySQL store is closed', 'CLOSED', { cause: error });
    return toStoreError(error);
  }
}

/** The answer `ask` gives for `key`, asked once and kept in `cache`; a failed answer is asked again next time rather than remembered. */
function askedOnce<T>(cache: Map<string, Promise<T>>, key: string, ask: () => Promise<T>): Promise<T> {
  let known = cache.get(key);
  if (!known) {
    known = ask();
    known.catch(() => cache.delete(key));
    cache.set(key, known);
  }
  return known;
}
