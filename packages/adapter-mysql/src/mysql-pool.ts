import { Socket } from 'node:net';
import mysql from 'mysql2/promise';
import type { Connection, ConnectionOptions, Pool } from 'mysql2/promise';
import type { PoolConnection as CorePoolConnection } from 'mysql2';
import { ConfigError, SERVER_CONNECTION, StoreError, endWithin, serverConnectionOptions, raceDeadline, type Row, type StatementLimit, type StoreCallDeadlines } from '@statusq/core/adapter';
import { SESSION_ROW_SQL, planBinlog, type MysqlBinlogPlan } from './mysql-binlog.js';
import { toStoreError } from './mysql-errors.js';
import { binlogFallbackOption, type MysqlIsolation, type MysqlStoreOptions } from './mysql-options.js';

/**
 * The server behind the store, as detected at connect from VERSION(): what statusq relies on, each flag with
 * the first version that has it. Verified on MariaDB 10.11 here (and the no-SKIP-LOCKED path on a MariaDB
 * reporting 10.5 through `--version`, mysql.server-detection.test.ts); the MySQL versions are MySQL's
 * release notes, not runs.
 */
export interface MysqlServerInfo {
  /** VERSION() as the server reports it. */
  version: string;
  flavor: 'mysql' | 'mariadb';
  major: number;
  minor: number;
  patch: number;
  /** FOR UPDATE SKIP LOCKED, the native batch claim: MySQL >= 8.0.1, MariaDB >= 10.6. Else the conditional-update claim. */
  skipLocked: boolean;
  /**
   * The JSON column type: `native` (MySQL >= 5.7.8: binary JSON, which mysql2 returns parsed), `alias` (MariaDB
   * >= 10.2.7: LONGTEXT with a JSON_VALID check, returned as text), `none`. statusq's own payload and result
   * columns are LONGTEXT everywhere (see mysql-schema.ts); an application's JSON column works either way.
   */
  jsonType: 'native' | 'alias' | 'none';
  /** The session variable naming the isolation level: transaction_isolation (MySQL >= 5.7.20, MariaDB >= 11.1), else tx_isolation. */
  isolationVariable: 'transaction_isolation' | 'tx_isolation';
}

/**
 * The oldest servers statusq runs on: DATETIME(3) and NOW(3) (the claim's clock and every lease and retry time)
 * and utf8mb4 index keys of VARCHAR(255) (innodb_large_prefix on by default) came in MySQL 5.7.7 and MariaDB 10.2.2.
 * Both lines are past their end of life; anything older is refused at open (StoreError Unsupported).
 */
export const MINIMUM_VERSIONS: Readonly<Record<MysqlServerInfo['flavor'], Version>> = { mysql: [5, 7, 7], mariadb: [10, 2, 2] };

type Version = readonly [number, number, number];
export const versionAtLeast = ([major, minor, patch]: Version, [a, b, c]: Version) => major > a || (major === a && (minor > b || (minor === b && patch >= c)));

export function parseServerVersion(version: string): MysqlServerInfo {
  const flavor = /mariadb/i.test(version) ? 'mariadb' : 'mysql';
  // MariaDB's handshake (and a proxy that repeats it) prefixes 5.5.5- for clients that parse versions naively.
  const m = /(\d+)\.(\d+)\.(\d+)/.exec(flavor === 'mariadb' ? version.replace(/^5\.5\.5-/, '') : version);
  const [major, minor, patch]: Version = m ? [Number(m[1]), Number(m[2]), Number(m[3])] : [0, 0, 0];
  const atLeast = (a: number, b: number, c: number) => versionAtLeast([major, minor, patch], [a, b, c]);
  const mariadb = flavor === 'mariadb';
  return {
    version,
    flavor,
    major,
    minor,
    patch,
    skipLocked: mariadb ? atLeast(10, 6, 0) : atLeast(8, 0, 1),
    jsonType: mariadb ? (atLeast(10, 2, 7) ? 'alias' : 'none') : atLeast(5, 7, 8) ? 'native' : 'none',
    isolationVariable: (mariadb ? atLeast(11, 1, 0) : atLeast(5, 7, 20)) ? 'transaction_isolation' : 'tx_isolation',
  };
}

