import { createHash } from 'node:crypto';
import pg from 'pg';
import {
  ConfigError,
  DEFAULT_CAPABILITIES,
  StoreError,
  emitStoreWarning,
  atStatement,
  deadlineOf,
  SERVER_CONNECTION,
  serverConnectionOptions,
  type ServerConnectionOptions,
  endWithin,
  inTransaction,
  runInOrder,
  withPooledConnection,
  type PooledConnectionOps,
  type ClosableSocket,
  type CallerRunner,
  type ColumnInfo,
  type ExecResult,
  type NativeClaim,
  type OrderTimeEncoding,
  type ResolvedTable,
  type Row,
  type SchemaSupport,
  type Statement,
  type StatementRunner,
  type Store,
  type StoreCallDeadlines,
  type StoreCapabilities,
  type ServerCheck,
  type StoreInspection,
  type StoreWarning,
  lendPooledConnection,
  type LendingOps,
  type LentTransaction,
} from '@statusq/core/adapter';
import { postgresRunnerFor } from './postgres-caller-transaction.js';
import { describePostgresTable } from './postgres-catalog.js';
import { postgresNativeClaim } from './postgres-claim-sql.js';
import { postgresDialect, postgresOrderTimeEncoding } from './postgres-dialect.js';
import { postgresInspection } from './postgres-doctor.js';
import { isConnectionError, isReadOnlyRefusal, refusesPreparedStatement, toStoreError } from './postgres-errors.js';
import { NOTIFY_PROBE_TIMEOUT_MS, PostgresListener, type NotificationDelivery } from './postgres-listener.js';
import { postgresSchema } from './postgres-schema.js';
import { postgresTypes } from './postgres-types.js';

/** The pool and deadline options are every server adapter's (ServerConnectionOptions); the listening connection is not counted in maxConnections. */
export interface PostgresStoreOptions extends ServerConnectionOptions {
  /** `postgres://user:password@host:port/database[?options]`. */
  connectionString: string;
  /** Use LISTEN/NOTIFY to wake `waitForWork` (one extra connection, opened on first wait). Default true. */
  listen?: boolean;
  /**
   * A URL of the same database, straight to the server, for the listening connection alone: behind a
   * transaction-mode pooler (PgBouncer's pool_mode = transaction) a LISTEN through `connectionString` is
   * lost, and idle workers could only poll. Claims, settles and the NOTIFYs keep going through
   * `connectionString`. Default: the listening connection uses `connectionString` too.
   */
  listenUrl?: string;
  /**
   * Hears what goes wrong without failing anything, once per cause: notifications that a probe found lost
   * on the listening connection's path (code `notifications-lost`). Default: process.emitWarning.
   */
  onWarning?: (warning: StoreWarning) => void;
  /** Extra pg pool settings (ssl, ...); they win over the defaults above. */
  pool?: pg.PoolConfig;
  /**
   * Prepare the worker's claim and grouped settle once per connection (named statements) instead of sending
   * their text to be parsed on every call. Default true. The store turns it off by itself, for good, the first
   * time the server refuses a prepared statement (a transaction-mode pooler that does not track them, or a
   * table changed under a prepared `RETURNING *`), and re-sends that statement unnamed.
   */
  prepare?: boolean;
}

/** Most statement texts a store prepares; past it, further texts are sent unnamed. */
const MAX_PREPARED_TEXTS = 64;


/**
 * A Store on a pg.Pool. Every call borrows one connection; `executeBatch` and `transaction` (the aging claim's) run BEGIN ...
 * COMMIT on the one they borrowed. A connection that fails with a connection error is destroyed (not returned
 * to the pool), so the call rejects with ConnectionLost and the next call gets a fresh connection. Every call
 * has a deadline (connectTimeoutMs to get a connection, queryTimeoutMs for the rest), so a database that stops
 * answering without closing anything (a frozen network) fails calls instead of hanging them.
 *
 * Wake-ups: the store remembers the tables it described or claimed from and, on the first `waitForWork`,
 * opens one dedicated connection (on `listenUrl` when given) that LISTENs on their channels once a probe
 * NOTIFY sent through the pool came back on it (PostgresListener); a dropped listening connection is
 * reopened on the next wait; polling stays the fallback throughout, and the only way once the probe found
 * notifications lost (a transaction-mode pooler), which `onWarning` hears once.
 */
