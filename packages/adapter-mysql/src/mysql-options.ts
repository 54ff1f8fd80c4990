import { ConfigError, type ClaimStrategy, type ServerConnectionOptions } from '@statusq/core/adapter';
import type { PoolOptions } from 'mysql2/promise';

/** Isolation of every transaction statusq runs on its connections. */
export type MysqlIsolation = 'read-committed' | 'repeatable-read';

/** The pool and deadline options (maxConnections, connectTimeoutMs, queryTimeoutMs, schemaTimeoutMs) are every server adapter's: ServerConnectionOptions. */
export interface MysqlStoreOptions extends ServerConnectionOptions {
  host?: string;
  port?: number;
  user?: string;
  password?: string;
  database?: string;
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
  /** Any other mysql2 pool options (ssl, socketPath, ...). statusq's own settings win where they overlap. */
  mysql2?: PoolOptions;
}

/** The store's claimStrategy: `native` unless `conditional-update` is asked for; the old names are refused, naming the new one. */
export function claimStrategyOption(value: unknown): ClaimStrategy {
  if (value === undefined || value === 'native' || value === 'conditional-update') return value ?? 'native';
  if (value === 'auto' || value === 'skip-locked') throw new ConfigError(`claimStrategy ${value} was renamed native (SKIP LOCKED where the server has it, else conditional-update)`);
  throw new ConfigError(`claimStrategy must be native or conditional-update, got ${JSON.stringify(value)}`);
}
