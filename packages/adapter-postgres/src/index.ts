import { ConfigError, type ConnectOptions } from '@statusq/core';
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
  if (typeof url !== 'string' || !/^postgres(ql)?:\/\//i.test(url)) {
    throw new ConfigError(`not a PostgreSQL URL: ${JSON.stringify(url)} (use postgres://user:password@host:port/database)`);
  }
  const { create: _create, ...rest } = options;
  return new PostgresStore({ ...rest, connectionString: url });
}
