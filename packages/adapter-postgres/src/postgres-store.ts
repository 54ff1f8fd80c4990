/*
 * Over 350 lines because the store is one pool's worth of shared state: the borrowed-connection deadline,
 * the transactions and the LISTEN connection all read the same closed flag, socket set and deadlines. The
 * dialect's SQL (claim hooks, errors, types of time) lives in the files beside it.
 */
import pg from 'pg';
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
  type ClosableSocket,
  type ColumnInfo,
  type ExecResult,
  type NativeClaim,
  type OrderTimeEncoding,
  type Row,
  type SchemaSupport,
  type Statement,
  type StatementRunner,
  type Store,
  type StoreCallDeadlines,
  type StoreCapabilities,
} from '@statusq/core/adapter';
import { postgresNativeClaim } from './postgres-claim-sql.js';
import { notifyChannel, postgresDialect, postgresOrderTimeEncoding } from './postgres-dialect.js';
import { isConnectionError, toStoreError } from './postgres-errors.js';
import { postgresSchema } from './postgres-schema.js';

export interface PostgresStoreOptions {
  /** `postgres://user:password@host:port/database[?options]`. */
  connectionString: string;
  /** Most pooled connections this store opens (the listening connection is extra). Default 4. */
  maxConnections?: number;
  /** How long to wait for a connection (a new one, or a free one of the pool) before failing with ConnectionLost. Default 10000 ms. */
  connectTimeoutMs?: number;
  /**
   * Longest one call may wait for the database once it holds a connection: every statement of it, COMMIT
   * included. Past it the call rejects with ConnectionLost and the connection is destroyed, never reused (an
   * answer arriving late would be taken for the next call's). Default 30000 ms.
   */
  queryTimeoutMs?: number;
  /** The same for a call that changes the schema (CREATE, ALTER, DROP: init, migrate), which may build an index on a big table. Default 600000 ms. */
  schemaTimeoutMs?: number;
  /** Use LISTEN/NOTIFY to wake `waitForWork` (one extra connection, opened on first wait). Default true. */
  listen?: boolean;
  /** Extra pg pool settings (ssl, ...); they win over the defaults above. */
  pool?: pg.PoolConfig;
}

/** Shortest pause between attempts to (re)open the listening connection after one failed. */
const LISTENER_RETRY_MS = 1000;
const DEFAULT_QUERY_TIMEOUT_MS = 30_000;
const DEFAULT_SCHEMA_TIMEOUT_MS = 600_000;
/** How long close() lets connections end politely before it cuts the sockets that have not. */
const CLOSE_GRACE_MS = 1000;
/** TCP keepalive probes start after this much silence, so a peer that vanished (host down, no RST) is noticed. */
const KEEPALIVE_DELAY_MS = 10_000;

/**
 * Type parsers of this store's connections only (pg's global parsers stay untouched): int8 (ids, COUNT(*))
 * becomes a number when it fits, a bigint when it does not; `timestamp without time zone` is read as UTC,
 * which is what the session's time zone says it is.
 */
const INT8_OID = 20;
const TIMESTAMP_OID = 1114;
function parseInt8(text: string): number | bigint {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : BigInt(text);
}
function parseTimestampUtc(text: string): Date | string {
  const ms = Date.parse(`${text.replace(' ', 'T')}Z`);
  return Number.isNaN(ms) ? text : new Date(ms);
}
const TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (format !== 'binary') {
      if (oid === INT8_OID) return parseInt8;
      if (oid === TIMESTAMP_OID) return parseTimestampUtc;
    }
    return (pg.types.getTypeParser as (oid: number, format?: string) => unknown)(oid, format);
  }) as pg.CustomTypesConfig['getTypeParser'],
};

type Waiter = () => void;

/**
 * A Store on a pg.Pool. Every call borrows one connection; `executeBatch` and `transaction` (the aging claim's) run BEGIN ...
 * COMMIT on the one they borrowed. A connection that fails with a connection error is destroyed (not returned
 * to the pool), so the call rejects with ConnectionLost and the next call gets a fresh connection. Every call
 * has a deadline (connectTimeoutMs to get a connection, queryTimeoutMs for the rest), so a database that stops
 * answering without closing anything (a frozen network) fails calls instead of hanging them.
 *
 * Wake-ups: the store remembers the tables it described or claimed from and, on the first `waitForWork`,
 * opens one dedicated connection that LISTENs on their channels (see `notifyChannel`); initTable and
 * migrateTable install triggers (postgres-schema.ts) that NOTIFY on INSERT and on an UPDATE back to pending. A dropped listening connection
 * is reopened on the next wait; polling stays the fallback throughout.
 */