/** The upgrade a server without what statusq needs (or without SKIP LOCKED, for the native claim) should get. */
export function upgradeFix(server: MysqlServerInfo, forNativeClaim = false): string {
  if (forNativeClaim) return server.flavor === 'mariadb' ? 'MariaDB 10.6 or later' : 'MySQL 8.0.1 or later';
  return server.flavor === 'mariadb' ? 'MariaDB 10.6 or later (10.2.2 at the least)' : 'MySQL 8.0.1 or later (5.7.7 at the least)';
}

/** Why statusq cannot run on `server`, or null when it can (see MINIMUM_VERSIONS). */
export function unsupportedVersion(server: MysqlServerInfo): string | null {
  const [a, b, c] = MINIMUM_VERSIONS[server.flavor];
  if (versionAtLeast([server.major, server.minor, server.patch], [a, b, c])) return null;
  const product = server.flavor === 'mariadb' ? 'MariaDB' : 'MySQL';
  return `${product} ${server.version} is older than statusq supports: it needs ${product} ${a}.${b}.${c} or later (DATETIME(3) and NOW(3) for claim, lease and retry times; utf8mb4 index keys)`;
}

/**
 * The server settings read at open, in the probe that reads VERSION(), that decide how statusq can run
 * there (issue 18: production MySQL). Every one exists on MySQL 5.7+/8 and MariaDB 10.x, so the probe never
 * fails on a missing variable; @@autocommit is the session's after statusq's set-up ran.
 */
export interface MysqlServerSettings {
  logBin: boolean;
  /** ROW, STATEMENT or MIXED (upper case). */
  binlogFormat: string;
  readOnly: boolean;
  maxAllowedPacket: number;
  /** 0 as created, 1 names stored in lower case and compared without case, 2 stored as given, compared in lower case. */
  lowerCaseTableNames: number;
  autocommit: boolean;
}

/** The one probe a new store runs: the version and the settings (see MysqlServerSettings). */
export const SERVER_PROBE_SQL =
  'SELECT VERSION() AS version, @@log_bin AS log_bin, @@binlog_format AS binlog_format, @@read_only AS read_only, ' +
  '@@max_allowed_packet AS max_allowed_packet, @@lower_case_table_names AS lower_case_table_names, @@autocommit AS autocommit';

export function readServerSettings(row: Row): MysqlServerSettings {
  return {
    logBin: Number(row.log_bin) === 1,
    binlogFormat: String(row.binlog_format ?? '').toUpperCase(),
    readOnly: Number(row.read_only) === 1,
    maxAllowedPacket: Number(row.max_allowed_packet),
    lowerCaseTableNames: Number(row.lower_case_table_names),
    autocommit: Number(row.autocommit) === 1,
  };
}

/** The value `statusq doctor` and the messages suggest: MySQL 8's default, and room for any payload statusq's own tables take in practice. */
export const SUGGESTED_MAX_ALLOWED_PACKET = '64M';

/**
 * One statement's bound on this server. Measured on MariaDB 10.11 (16 KB and 1 KB packets): a COM_QUERY of up
 * to max_allowed_packet - 2 bytes of SQL runs, one byte more gets 1153. 16 bytes of margin cover a server
 * that counts a header byte or two more; core's statementBytes already counts high (each `?` as well as the value).
 * (MariaDB takes up to net_buffer_length even when max_allowed_packet is smaller; reading only
 * max_allowed_packet errs on the safe side.)
 */
export function mysqlStatementLimit(maxAllowedPacket: number): StatementLimit {
  return {
    bytes: Math.max(0, maxAllowedPacket - 16),
    setting: `max_allowed_packet = ${maxAllowedPacket}`,
    fix: `SET GLOBAL max_allowed_packet = ${SUGGESTED_MAX_ALLOWED_PACKET}, and max_allowed_packet = ${SUGGESTED_MAX_ALLOWED_PACKET} under [mysqld] in the server's configuration`,
  };
}

/** A pool whose sessions are set up for statusq, with what MysqlStore needs to run and close it. */
export interface OpenedMysqlPool {
  pool: Pool;
  /** Opens one connection outside the pool with the pool's options and session set-up. */
  /** A connection outside the pool, set up like the pool's, then with `extraSetup` run on it. */
  openConnection(extraSetup?: readonly string[]): Promise<Connection>;
  /** The sockets of every connection the pool (or openConnection) has open, until they close. */
  sockets: Set<Socket>;
  deadlines: StoreCallDeadlines;
  server: MysqlServerInfo;
  settings: MysqlServerSettings;
  /** How statusq's writes reach the server's binary log, and the isolation its sessions run at (mysql-binlog.ts). */
  binlog: MysqlBinlogPlan;
}



