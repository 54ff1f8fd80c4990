import { ConfigError, deadlinesFromUrl, parseServerUrl, poolFromUrl, refuseUnknownUrlParameters, type ClaimStrategy, type AdapterModule, type ConnectOptions } from '@statusq/core/adapter';
import type { MysqlBinlogFallback, MysqlIsolation, MysqlStoreOptions } from './mysql-options.js';
import { MysqlStore } from './mysql-store.js';

export { MysqlStore, type MysqlStoreStats } from './mysql-store.js';
export { bindValue } from './mysql-results.js';
export { parseServerVersion, type MysqlServerInfo, type MysqlServerSettings } from './mysql-pool.js';
export type { MysqlBinlogMode, MysqlBinlogPlan } from './mysql-binlog.js';
export type { MysqlBinlogFallback, MysqlIsolation, MysqlStoreOptions } from './mysql-options.js';
export { mysqlDialect, mysqlOrderTimeEncoding } from './mysql-dialect.js';
export { toStoreError, isConnectionLost } from './mysql-errors.js';
export { mysqlNativeClaim } from './mysql-claim-sql.js';

/** The URL schemes this adapter serves. */
export const schemes: readonly string[] = ['mysql', 'mariadb'];

/**
 * Parses `mysql://user:password@host:port/database` (or `mariadb://...`). Query parameters set adapter
 * options: `claimStrategy` (native | conditional-update), `maxConnections`, `isolation`
 * (read-committed | repeatable-read), `binlogFallback` (refuse | conditional-update: what to do on a server
 * logging by statement where this account may not switch to ROW), `lockWaitTimeout` (seconds), `idleProbeMs`
 * (0 turns the idle probe off), `claimGate` (claims of one table at once; 0: no gate), and the deadlines `connectTimeout`,
 * `queryTimeout` and `schemaTimeout` (ms; see MysqlStoreOptions). The old names (`connectionLimit`,
 * `claimStrategy=auto|skip-locked`) are refused, naming the new one.
 */
/** This adapter's own URL parameters (the pool's and the deadlines' come from core); mysql2 is given none. */
const MYSQL_URL_PARAMETERS = ['claimStrategy', 'isolation', 'binlogFallback', 'idleProbeMs', 'lockWaitTimeout', 'claimGate'];

export function optionsFromUrl(url: string): MysqlStoreOptions {
  const parsed = parseServerUrl(url, 'use mysql://user:password@host:port/database');
  const scheme = parsed.protocol.replace(/:$/, '').toLowerCase();
  if (!schemes.includes(scheme)) throw new ConfigError(`not a MySQL URL: scheme ${JSON.stringify(scheme)} (use mysql://user:password@host:port/database)`);
  const host = decodeURIComponent(parsed.hostname.replace(/^\[|\]$/g, '')) || 'localhost';
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
  if (database.length === 0 || database.includes('/')) throw new ConfigError('a MySQL URL names one database: mysql://user@host:port/database');
  const options: MysqlStoreOptions = { host, database, user: decodeURIComponent(parsed.username) || 'root' };
  if (parsed.port) options.port = Number(parsed.port);
  if (parsed.password) options.password = decodeURIComponent(parsed.password);
  const integer = (key: string, least: 0 | 1 = 1): number | undefined => {
    const raw = parsed.searchParams.get(key);
    if (raw === null) return undefined;
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isSafeInteger(n) || n < least) {
      throw new ConfigError(`${key} in the MySQL URL must be a ${least === 1 ? 'positive integer' : 'whole number, 0 or more'}, got ${JSON.stringify(raw)}`);
    }
    return n;
  };
  refuseUnknownUrlParameters(parsed.searchParams, MYSQL_URL_PARAMETERS, 'the MySQL URL');
  const strategy = parsed.searchParams.get('claimStrategy');
  if (strategy !== null) options.claimStrategy = strategy as ClaimStrategy;
  const isolation = parsed.searchParams.get('isolation');
  if (isolation !== null) options.isolation = isolation as MysqlIsolation;
  const fallback = parsed.searchParams.get('binlogFallback');
  if (fallback !== null) options.binlogFallback = fallback as MysqlBinlogFallback;
  // 0 turns the probe off; the upper bound is the store's (idleProbeOption).
  const idleProbe = integer('idleProbeMs', 0);
  if (idleProbe !== undefined) options.idleProbeMs = idleProbe;
  const claimGate = integer('claimGate', 0);
  if (claimGate !== undefined) options.claimGate = claimGate;
  const lockWait = integer('lockWaitTimeout');
  if (lockWait !== undefined) options.lockWaitTimeoutSeconds = lockWait;
  return { ...options, ...poolFromUrl(parsed.searchParams, 'the MySQL URL'), ...deadlinesFromUrl(parsed.searchParams, 'the MySQL URL') };
}

/** Opens a store from a `mysql://` or `mariadb://` URL; `options` override what the URL says. */
export async function connect(url: string, options: ConnectOptions & MysqlStoreOptions = {}): Promise<MysqlStore> {
  // Servers ignore `create`: the database must exist (statusq creates tables, not databases).
  const { create: _create, listenUrl, ...rest } = options;
  if (listenUrl !== undefined) throw new ConfigError('listenUrl (--listen-db) is the URL of a PostgreSQL listening connection; MySQL has none (idle workers probe the table through the store\'s own URL)');
  return MysqlStore.open({ ...optionsFromUrl(url), ...rest });
}

/**
 * The package as the CLI and other loaders see it (by URL scheme); `satisfies` makes a change of the contract
 * fail this adapter's build.
 */
export default { schemes, connect } satisfies AdapterModule;