export class PostgresStore implements Store {
  readonly dialect = postgresDialect;
  readonly schema: SchemaSupport = postgresSchema;
  readonly capabilities: StoreCapabilities;
  readonly nativeClaim: NativeClaim = {
    ...postgresNativeClaim,
    beforeClaim: (table) => {
      this.watch(table.table);
      // Whatever a notification announced before this claim started, this claim will see.
      this.notified = false;
    },
  };
  private readonly pool: pg.Pool;
  private readonly clientConfig: pg.ClientConfig;
  private readonly deadlines: StoreCallDeadlines;
  /** The sockets of every connection this store has open (pooled and listening), until they close. */
  private readonly sockets = new Set<ClosableSocket>();
  private closed = false;

  private readonly channels = new Set<string>();
  private readonly listening = new Set<string>();
  private listener: pg.Client | null = null;
  private listenerOpening: Promise<void> | null = null;
  private listenerFailedAt = 0;
  private listenQueue: Promise<void> = Promise.resolve();
  private waiters = new Set<Waiter>();
  /** A notification arrived while nobody was waiting: the next wait returns at once. */
  private notified = false;

  constructor(options: PostgresStoreOptions) {
    if (!options || typeof options.connectionString !== 'string' || options.connectionString.length === 0) {
      throw new ConfigError('PostgreSQL store needs a connection string');
    }
    const max = options.maxConnections ?? 4;
    if (!Number.isSafeInteger(max) || max < 1) throw new ConfigError('maxConnections must be a positive integer');
    const connectTimeoutMs = deadlineOption(options.connectTimeoutMs, 10_000, 'connectTimeout');
    this.deadlines = {
      queryTimeoutMs: deadlineOption(options.queryTimeoutMs, DEFAULT_QUERY_TIMEOUT_MS, 'queryTimeout'),
      schemaTimeoutMs: deadlineOption(options.schemaTimeoutMs, DEFAULT_SCHEMA_TIMEOUT_MS, 'schemaTimeout'),
    };
    const hasOptions = /[?&]options=/.test(options.connectionString);
    this.clientConfig = {
      connectionString: options.connectionString,
      application_name: 'statusq',
      connectionTimeoutMillis: connectTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
      // Queries queued on one connection go out without waiting for the previous reply (executeBatch).
      pipeline: true,
      // Text dates without a zone (the seed's 'YYYY-MM-DD HH:MM:SS.SSS') are UTC.
      ...(hasOptions ? {} : { options: '-c TimeZone=UTC' }),
      types: TYPES,
    };
    this.capabilities = { ...DEFAULT_CAPABILITIES, batchClaim: true, skipLocked: true, returning: true, listenNotify: options.listen ?? true };
    this.pool = new pg.Pool({ ...this.clientConfig, max, ...options.pool });
    // An idle connection that dies (server restart, pg_terminate_backend) is dropped by the pool; without a
    // listener its error would crash the process.
    this.pool.on('error', () => undefined);
    // A borrowed connection that dies between two queries emits `error` too; the next query reports it.
    this.pool.on('connect', (client) => {
      client.on('error', () => undefined);
      this.track(client);
    });
    // Without LISTEN the worker polls: no waitForWork at all.
    if (!this.capabilities.listenNotify) (this as { waitForWork?: unknown }).waitForWork = undefined;
  }

  async execute(statement: Statement): Promise<ExecResult> {
    return this.withClient((client) => run(client, statement), deadlineOf([statement], this.deadlines));
  }

