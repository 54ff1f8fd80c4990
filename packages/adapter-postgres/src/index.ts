import { ConfigError, DEADLINE_URL_PARAMETERS, POOL_URL_PARAMETER, deadlinesFromUrl, parseServerUrl, poolFromUrl, redactUrl, refuseUnknownUrlParameters, type AdapterModule, type ConnectOptions } from '@statusq/core/adapter';
import { PostgresStore, type PostgresStoreOptions } from './postgres-store.js';

export { PostgresStore, type PostgresStoreOptions } from './postgres-store.js';
export { postgresDialect, postgresOrderTimeEncoding, notifyChannel } from './postgres-dialect.js';
export { postgresNativeClaim } from './postgres-claim-sql.js';
export { toStoreError } from './postgres-errors.js';

/** The URL schemes this adapter serves. */
export const schemes: readonly string[] = ['postgres', 'postgresql'];

/**
 * Opens a store from a `postgres://user:password@host:port/database` URL (`postgresql://` too). No
 * connection is made until the first call; `create` is ignored (the database must exist). The query
 * parameters `maxConnections` (pool size) and `connectTimeout`, `queryTimeout` and `schemaTimeout` (ms) set
 * those PostgresStoreOptions; pg's own (sslmode, application_name, options, ...) go to pg as they are, and any
 * other is a ConfigError. `options` override what the URL says.
 * `listenUrl` is checked the same way; statusq's own parameters in it are dropped.
 */
export async function connect(url: string, options: ConnectOptions & Omit<PostgresStoreOptions, 'connectionString'> = {}): Promise<PostgresStore> {
  checkUrl(url);
  const { create: _create, listenUrl, ...rest } = options;
  if (listenUrl !== undefined) {
    try {
      checkUrl(listenUrl);
    } catch (error) {
      throw error instanceof ConfigError ? new ConfigError(`listenUrl (--listen-db): ${error.message}`) : error;
    }
  }
  const { connectionString, options: fromUrl } = splitStatusqParameters(url);
  // The listening connection runs no statement of statusq's own: its pool and deadline parameters mean nothing there.
  return new PostgresStore({ ...fromUrl, ...rest, connectionString, ...(listenUrl !== undefined && { listenUrl: splitStatusqParameters(listenUrl).connectionString }) });
}

/**
 * The parameters pg reads from a connection string (pg-connection-string and pg's ConnectionParameters, pg 8):
 * any other it would ignore.
 */
const PG_URL_PARAMETERS = [
  'host', 'port', 'user', 'password', 'database', 'db', 'encoding', 'client_encoding', 'application_name', 'fallback_application_name',
  'options', 'binary', 'replication', 'statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout', 'query_timeout',
  'ssl', 'sslmode', 'sslcert', 'sslkey', 'sslrootcert', 'sslnegotiation', 'uselibpqcompat',
];

/**
 * pg parses a URL only when it first connects, and its errors there ("Invalid URL", "URI malformed") are
 * neither ConfigErrors nor clear; check now. A socket directory may stand in for the host (?host=).
 */
function checkUrl(url: string): void {
  const usage = 'use postgres://user:password@host:port/database';
  if (typeof url !== 'string' || !/^postgres(ql)?:\/\//i.test(url)) {
    throw new ConfigError(`not a PostgreSQL URL: ${JSON.stringify(typeof url === 'string' ? redactUrl(url) : url)} (${usage})`);
  }
  const parsed = parseServerUrl(url, usage);
  if (parsed.hostname === '' && !parsed.searchParams.has('host')) {
    throw new ConfigError(`PostgreSQL URL ${JSON.stringify(redactUrl(url))} names no host: ${usage}`);
  }
  refuseUnknownUrlParameters(parsed.searchParams, PG_URL_PARAMETERS, 'the PostgreSQL URL');
}

/** The URL without statusq's own parameters (pg would take them for its own), and the options they set. */
function splitStatusqParameters(url: string): { connectionString: string; options: Partial<PostgresStoreOptions> } {
  const query = url.indexOf('?');
  if (query < 0) return { connectionString: url, options: {} };
  const params = new URLSearchParams(url.slice(query + 1));
  const options = { ...poolFromUrl(params, 'the PostgreSQL URL'), ...deadlinesFromUrl(params, 'the PostgreSQL URL') };
  if (Object.keys(options).length === 0) return { connectionString: url, options };
  for (const name of [...Object.keys(DEADLINE_URL_PARAMETERS), POOL_URL_PARAMETER]) params.delete(name);
  const rest = params.toString();
  return { connectionString: url.slice(0, query) + (rest ? `?${rest}` : ''), options };
}

/**
 * The package as the CLI and other loaders see it (by URL scheme); `satisfies` makes a change of the contract
 * fail this adapter's build.
 */
export default { schemes, connect } satisfies AdapterModule;