export class PostgresStore implements Store {
  readonly dialect = postgresDialect;
  readonly schema: SchemaSupport = postgresSchema;
  readonly inspection: StoreInspection = postgresInspection(this, () => this.notificationCheck());
  readonly capabilities: StoreCapabilities;
  readonly nativeClaim: NativeClaim = {
    ...postgresNativeClaim,
    beforeClaim: (table) => {
      this.watch(table.table);
      this.listener.claimStarts();
    },
  };
  private readonly pool: pg.Pool;
  private readonly deadlines: StoreCallDeadlines;
  /** The sockets of every connection this store has open (pooled and listening), until they close. */
  private readonly sockets = new Set<ClosableSocket>();
  private closed = false;
  private readonly listener: PostgresListener;
  /**
   * Names of the reusable statements prepared so far, by text; null once preparing is off. The name is a hash
   * of the text, so one name means one text on every connection and in every process: a session that holds
   * another process's statement of that name (behind a pooler) holds the same statement.
   */
  private preparedNames: Map<string, string> | null;
  /** The listening connection has a URL of its own (listenUrl). */
  private readonly listensDirect: boolean;
  private readonly warn: (warning: StoreWarning) => void;

  constructor(options: PostgresStoreOptions) {
    if (!options || typeof options.connectionString !== 'string' || options.connectionString.length === 0) {
      throw new ConfigError('PostgreSQL store needs a connection string');
    }
    for (const flag of ['listen', 'prepare'] as const) {
      const value = options[flag];
      if (value !== undefined && typeof value !== 'boolean') throw new ConfigError(`PostgreSQL store: ${flag} must be true or false, got ${JSON.stringify(value)}`);
    }
    const { listenUrl, onWarning } = options;
    if (listenUrl !== undefined) {
      if (typeof listenUrl !== 'string' || listenUrl.length === 0) throw new ConfigError(`PostgreSQL store: listenUrl must be a PostgreSQL URL, got ${JSON.stringify(listenUrl)}`);
      if (options.listen === false) throw new ConfigError('PostgreSQL store: listenUrl is the listening connection\'s URL, and listen is false (no listening connection)');
    }
    if (onWarning !== undefined && typeof onWarning !== 'function') throw new ConfigError('PostgreSQL store: onWarning must be a function');
    const { maxConnections: max, connectTimeoutMs, deadlines } = serverConnectionOptions(options);
    this.deadlines = deadlines;
    const hasOptions = /[?&]options=/.test(options.connectionString);
    const clientConfig: pg.ClientConfig = {
      connectionString: options.connectionString,
      application_name: 'statusq',
      connectionTimeoutMillis: connectTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: SERVER_CONNECTION.keepAliveDelayMs,
      // Queries queued on one connection go out without waiting for the previous reply (executeBatch).
      pipeline: true,
      // Text dates without a zone (the seed's 'YYYY-MM-DD HH:MM:SS.SSS') are UTC.
      ...(hasOptions ? {} : { options: '-c TimeZone=UTC' }),
      types: postgresTypes,
    };
    this.capabilities = { ...DEFAULT_CAPABILITIES, batchClaim: true, skipLocked: true, returning: true, insertReturning: true, insertOnConflictDoNothing: true, listenNotify: options.listen ?? true };
    this.pool = new pg.Pool({ ...clientConfig, max, ...options.pool });
    // An idle connection that dies (server restart, pg_terminate_backend) is dropped by the pool; without a
    // listener its error would crash the process.
    this.pool.on('error', () => undefined);
    // A borrowed connection that dies between two queries emits `error` too; the next query reports it.
    this.pool.on('connect', (client) => {
      client.on('error', () => undefined);
      this.track(client);
    });
    this.preparedNames = options.prepare === false ? null : new Map();
    this.listensDirect = listenUrl !== undefined;
    this.warn = onWarning ?? emitStoreWarning;
    this.listener = new PostgresListener(
      listenUrl === undefined ? clientConfig : { ...clientConfig, connectionString: listenUrl, options: /[?&]options=/.test(listenUrl) ? undefined : '-c TimeZone=UTC' },
      this.deadlines.queryTimeoutMs,
      (client) => this.track(client),
      async (channel, payload) => void (await this.execute({ sql: 'SELECT pg_notify($1, $2)', params: [channel, payload] })),
      () => this.warn(this.notificationsLost()),
    );
    // Without LISTEN the worker and waitFor poll: no waitForWork or waitForChange at all.
    if (!this.capabilities.listenNotify) {
      (this as { waitForWork?: unknown }).waitForWork = undefined;
      (this as { waitForChange?: unknown }).waitForChange = undefined;
    }
  }

