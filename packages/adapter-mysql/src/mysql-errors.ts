import { StoreError } from '@statusq/core/adapter';

/**
 * The one place mysql2's native errors become StoreError kinds. The native code is kept: the server's
 * errno (1213, 1062, ...) when there is one, else mysql2's or Node's code (PROTOCOL_CONNECTION_LOST,
 * ECONNRESET, ...).
 *
 * - 1213 ER_LOCK_DEADLOCK and 1205 ER_LOCK_WAIT_TIMEOUT: the transaction (or statement) was rolled back;
 *   WriteConflict, which the worker retries with backoff. On a MariaDB Galera cluster 1213 is also a
 *   transaction that lost certification at COMMIT (another node committed a write to the same row first) or
 *   was brute-force aborted by a replicated write or DDL: rolled back whole as well, so the same retry is right.
 * - 1047 ER_UNKNOWN_COM_ERROR with a WSREP message ("WSREP has not yet prepared node for application use"): a
 *   Galera node that is not in the primary component (cut off from the others, or still joining) refuses
 *   every statement but SET and SHOW before running it. ConnectionLost: that connection is dropped and the
 *   call retried on a fresh one, which a load balancer in front of the cluster sends to a node that serves.
 * - A connection that is gone (killed, server restarted, network dropped, idle timeout): ConnectionLost;
 *   the store drops that connection and the next call takes a fresh one.
 * - 1062 ER_DUP_ENTRY (and 1586 ER_DUP_ENTRY_WITH_KEY_NAME): UniqueViolation.
 * - 1665 ER_BINLOG_STMT_MODE_AND_ROW_ENGINE (statement-based binary log, a READ COMMITTED write): Unsupported,
 *   never retried. The store decides at open how to run on such a server (mysql-binlog.ts), so on its own
 *   connections this means the setting changed under it (SET GLOBAL binlog_format before a new pooled
 *   connection); on an application's connection (enqueue's `transaction`), that the application's session
 *   runs READ COMMITTED there.

 * - A server that refuses writes: ReadOnly, which the worker waits out for a bounded time (a failover) and
 *   then reports. 1290 ER_OPTION_PREVENTS_STATEMENT when the option it names is --read-only or
 *   --super-read-only (MySQL; 1290 also names --secure-file-priv and others, which are not read-only);
 *   1836 ER_READ_ONLY_MODE (MySQL, InnoDB in read-only mode); 1792 ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
 *   (MySQL: a read-only transaction, `transaction_read_only`). MariaDB 10.11 has no super_read_only; with
 *   read_only ON it answers 1290 "running with the --read-only option" to every write and every SELECT ...
 *   FOR UPDATE of an account without READ_ONLY ADMIN, inside a READ ONLY transaction too (measured on
 *   10.11.19); an account with it (root, ALL ON *.*) writes as before.
 */
const WRITE_CONFLICT = new Set([1213, 1205]);
const UNIQUE_VIOLATION = new Set([1062, 1586]);
const READ_ONLY = new Set([1836, 1792]);
/** The option 1290 names, when it is one that makes the server read-only. */
const READ_ONLY_OPTION = /read[-_]only/i;
/**
 * 2006 server gone away, 2013 lost connection during query, 4031 disconnected by the server for
 * inactivity (MySQL 8), 1927 connection killed (MariaDB), 1053 server shutdown in progress, 2055 lost
 * connection at a system error, 1152/1184 aborted connection, 3169 session killed (MySQL 8).
 */
const CONNECTION_LOST_ERRNO = new Set([2006, 2013, 4031, 1927, 1053, 2055, 1152, 1184, 3169, 1153]);
/**
 * Server settings that refuse a statement whatever is retried (StoreError Unsupported, never retried), with the fix:
 * 1153 ER_NET_PACKET_TOO_LARGE (the server then closes the connection, hence also in CONNECTION_LOST_ERRNO);
 * 1173 ER_REQUIRES_PRIMARY_KEY (MariaDB's innodb_force_primary_key) and 3750 ER_TABLE_WITHOUT_PK (MySQL 8's
 * sql_require_primary_key) on a table without a primary key.
 */
