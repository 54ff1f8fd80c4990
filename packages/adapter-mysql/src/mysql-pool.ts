import { Socket } from 'node:net';
import mysql from 'mysql2/promise';
import type { Pool } from 'mysql2/promise';
import type { PoolConnection as CorePoolConnection } from 'mysql2';
import { ConfigError, SERVER_CONNECTION, StoreError, endWithin, serverConnectionOptions, raceDeadline, type Row, type StoreCallDeadlines } from '@statusq/core/adapter';
import { SESSION_ROW_SQL, planBinlog, type MysqlBinlogPlan } from './mysql-binlog.js';
import { toStoreError } from './mysql-errors.js';
import { binlogFallbackOption, type MysqlIsolation, type MysqlStoreOptions } from './mysql-options.js';

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

/** A pool whose sessions are set up for statusq, with what MysqlStore needs to run and close it. */
export interface OpenedMysqlPool {
  pool: Pool;
  /** The sockets of every connection the pool has open, until they close. */
  sockets: Set<Socket>;
  deadlines: StoreCallDeadlines;
  server: MysqlServerInfo;
  settings: MysqlServerSettings;
  /** How statusq's writes reach the server's binary log, and the isolation its sessions run at (mysql-binlog.ts). */
  binlog: MysqlBinlogPlan;
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
 * Opens the pool, checks the server is reachable and detects its flavor, version and settings. Every pooled
 * connection runs with time_zone '+00:00', statusq's lock wait timeout and (by default) READ COMMITTED; on a
 * server that logs by statement, also binlog_format ROW, or REPEATABLE READ instead (mysql-binlog.ts).
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
    keepAliveInitialDelay: SERVER_CONNECTION.keepAliveDelayMs,
    // Ids and counts come back as numbers when they fit a double, as decimal strings otherwise.
    supportBigNumbers: true,
    bigNumberStrings: false,
    // DATETIME values are UTC (the session zone below) and come back as Date objects of that instant.
    timezone: 'Z',
    dateStrings: false,
    charset: 'utf8mb4',
    multipleStatements: false,
  });
  // Every connection's set-up, as it stands when the connection opens: the probe's connection decides the
  // binary log plan and completes the list before any other connection exists (see below).
  const setup: string[] = [`SET time_zone = '+00:00', SESSION innodb_lock_wait_timeout = ${lockWait}`, isolationSql(isolation)];
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
        // A session without UTC, the isolation level or the binlog format must not run statusq's SQL: drop
        // it, so the caller meets ConnectionLost and its retry gets a fresh connection.
        connection.destroy();
      });
    }
  });
  let opened: { probe: Row; binlog: MysqlBinlogPlan };
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
          return { probe, binlog };
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
  const { probe, binlog } = opened;
  return { pool, sockets, deadlines, server: parseServerVersion(String(probe.version ?? '')), settings: readServerSettings(probe), binlog };
}

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

/** Ends the pool politely (COM_QUIT on each connection; the sockets close when the server answers), bounded. */
export function endPool(pool: Pool, sockets: Set<Socket>): Promise<void> {
  return endWithin(pool.end(), sockets, SERVER_CONNECTION.closeGraceMs);
}