  async execute(statement: Statement): Promise<ExecResult> {
    return this.withClient((client) => this.runAutocommitted(client, statement), deadlineOf([statement], this.deadlines));
  }

  /**
   * One statement on its own (no transaction around it), prepared when it is reusable: the server parses and
   * analyses each claim and settle once per connection instead of per call. Measured with a bare pg loop of
   * the claim and the grouped settle (8 connections x 256 rows, 2026-12-03): 6-8% more jobs/s than unnamed. Only here: a refused prepared statement aborts the
   * transaction it is in, and only outside one can it be sent again at once, unnamed.
   */
  private async runAutocommitted(client: pg.PoolClient, statement: Statement): Promise<ExecResult> {
    const name = this.preparedNameOf(statement);
    if (name === null) return run(client, statement);
    try {
      return await run(client, statement, name);
    } catch (error) {
      if (!refusesPreparedStatement(error)) throw error;
      this.preparedNames = null;
      return run(client, statement);
    }
  }

  private preparedNameOf(statement: Statement): string | null {
    if (!statement.reusable || this.preparedNames === null) return null;
    let name = this.preparedNames.get(statement.sql);
    if (name === undefined) {
      if (this.preparedNames.size >= MAX_PREPARED_TEXTS) return null;
      name = `statusq_${createHash('sha256').update(statement.sql).digest('hex').slice(0, 32)}`;
      this.preparedNames.set(statement.sql, name);
    }
    return name;
  }

  async executeBatch(statements: readonly Statement[]): Promise<ExecResult[]> {
    if (statements.length === 0) return [];
    // One statement commits on its own: no BEGIN/COMMIT round trips.
    if (statements.length === 1) return [await this.execute(statements[0]!).catch((error: unknown) => Promise.reject(atStatement(error, 0)))];
    // BEGIN, the statements and COMMIT are queued at once; on a pipelining connection (pg >= 8.2x) they
    // travel without waiting for each reply, which about halved a 50-statement settle batch here. After a
    // failed statement PostgreSQL refuses the rest (25P02) and turns COMMIT into ROLLBACK, so the batch
    // still commits all or nothing; the first failure is the one reported.
    const position: { failing?: number | undefined } = {};
    try {
      return await this.withClient(async (client) => {
        if (!(client as { pipeline?: boolean }).pipeline) {
          // An older pg without pipelining: one statement after the other.
          return inTransaction((sql) => client.query(sql), () => runInOrder(statements, (s) => run(client, s), position), isConnectionError);
        }
        const sent = [client.query('BEGIN'), ...statements.map((s) => run(client, s)), client.query('COMMIT')];
        const settled = await Promise.allSettled(sent);
        const first = settled.findIndex((r) => r.status === 'rejected');
        if (first >= 0) {
          // sent[0] is BEGIN and the last is COMMIT; statement i is sent[i + 1].
          if (first >= 1 && first <= statements.length) position.failing = first - 1;
          throw (settled[first] as PromiseRejectedResult).reason;
        }
        const commit = (settled[settled.length - 1] as PromiseFulfilledResult<pg.QueryResult>).value;
        if (commit.command !== 'COMMIT') throw new StoreError('Unknown', `PostgreSQL rolled the batch back (${commit.command})`, commit.command);
        return settled.slice(1, -1).map((r) => (r as PromiseFulfilledResult<ExecResult>).value);
      }, deadlineOf(statements, this.deadlines));
    } catch (error) {
      throw atStatement(error, position.failing);
    }
  }