const UNSUPPORTED = new Map<number, string>([
  [1153, 'the statement is larger than the server\'s max_allowed_packet; SET GLOBAL max_allowed_packet = 64M (and in the server\'s configuration)'],
  [1173, 'the server requires a primary key on every table (innodb_force_primary_key); give the table a PRIMARY KEY (its id column)'],
  [3750, 'the server requires a primary key on every table (sql_require_primary_key); give the table a PRIMARY KEY (its id column)'],
  [
    1665,
    "the server refused a write to its statement-based binary log; statusq's own sessions are set up for the server's binlog_format when the store opens, " +
      "so it changed since: open the store again; an application's own connection, in enqueue's `transaction`, needs REPEATABLE READ or " +
      "SET SESSION binlog_format = 'ROW' there; or SET GLOBAL binlog_format = 'ROW'",
  ],
]);
/** Galera's refusal on a node outside the primary component (1047, see above); 1047 is otherwise an unknown protocol command. */
const ER_UNKNOWN_COM_ERROR = 1047;
const WSREP_NOT_READY = /WSREP/;
const CONNECTION_LOST_CODES = new Set([
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR',
  'PROTOCOL_ENQUEUE_AFTER_QUIT',
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ER_CONNECTION_KILLED',
  'ER_CLIENT_INTERACTION_TIMEOUT',
  'ER_SERVER_SHUTDOWN',
]);

interface NativeError {
  errno?: unknown;
  code?: unknown;
  fatal?: unknown;
  sqlMessage?: unknown;
}

/** Whether a native error means the connection it happened on is unusable (drop it, do not reuse it). */
export function isConnectionLost(error: unknown): boolean {
  if (error instanceof StoreError) return error.kind === 'ConnectionLost';
  if (typeof error !== 'object' || error === null) return false;
  const e = error as NativeError;
  if (typeof e.errno === 'number' && CONNECTION_LOST_ERRNO.has(e.errno)) return true;
  if (typeof e.code === 'string' && CONNECTION_LOST_CODES.has(e.code)) return true;
  if (e.errno === ER_UNKNOWN_COM_ERROR && typeof e.sqlMessage === 'string' && WSREP_NOT_READY.test(e.sqlMessage)) return true;
  // mysql2 marks errors after which the connection cannot continue as fatal, including
  // "Can't add new command when connection is in closed state".
  return e.fatal === true;
}

export function toStoreError(error: unknown): unknown {
  if (error instanceof StoreError) return error;
  if (typeof error !== 'object' || error === null) return error;
  const e = error as NativeError;
  // Server errors carry a positive errno (1213, ...); Node's socket errors a negative one (-111), for which
  // the code (ECONNREFUSED) says more.
  const errno = typeof e.errno === 'number' && e.errno > 0 ? e.errno : undefined;
  const code = typeof e.code === 'string' ? e.code : undefined;
  const native = errno ?? code;
  const message = typeof e.sqlMessage === 'string' ? e.sqlMessage : error instanceof Error ? error.message : String(error);
  // Before the lost-connection check: the server closes the connection after 1153, but the same statement
  // would be refused again on any other.
  const unsupported = errno === undefined ? undefined : UNSUPPORTED.get(errno);
  if (unsupported) return new StoreError('Unsupported', `${message}: ${unsupported}`, errno, { cause: error });
  if (errno !== undefined && WRITE_CONFLICT.has(errno)) {
    return new StoreError('WriteConflict', `${errno === 1213 ? 'deadlock' : 'lock wait timeout'}: ${message}`, errno, { cause: error });
  }
  if (errno !== undefined && UNIQUE_VIOLATION.has(errno)) return new StoreError('UniqueViolation', `unique constraint violated: ${message}`, errno, { cause: error });
  if (errno !== undefined && (READ_ONLY.has(errno) || (errno === 1290 && READ_ONLY_OPTION.test(message)))) {
    return new StoreError('ReadOnly', `the MySQL server is read-only (a replica, or a failover in progress; check its read_only and super_read_only): ${message}`, errno, { cause: error });
  }
  if (isConnectionLost(error)) return new StoreError('ConnectionLost', `MySQL connection lost: ${message}`, native, { cause: error });
  if (errno !== undefined || (code !== undefined && (code.startsWith('ER_') || code.startsWith('PROTOCOL_')))) {
    return new StoreError('Unknown', `MySQL error: ${message}`, native, { cause: error });
  }
  return error;
}

/**
 * Whether an error (native or mapped) is the server refusing writes. The store drops the connection it met
 * this on rather than pooling it: after a failover that moved the writer (Aurora's cluster endpoint, a DNS
 * switch, a VIP), a pooled connection stays on the demoted node, and only a new one reaches the new primary.
 */
export function isReadOnlyRefusal(error: unknown): boolean {
  const mapped = toStoreError(error);
  return mapped instanceof StoreError && mapped.kind === 'ReadOnly';
}

/** Whether an error (native or already mapped) is a deadlock, for the store's counter. */
export function isDeadlock(error: unknown): boolean {
  if (error instanceof StoreError) return error.nativeCode === 1213;
  return typeof error === 'object' && error !== null && (error as NativeError).errno === 1213;
}

export function isLockWaitTimeout(error: unknown): boolean {
  if (error instanceof StoreError) return error.nativeCode === 1205;
  return typeof error === 'object' && error !== null && (error as NativeError).errno === 1205;
}