/**
 * Opens the pool, checks the server is reachable and detects its flavor, version and settings. Every pooled
 * connection runs with time_zone '+00:00', statusq's lock wait timeout (whatever the server's default), autocommit on
 * (whatever init_connect did) and (by default) READ COMMITTED; on a server that logs by statement, also
 * binlog_format ROW, or REPEATABLE READ instead (mysql-binlog.ts).
 */
export async function openMysqlPool(options: MysqlStoreOptions): Promise<OpenedMysqlPool> {
  const isolation = options.isolation ?? 'read-committed';
  if (isolation !== 'read-committed' && isolation !== 'repeatable-read') {
    throw new ConfigError(`isolation must be read-committed or repeatable-read, got ${JSON.stringify(isolation)}`);
  }
  const binlogFallback = binlogFallbackOption(options.binlogFallback);
  const { maxConnections, connectTimeoutMs: connectTimeout, deadlines } = serverConnectionOptions(options);
  const lockWait = options.lockWaitTimeoutSeconds ?? 10;
  if (!Number.isSafeInteger(lockWait) || lockWait < 1) throw new ConfigError('lockWaitTimeoutSeconds must be a positive integer');

  // The pool's own keys stay out of the per-connection options (mysql2 warns about keys a Connection does not know).
  const { connectionLimit: _limit, maxIdle: _maxIdle, idleTimeout, queueLimit: _queue, waitForConnections: _wait, ...connectionOnly } = options.mysql2 ?? {};
  const connection: ConnectionOptions = {
    ...connectionOnly,
    ...(options.host !== undefined ? { host: options.host } : {}),
    ...(options.port !== undefined ? { port: options.port } : {}),
    ...(options.user !== undefined ? { user: options.user } : {}),
    ...(options.password !== undefined ? { password: options.password } : {}),
    ...(options.database !== undefined ? { database: options.database } : {}),
    connectTimeout,
    enableKeepAlive: true,
    keepAliveInitialDelay: SERVER_CONNECTION.keepAliveDelayMs,
    // Ids and counts come back as numbers when they fit a double, as decimal strings otherwise.
    supportBigNumbers: true,
    bigNumberStrings: false,
    // DATETIME values are UTC (the session zone below) and come back as Date objects of that instant.
    timezone: 'Z',
    dateStrings: false,
    charset: 'utf8mb4',
    // The native claim sends its statements in two packets (mysql-pipeline.ts); every value is bound and every
    // identifier validated and quoted, so this adds no way for input to add a statement. `mysql2: {
    // multipleStatements: false }` turns it off (the claim then takes one round trip per statement).
    multipleStatements: options.mysql2?.multipleStatements !== false,
  };
  const pool = mysql.createPool({ ...connection, ...(idleTimeout !== undefined && { idleTimeout }), connectionLimit: maxConnections, maxIdle: maxConnections, waitForConnections: true });
  // autocommit = 1: a server may turn it off for the account (init_connect = 'SET autocommit=0', which runs
  // for every account without SUPER), and then each of statusq's single statements would open a transaction
  // that nothing commits: claims and settles invisible to other sessions, their row locks held until the
  // connection's next START TRANSACTION. Measured on MariaDB 10.11 with that init_connect and without this:
  // the conditional-update race (8 workers, 1,500 jobs) never drained (timed out after 150 s); the native
  // race drained only because each claim's START TRANSACTION commits what the connection left open.
  // group_concat_max_len at least 1 MiB: MariaDB cuts JSON_ARRAYAGG at it, and the one-packet claim's id list
  // (mysqlClaimIdsOnServer: up to 10,000 ids of up to 20 digits, about 210 KB) cut short still parses, as fewer
  // ids and a last one truncated to another row's. MariaDB's default is 1 MiB, MySQL's 1,024 bytes (MySQL does
  // not cut JSON_ARRAYAGG).
  // Every connection's set-up, as it stands when the connection opens: the probe's connection decides the
  // binary log plan and completes the list before any other connection exists (see below).
  const setup: string[] = [
    `SET time_zone = '+00:00', SESSION innodb_lock_wait_timeout = ${lockWait}, autocommit = 1, SESSION group_concat_max_len = GREATEST(@@session.group_concat_max_len, ${MIN_GROUP_CONCAT_BYTES})`,
    isolationSql(isolation),
  ];
  const errors: unknown[] = [];
  const sockets = new Set<Socket>();
  const track = (socket: Socket | undefined): void => {
    if (!socket) return;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  // Runs before any command a caller sends on a new connection: mysql2 queues commands per connection.
  pool.pool.on('connection', (connection: CorePoolConnection) => {
    track(socketOf(connection));
    for (const sql of setup) {
      connection.query(sql, (error: unknown) => {
        if (!error) return;
        errors.push(error);
        // A session without UTC, the isolation level or the binlog format must not run statusq's SQL: drop
        // it, so the caller meets ConnectionLost and its retry gets a fresh connection.
        connection.destroy();
      });
    }
  });
  let opened: { server: MysqlServerInfo; settings: MysqlServerSettings; binlog: MysqlBinlogPlan };
  try {
    // The probe holds its connection until the plan is complete, so it is the pool's only connection until
    // then, and every later one opens with the final set-up.
    const probeMs = connectTimeout + 2 * deadlines.queryTimeoutMs;
    opened = await raceDeadline(
      (async () => {
        const conn = await pool.getConnection();
        try {
          const [rows] = await conn.query(SERVER_PROBE_SQL);
          const probe = (rows as Row[])[0] ?? {};
          const server = parseServerVersion(String(probe.version ?? ''));
          const tooOld = unsupportedVersion(server);
          if (tooOld !== null) {
            throw new StoreError('Unsupported', tooOld, 'SERVER_VERSION', { check: { name: 'version', status: 'fail', detail: tooOld, fix: upgradeFix(server) } });
          }
          const settings = readServerSettings(probe);
          const binlog = await planBinlog(
            {
              flavor: server.flavor,
              logBin: settings.logBin,
              binlogFormat: settings.binlogFormat,
              isolation,
              binlogFallback,
              conditionalUpdateAnyway: options.claimStrategy === 'conditional-update' || !server.skipLocked,
            },
            { query: (sql) => conn.query(sql) },
          );
          if (binlog.mode === 'session-row') setup.push(SESSION_ROW_SQL);
          setup[1] = isolationSql(binlog.isolation);
          return { server, settings, binlog };
        } finally {
          conn.release();
        }
      })(),
      probeMs,
      () => deadlineError(probeMs),
    );
  } catch (error) {
    await endPool(pool, sockets);
    throw toStoreError(errors[0] ?? error);
  }
  if (errors.length > 0) {
    await endPool(pool, sockets);
    throw toStoreError(errors[0]);
  }
  /** A connection of its own, outside the pool, set up like the pool's (the idle probe's; see mysql-idle-probe.ts). */
  const openConnection = async (extraSetup: readonly string[] = []): Promise<Connection> => {
    const conn = await mysql.createConnection(connection);
    track(coreSocketOf(conn));
    try {
      for (const sql of [...setup, ...extraSetup]) await conn.query(sql);
    } catch (error) {
      conn.destroy();
      throw error;
    }
    return conn;
  };
  return { pool, sockets, deadlines, openConnection, ...opened };
}

/** The least group_concat_max_len statusq's sessions run with (see the set-up above). */
const MIN_GROUP_CONCAT_BYTES = 1024 * 1024;

function isolationSql(isolation: MysqlIsolation): string {
  return `SET SESSION TRANSACTION ISOLATION LEVEL ${isolation === 'read-committed' ? 'READ COMMITTED' : 'REPEATABLE READ'}`;
}

export function deadlineError(ms: number): StoreError {
  return new StoreError('ConnectionLost', `MySQL did not answer within ${ms} ms (queryTimeout); the connection was dropped`, 'QUERY_TIMEOUT');
}

/** mysql2 keeps a connection's socket on `stream`, which its typings do not declare. */
export function socketOf(connection: unknown): Socket | undefined {
  const stream = (connection as { stream?: unknown }).stream;
  return stream instanceof Socket ? stream : undefined;
}

/** The socket under a mysql2/promise connection (its typings omit the core connection it wraps). */
export function coreSocketOf(conn: Connection): Socket | undefined {
  return socketOf((conn as unknown as { connection?: unknown }).connection);
}

/** Ends the pool politely (COM_QUIT on each connection; the sockets close when the server answers), bounded. */
export function endPool(pool: Pool, sockets: Set<Socket>): Promise<void> {
  return endWithin(pool.end(), sockets, SERVER_CONNECTION.closeGraceMs);
}