  /** A knex transaction or a pg client in a transaction, the application's own (see postgresRunnerFor). */
  runnerFor(handle: unknown): CallerRunner {
    return postgresRunnerFor(handle);
  }

  async describeTable(table: string): Promise<ColumnInfo[] | null> {
    const columns = await describePostgresTable(this, table);
    if (columns) this.watch(table);
    return columns;
  }

  orderTimeEncoding(column: ColumnInfo): OrderTimeEncoding {
    return postgresOrderTimeEncoding(column.type);
  }

  /** BEGIN, `body`, COMMIT on one borrowed connection, within the query deadline. */
  transaction<T>(body: (tx: StatementRunner) => Promise<T>): Promise<T> {
    return this.withClient((client) => inTransaction((sql) => client.query(sql), () => body({ execute: (statement) => run(client, statement) }), isConnectionError));
  }

  /**
   * A transaction on a pooled connection lent to a handler (ctx.transaction): the handle is that `pg.PoolClient`,
   * for `client.query(...)`; never `release()` it, statusq gives it back after COMMIT.
   */
  async lendTransaction<T>(body: (tx: LentTransaction) => Promise<T>): Promise<T> {
    return lendPooledConnection(await this.acquire(), body, this.deadlines.queryTimeoutMs, LENDING_OPS);
  }

  /**
   * Resolves on a NOTIFY on one of the channels of the tables this store uses, after `timeoutMs`, or at once
   * when `signal` aborts or a notification arrived since the last claim.
   */
  waitForWork(timeoutMs: number, signal: AbortSignal): Promise<void> {
    return this.listener.wait(timeoutMs, signal);
  }

  /**
   * Queue.waitFor's wake-up: the ids of `table`'s rows whose settle NOTIFY (postgres-schema.ts) arrived, on the
   * same listening connection as waitForWork's but another channel. A table migrated before the settle trigger
   * sends none, and behind a pooler that loses notifications nothing arrives: each wait then ends at its
   * timeout and waitFor's backoff reads the rows.
   */
  waitForChange(timeoutMs: number, signal: AbortSignal, table: ResolvedTable): Promise<readonly string[] | null> {
    return this.listener.waitForSettles(table.table, timeoutMs, signal);
  }

  /** Whether the listening connection is up and LISTENs on every channel known so far (for tests). */
  get listeningChannels(): readonly string[] {
    return this.listener.listeningChannels;
  }

  /**
   * Opens the listening connection now (it is otherwise opened by the first wait) and waits until it
   * listens, or until its probe found notifications lost (see `notifications`).
   */
  listen(): Promise<void> {
    return this.listener.listen();
  }

  /**
   * Whether NOTIFYs sent through this store reach its listening connection: `unknown` until a listening
   * connection was probed, `lost` for good once a probe NOTIFY did not come back (idle workers then poll).
   */
  get notifications(): NotificationDelivery {
    return this.listener.delivery;
  }

  /**
   * `statusq doctor`'s check of the wake-ups: a probe NOTIFY sent through the pool, awaited on a fresh
   * connection to the listening URL. Null when this store does not listen (`listen: false`).
   */
  async notificationCheck(): Promise<ServerCheck | null> {
    if (!this.capabilities.listenNotify) return null;
    const via = this.listensDirect ? 'a connection to listenUrl (--listen-db)' : 'a LISTENing connection on this URL';
    let tookMs: number | null;
    try {
      tookMs = await this.listener.probe();
    } catch (error) {
      return {
        name: 'notify',
        status: 'warn',
        detail: `the wake-up probe could not run (${error instanceof Error ? error.message : String(error)}): idle workers may only poll`,
        ...(this.listensDirect ? { fix: 'check that listenUrl (--listen-db, STATUSQ_LISTEN_DATABASE_URL) reaches the server' } : {}),
      };
    }
    if (tookMs === null) {
      const lost = this.notificationsLost();
      return { name: 'notify', status: 'warn', detail: lost.message, fix: lost.fix };
    }
    return { name: 'notify', status: 'pass', detail: `a NOTIFY sent through this URL reached ${via} in ${Math.max(1, Math.round(tookMs))} ms: idle workers wake as soon as rows arrive` };
  }