  async executeBatch(statements: readonly Statement[]): Promise<ExecResult[]> {
    if (statements.length === 0) return [];
    // One statement commits on its own: no BEGIN/COMMIT round trips.
    if (statements.length === 1) return [await this.execute(statements[0]!).catch((error: unknown) => Promise.reject(atStatement(error, 0)))];
    // BEGIN, the statements and COMMIT are queued at once; on a pipelining connection (pg >= 8.2x) they
    // travel without waiting for each reply, which about halved a 50-statement settle batch here. After a
    // failed statement PostgreSQL refuses the rest (25P02) and turns COMMIT into ROLLBACK, so the batch
    // still commits all or nothing; the first failure is the one reported.
    let failing: number | undefined;
    try {
      return await this.withClient(async (client) => {
        if (!(client as { pipeline?: boolean }).pipeline) {
          // An older pg without pipelining: one statement after the other.
          return this.inTransaction(client, async () => {
            const results: ExecResult[] = [];
            for (const [i, s] of statements.entries()) {
              failing = i;
              results.push(await run(client, s));
            }
            failing = undefined;
            return results;
          });
        }
        const sent = [client.query('BEGIN'), ...statements.map((s) => run(client, s)), client.query('COMMIT')];
        const settled = await Promise.allSettled(sent);
        const first = settled.findIndex((r) => r.status === 'rejected');
        if (first >= 0) {
          // sent[0] is BEGIN and the last is COMMIT; statement i is sent[i + 1].
          if (first >= 1 && first <= statements.length) failing = first - 1;
          throw (settled[first] as PromiseRejectedResult).reason;
        }
        const commit = (settled[settled.length - 1] as PromiseFulfilledResult<pg.QueryResult>).value;
        if (commit.command !== 'COMMIT') throw new StoreError('Unknown', `PostgreSQL rolled the batch back (${commit.command})`, commit.command);
        return settled.slice(1, -1).map((r) => (r as PromiseFulfilledResult<ExecResult>).value);
      }, deadlineOf(statements, this.deadlines));
    } catch (error) {
      throw atStatement(error, failing);
    }
  }

  async describeTable(table: string): Promise<ColumnInfo[] | null> {
    const [schema, name] = splitTableName(validateTableName(table));
    const { rows } = await this.execute({
      sql:
        'SELECT c.column_name AS name, c.data_type AS type, c.character_maximum_length AS max_chars, ' +
        // Unique alone: a valid unique index (the primary key's included) of exactly this one key column, with
        // no predicate and no expression. A partial index leaves the rows outside it free to repeat the id.
        'EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] ' +
        'WHERE i.indrelid = cls.oid AND i.indisunique AND i.indisvalid AND i.indnkeyatts = 1 AND i.indpred IS NULL AND i.indexprs IS NULL ' +
        'AND a.attname = c.column_name) AS is_unique ' +
        'FROM information_schema.columns c ' +
        'JOIN pg_catalog.pg_namespace ns ON ns.nspname = c.table_schema ' +
        'JOIN pg_catalog.pg_class cls ON cls.relnamespace = ns.oid AND cls.relname = c.table_name ' +
        'WHERE c.table_schema = COALESCE($1, current_schema()) AND c.table_name = $2 ORDER BY c.ordinal_position',
      params: [schema, name],
    });
    if (rows.length === 0) return null;
    this.watch(table);
    return rows.map((r) => {
      // data_type names a domain's underlying type, so a domain over integer counts as integer.
      const type = String(r.type).toLowerCase();
      const chars = r.max_chars === null || r.max_chars === undefined || !type.startsWith('character') ? null : Number(r.max_chars);
      return {
        name: String(r.name),
        type,
        unique: r.is_unique === true,
        integer: type === 'smallint' || type === 'integer' || type === 'bigint',
        // varchar(n) and char(n) count characters; text and jsonb are unbounded for any value a worker holds.
        maxLength: chars === null ? null : { chars },
      };
    });
  }

  orderTimeEncoding(column: ColumnInfo): OrderTimeEncoding {
    return postgresOrderTimeEncoding(column.type);
  }

  /** BEGIN, `body`, COMMIT on one borrowed connection, within the query deadline. */
  transaction<T>(body: (tx: StatementRunner) => Promise<T>): Promise<T> {
    return this.withClient((client) => this.inTransaction(client, () => body({ execute: (statement) => run(client, statement) })));
  }

