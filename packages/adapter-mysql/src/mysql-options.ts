import { ConfigError, type ClaimStrategy, type ServerConnectionOptions, type StoreWarning } from '@statusq/core/adapter';
import type { PoolOptions } from 'mysql2/promise';

/** Isolation of every transaction statusq runs on its connections. */
export type MysqlIsolation = 'read-committed' | 'repeatable-read';

/**
 * What the store does on a server that writes its binary log by statement (log_bin ON, binlog_format
 * STATEMENT) when this account may not switch its own sessions to ROW (see mysql-binlog.ts):
 * `refuse` (default) fails open with StoreError Unsupported naming the setting and the fixes;
 * `conditional-update` runs the portable claim at REPEATABLE READ instead, which statement logging accepts.
 */
export type MysqlBinlogFallback = 'refuse' | 'conditional-update';

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
  /**
   * A server with log_bin ON and binlog_format STATEMENT refuses InnoDB writes at READ COMMITTED (error 1665).
   * statusq first switches its own sessions to ROW (SET SESSION binlog_format, which needs SUPER or BINLOG
   * ADMIN on MariaDB, SYSTEM_VARIABLES_ADMIN or SESSION_VARIABLES_ADMIN on MySQL); when the account may
   * not, `refuse` (default) fails open with StoreError Unsupported, and `conditional-update` runs the
   * conditional-update claim at REPEATABLE READ (slower; see mysql-claim-sql.ts for the numbers). A store
   * that runs the conditional-update claim anyway (forced, or a server without SKIP LOCKED) takes that
   * fallback without being asked: it costs it nothing. See mysql-binlog.ts.
   */
  binlogFallback?: MysqlBinlogFallback;
  /**
   * How an idle worker learns of new rows: a connection of the store's own (outside the pool) runs one
   * statement that checks on the server every `idleProbeMs` whether a row is due, sleeping in between, and
   * returns when one is (mysql-idle-probe.ts). Default 50 (a row waits at most about that long after a quiet
   * spell; the idle worker's process wakes once per 2 s round, the server's thread once per check). 0 turns
   * it off: idle workers poll with claims, backing off to the worker's pollMaxMs. URL parameter `idleProbeMs`.
   */
  idleProbeMs?: number;
  /**
   * How many native claims of one table may run at once on the server, across every process and host: each
   * claim waits (sleeping, on the server) for one of this many named locks (GET_LOCK) before it reads its
   * candidates. Default 8; 0 turns the gate off. Without it MariaDB's claims slow each other down past a few
   * dozen claimers (128 claimers: 419 jobs/s ungated, 13,026 gated; mysql-claim-gate.ts). A server that
   * refuses GET_LOCK (Galera) claims ungated and says so once. URL parameter `claimGate`.
   */
  claimGate?: number;
  /**
   * Hears what goes wrong without failing anything, once per cause: a server that refuses the claim gate's
   * GET_LOCK (code `claim-gate-refused`). Default: process.emitWarning.
   */
  onWarning?: (warning: StoreWarning) => void;
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

/** The store's binlogFallback: `refuse` unless `conditional-update` is asked for. */
export function binlogFallbackOption(value: unknown): MysqlBinlogFallback {
  if (value === undefined || value === 'refuse' || value === 'conditional-update') return value ?? 'refuse';
  throw new ConfigError(`binlogFallback must be refuse or conditional-update, got ${JSON.stringify(value)}`);
}

/** The store's idleProbeMs: DEFAULT_IDLE_PROBE_MS unless given; 0 (off) or a whole number of milliseconds up to a minute. */
export function idleProbeOption(value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > 60_000) {
    throw new ConfigError(`idleProbeMs must be a whole number of milliseconds from 0 (off) to 60000, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** More gate locks than this is no gate at all (and most likely a typo): refused at open. */
const MAX_CLAIM_GATE = 1024;

/** The store's claimGate: `fallback` (DEFAULT_CLAIM_GATE_WIDTH) unless given; 0 (no gate) or a whole number of claims at once per table. */
export function claimGateOption(value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > MAX_CLAIM_GATE) {
    throw new ConfigError(`claimGate must be a whole number of claims at once per table, from 0 (no gate) to ${MAX_CLAIM_GATE}, got ${JSON.stringify(value)}`);
  }
  return value;
}