  /** What a probe NOTIFY that never arrived means, and what to do, for the log and the doctor alike. */
  private notificationsLost(): StoreWarning {
    const seconds = NOTIFY_PROBE_TIMEOUT_MS / 1000;
    const polling = 'idle workers find new rows by polling alone, up to their longest poll interval late (pollMaxMs; statusq work --poll-max, default 1s)';
    if (this.listensDirect) {
      return {
        code: 'notifications-lost',
        message: `LISTEN/NOTIFY does not work through listenUrl: a NOTIFY sent through the store's URL did not reach the listening connection on listenUrl within ${seconds} s, so ${polling}`,
        fix: 'point listenUrl (statusq --listen-db, STATUSQ_LISTEN_DATABASE_URL) at the PostgreSQL server itself, not a transaction-mode pooler, and at the same database as the store\'s URL',
      };
    }
    return {
      code: 'notifications-lost',
      message:
        `LISTEN/NOTIFY does not work through this URL: a NOTIFY sent through it did not reach the listening connection within ${seconds} s, as behind a transaction-mode pooler ` +
        `(PgBouncer with pool_mode = transaction runs a LISTEN on whichever server connection it lends and then lends that connection to others), so ${polling}`,
      fix: 'give the listening connection a URL straight to the server (listenUrl; statusq --listen-db URL or STATUSQ_LISTEN_DATABASE_URL); claims and settles keep going through the pooler',
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // pool.end() resolves once it has asked each connection to end; the sockets close when the server answers.
    await endWithin(Promise.all([this.listener.close(), this.pool.end().catch(() => undefined)]), this.sockets, SERVER_CONNECTION.closeGraceMs);
  }

  /** Keeps `client`'s socket in `sockets` until it closes. */
  private track(client: pg.Client): void {
    const socket = client.connection.stream;
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  // -------------------------------------------------------------------------------------------------------

  private async acquire(): Promise<pg.PoolClient> {
    if (this.closed) throw new StoreError('ConnectionLost', 'the PostgreSQL store is closed', 'CLOSED');
    try {
      return await this.pool.connect();
    } catch (error) {
      throw toStoreError(error);
    }
  }

  /** Runs `body` on a borrowed connection, within `deadlineMs` of getting it (see PostgresStoreOptions.queryTimeoutMs). */
  private async withClient<T>(body: (client: pg.PoolClient) => Promise<T>, deadlineMs = this.deadlines.queryTimeoutMs): Promise<T> {
    return withPooledConnection(await this.acquire(), body, deadlineMs, CONNECTION_OPS);
  }

  /** Remembers a table whose channel the listener should LISTEN on. */
  private watch(table: string): void {
    if (this.capabilities.listenNotify) this.listener.watch(table);
  }
}

const CONNECTION_OPS: PooledConnectionOps<pg.PoolClient> = {
  release: (client, lost) => client.release(lost),
  cut: (client) => client.connection.stream.destroy(),
  // A read-only refusal drops its client too (see isReadOnlyRefusal): the worker's next check connects afresh.
  isLost: (error) => isConnectionError(error) || isReadOnlyRefusal(error),
  mapError: toStoreError,
  timeoutError: (ms) => new StoreError('ConnectionLost', `PostgreSQL did not answer within ${ms} ms (queryTimeout); the connection was dropped`, 'QUERY_TIMEOUT'),
};

const LENDING_OPS: LendingOps<pg.PoolClient> = { ...CONNECTION_OPS, query: (client, sql) => client.query(sql), run: (client, statement) => run(client, statement) };

async function run(client: pg.PoolClient, statement: Statement, name?: string): Promise<ExecResult> {
  const query: pg.QueryConfig = { text: statement.sql, values: statement.params as unknown[] };
  if (name !== undefined) query.name = name;
  const result = (await client.query(query)) as pg.QueryResult | pg.QueryResult[];
  const last = Array.isArray(result) ? result[result.length - 1]! : result;
  return { rows: last.rows as Row[], affected: last.rowCount ?? 0 };
}
