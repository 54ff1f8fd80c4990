import { ConfigError, parseServerUrl, redactUrl, type ConnectOptions } from '@statusq/core';
import { PostgresStore, type PostgresStoreOptions } from './postgres-store.js';

export { PostgresStore, type PostgresStoreOptions } from './postgres-store.js';
export { postgresDialect, postgresOrderTimeEncoding, notifyChannel } from './postgres-dialect.js';
export { postgresClaimStatement } from './postgres-claim-sql.js';
export { toStoreError } from './postgres-errors.js';

/** The URL schemes this adapter serves. */
export const schemes: readonly string[] = ['postgres', 'postgresql'];

/**
 * Opens a store from a `postgres://user:password@host:port/database` URL (`postgresql://` too). No
 * connection is made until the first call; `create` is ignored (the database must exist).
 */
export async function connect(url: string, options: ConnectOptions & Omit<PostgresStoreOptions, 'connectionString'> = {}): Promise<PostgresStore> {
  const usage = 'use postgres://user:password@host:port/database';
  if (typeof url !== 'string' || !/^postgres(ql)?:\/\//i.test(url)) {
    throw new ConfigError(`not a PostgreSQL URL: ${JSON.stringify(typeof url === 'string' ? redactUrl(url) : url)} (${usage})`);
  }
  // pg parses the URL only when it first connects, and its errors there ("Invalid URL", "URI malformed")
  // are neither ConfigErrors nor clear; check now. A socket directory may stand in for the host (?host=).
  const parsed = parseServerUrl(url, usage);
  if (parsed.hostname === '' && !parsed.searchParams.has('host')) {
    throw new ConfigError(`PostgreSQL URL ${JSON.stringify(redactUrl(url))} names no host: ${usage}`);
  }
  const { create: _create, ...rest } = options;
  return new PostgresStore({ ...rest, connectionString: url });
}