  /**
   * Resolves on a NOTIFY on one of the channels of the tables this store uses, after `timeoutMs`, or at once
   * when `signal` aborts or a notification arrived since the last claim.
   */
  async waitForWork(timeoutMs: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted || this.closed) return;
    if (this.notified) {
      this.notified = false;
      return;
    }
    // Opening the listener is not awaited: until it is up, this wait is plain polling.
    void this.ensureListener();
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, timeoutMs));
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(done);
    });
  }

  /** Whether the listening connection is up and LISTENs on every channel known so far (for tests). */
  get listeningChannels(): readonly string[] {
    return this.listener ? [...this.listening] : [];
  }

  /** Opens the listening connection now (it is otherwise opened by the first wait) and waits until it listens. */
  async listen(): Promise<void> {
    await this.ensureListener();
    await this.listenQueue;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const wake of [...this.waiters]) wake();
    // pool.end() resolves once it has asked each connection to end; the sockets close when the server answers.
    await endWithin(Promise.all([this.endListener(), this.pool.end().catch(() => undefined)]), this.sockets, CLOSE_GRACE_MS);
  }

  /** Keeps `client`'s socket in `sockets` until it closes. */
  private track(client: pg.Client): void {
    const socket = client.connection.stream;
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  private async endListener(): Promise<void> {
    // A listener still connecting sees `closed` and ends itself.
    await this.listenerOpening;
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => undefined);
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
    const client = await this.acquire();
    let released = false;
    const release = (broken: boolean) => {
      if (released) return;
      released = true;
      client.release(broken);
    };
    const call = (async () => {
      try {
        return await body(client);
      } catch (error) {
        release(isConnectionError(error));
        throw toStoreError(error);
      } finally {
        release(false);
      }
    })();
    return raceDeadline(call, deadlineMs, () => {
      // What was sent may still be answered; that answer must never reach another call.
      client.connection.stream.destroy();
      release(true);
      return new StoreError('ConnectionLost', `PostgreSQL did not answer within ${deadlineMs} ms (queryTimeout); the connection was dropped`, 'QUERY_TIMEOUT');
    });
  }

  /** BEGIN, `body`, COMMIT; on failure ROLLBACK and rethrow (withClient maps the error and drops a dead connection). */
  private async inTransaction<T>(client: pg.PoolClient, body: () => Promise<T>): Promise<T> {
    await client.query('BEGIN');
    try {
      const result = await body();
      await client.query('COMMIT');
      return result;
    } catch (error) {
      if (isConnectionError(error)) throw error;
      // A connection that cannot even roll back is dead: report that, so withClient drops it.
      const rollbackError = await client.query('ROLLBACK').then(
        () => null,
        (e: unknown) => e,
      );
      throw rollbackError !== null && isConnectionError(rollbackError) ? rollbackError : error;
    }
  }

  /** Remembers a table whose channel the listener should LISTEN on. */
  private watch(table: string): void {
    if (!this.capabilities.listenNotify) return;
    const channel = notifyChannel(table);
    if (this.channels.has(channel)) return;
    this.channels.add(channel);
    if (this.listener) this.syncChannels(this.listener);
  }

  private ensureListener(): Promise<void> {
    if (this.closed || this.listener) return Promise.resolve();
    if (this.listenerOpening) return this.listenerOpening;
    if (Date.now() - this.listenerFailedAt < LISTENER_RETRY_MS) return Promise.resolve();
    const opening = this.openListener().then(
      () => undefined,
      () => {
        this.listenerFailedAt = Date.now();
      },
    );
    this.listenerOpening = opening.finally(() => {
      this.listenerOpening = null;
    });
    return this.listenerOpening;
  }

  private async openListener(): Promise<void> {
    // pg's own per-statement timeout bounds the LISTENs; on a pipelining connection it destroys the socket.
    const client = new pg.Client({ ...this.clientConfig, query_timeout: this.deadlines.queryTimeoutMs });
    this.track(client);
    const drop = () => {
      if (this.listener === client) {
        this.listener = null;
        this.listening.clear();
        this.listenerFailedAt = 0;
      }
    };
    client.on('error', drop);
    client.on('end', drop);
    client.on('notification', () => this.wakeAll());
    await client.connect();
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.listener = client;
    this.syncChannels(client);
    await this.listenQueue;
    // Rows may have arrived while nobody listened (before the first wait, or while reconnecting).
    this.wakeAll();
  }

  /** LISTENs on every known channel the listener does not listen on yet, one statement at a time. */
  private syncChannels(client: pg.Client): void {
    this.listenQueue = this.listenQueue.then(async () => {
      for (const channel of this.channels) {
        if (this.listener !== client || this.listening.has(channel)) continue;
        try {
          await client.query(`LISTEN ${this.dialect.quoteIdentifier(channel)}`);
          this.listening.add(channel);
        } catch {
          // The connection broke; `drop` resets it and the next wait reopens it.
          return;
        }
      }
    });
  }

  private wakeAll(): void {
    if (this.waiters.size === 0) {
      this.notified = true;
      return;
    }
    for (const wake of [...this.waiters]) wake();
  }
}

async function run(client: pg.PoolClient, statement: Statement): Promise<ExecResult> {
  const result = (await client.query({ text: statement.sql, values: statement.params as unknown[] })) as pg.QueryResult | pg.QueryResult[];
  const last = Array.isArray(result) ? result[result.length - 1]! : result;
  return { rows: last.rows as Row[], affected: last.rowCount ?? 0 };
}
