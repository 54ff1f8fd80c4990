/**
 * How statusq runs on a server that writes its binary log by statement (issue 18): log_bin ON and
 * binlog_format STATEMENT, a common setting on older replicated servers. There InnoDB refuses every write
 * at READ COMMITTED or READ UNCOMMITTED (error 1665, "impossible to write to binary log since BINLOG_FORMAT
 * = STATEMENT ... InnoDB is limited to row-logging when transaction isolation level is READ COMMITTED"),
 * and READ COMMITTED is the isolation the native claim needs (mysql-claim-sql.ts: under REPEATABLE READ
 * the skip-locked batch claim deadlocked thousands of times with 8 workers). Decided once, at open, on the
 * probe's connection, in this order:
 *
 *   a. Switch statusq's own sessions to ROW: SET SESSION binlog_format = 'ROW' in every pooled connection's
 *      set-up. Nothing else changes: READ COMMITTED, the native claim, the same speed. The server's other
 *      clients keep logging by statement, and a replica applies a stream of both kinds. It needs SUPER or
 *      BINLOG ADMIN on MariaDB (10.5.2+; measured on 10.11: an account with neither gets error 1227 "you
 *      need (at least one of) the SUPER, BINLOG ADMIN privilege(s)"), SYSTEM_VARIABLES_ADMIN or
 *      SESSION_VARIABLES_ADMIN (or SUPER) on MySQL 8. statusq tries it rather than reading grants: the
 *      server is the one judge of its own privileges (roles, proxies, partial revokes).
 *   b. Otherwise, when allowed, keep statement logging and run what it accepts: every session at
 *      REPEATABLE READ and the conditional-update claim (a plain SELECT of candidates, then one guarded
 *      UPDATE by primary key per candidate, autocommit), which takes record locks on the primary key only
 *      and whose statements are deterministic, so they replicate as statements. The skip-locked batch claim
 *      is not used there: under REPEATABLE READ it met deadlock storms on gap locks when first measured. The reasoning and the measured
 *      numbers are beside the claim's SQL (mysql-claim-sql.ts, STATEMENT_BINLOG_FALLBACK). It is slower
 *      than a, so it is never taken silently: only with `binlogFallback: 'conditional-update'` (URL
 *      `?binlogFallback=conditional-update`), or when the store runs the conditional-update claim anyway
 *      (`claimStrategy=conditional-update`, or a server without SKIP LOCKED), where it costs nothing.
 *   c. Otherwise refuse: StoreError Unsupported (never retried) naming the setting, the account and the
 *      three fixes; the CLI prints it and exits 1, and `statusq doctor` shows it as the failed `binlog` check.
 *
 * isolation=repeatable-read asked for by the user needs none of this (statement logging accepts it).
 * ROW and MIXED need nothing either: under MIXED, InnoDB at READ COMMITTED logs statusq's writes by row.
 */
import { StoreError, type ServerCheck } from '@statusq/core/adapter';
import { STATEMENT_BINLOG_FALLBACK } from './mysql-claim-sql.js';
import type { MysqlBinlogFallback, MysqlIsolation } from './mysql-options.js';

/**
 * How statusq's writes reach the binary log on this store:
 * - `off`: the server keeps no binary log (log_bin OFF);
 * - `row`, `mixed`: the server's own format, which statusq's READ COMMITTED writes pass;
 * - `session-row`: the server logs by statement, statusq's sessions by row (a);
 * - `statement`: by statement, statusq's sessions at REPEATABLE READ: the fallback (b), or the
 *   repeatable-read isolation the options asked for.
 */
export type MysqlBinlogMode = 'off' | 'row' | 'mixed' | 'session-row' | 'statement';

export interface MysqlBinlogPlan {
  mode: MysqlBinlogMode;
  /** The isolation statusq's sessions run at. */
  isolation: MysqlIsolation;
  /** Statement logging kept because the sessions could not switch (b): the claim is conditional-update. */
  fallback: boolean;
  /** The server's answer to SET SESSION binlog_format, when statusq tried and was refused. */
  refusal?: string;
}

/** Added to every pooled connection's set-up in mode `session-row`. */
export const SESSION_ROW_SQL = "SET SESSION binlog_format = 'ROW'";

export interface BinlogPlanInput {
  flavor: 'mysql' | 'mariadb';
  logBin: boolean;
  /** The probe's @@binlog_format, upper case. */
  binlogFormat: string;
  /** The isolation the options ask for. */
  isolation: MysqlIsolation;
  binlogFallback: MysqlBinlogFallback;
  /** The store runs the conditional-update claim whatever this decides (forced, or no SKIP LOCKED). */
  conditionalUpdateAnyway: boolean;
}

/** What the plan needs to do on the probe's connection. */
export interface BinlogPlanSession {
  /** Runs SQL on the probe's connection (a set-up statement, or a look at CURRENT_USER()). */
  query(sql: string): Promise<unknown>;
}

/**
 * Decides a, b or c (see the top of this file) and applies it to the probe's connection; the caller adds
 * SESSION_ROW_SQL or the plan's isolation to the set-up of every later connection. Throws the refusal (c).
 */
export async function planBinlog(input: BinlogPlanInput, session: BinlogPlanSession): Promise<MysqlBinlogPlan> {
  const { logBin, binlogFormat, isolation } = input;
  if (!logBin) return { mode: 'off', isolation, fallback: false };
  if (binlogFormat === 'ROW') return { mode: 'row', isolation, fallback: false };
  if (binlogFormat === 'MIXED') return { mode: 'mixed', isolation, fallback: false };
  if (isolation === 'repeatable-read') return { mode: 'statement', isolation, fallback: false };
  let refusal: string;
  try {
    await session.query(SESSION_ROW_SQL);
    return { mode: 'session-row', isolation, fallback: false };
  } catch (error) {
    // Only the server's own refusal (1227 access denied, or any other answer it gives) means "may not";
    // a lost connection is the open's failure, not a verdict on the account.
    if (!isServerAnswer(error)) throw error;
    refusal = serverMessage(error);
  }
  if (input.binlogFallback === 'conditional-update' || input.conditionalUpdateAnyway) {
    await session.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    return { mode: 'statement', isolation: STATEMENT_BINLOG_FALLBACK.isolation, fallback: true, refusal };
  }
  const account = await currentAccount(session);
  const check = refusalCheck(input.flavor, account, refusal);
  throw new StoreError('Unsupported', `${check.detail}. Fix: ${check.fix}`, 'BINLOG_FORMAT', { check });
}

/** The `binlog` check a refused open reports (StoreError.check), which `statusq doctor` lists as failed. */
export function refusalCheck(flavor: 'mysql' | 'mariadb', account: string, refusal: string): ServerCheck & { fix: string } {
  const privileges = flavor === 'mariadb' ? 'SUPER or BINLOG ADMIN' : 'SYSTEM_VARIABLES_ADMIN or SESSION_VARIABLES_ADMIN';
  const grant = flavor === 'mariadb' ? 'BINLOG ADMIN' : 'SESSION_VARIABLES_ADMIN';
  return {
    name: 'binlog',
    status: 'fail',
    detail:
      `the server writes its binary log by statement (log_bin ON, binlog_format STATEMENT), where InnoDB refuses writes at READ COMMITTED, ` +
      `the isolation statusq's claim runs at, and ${account} may not switch its own sessions to ROW (SET SESSION binlog_format needs ${privileges}: "${refusal}")`,
    fix:
      `SET GLOBAL binlog_format = 'ROW' on the server (and binlog_format=ROW in its option file; MIXED works too), ` +
      `or GRANT ${grant} ON *.* TO ${account}, ` +
      `or accept the slower conditional-update claim at REPEATABLE READ: add binlogFallback=conditional-update to the URL (the binlogFallback option)`,
  };
}

async function currentAccount(session: BinlogPlanSession): Promise<string> {
  try {
    const [rows] = (await session.query('SELECT CURRENT_USER() AS account')) as [Array<{ account?: unknown }>];
    const [user, host] = String(rows[0]?.account ?? '').split('@');
    if (user !== undefined && host !== undefined) return `'${user}'@'${host}'`;
  } catch {
    // The account's name only makes the message more precise.
  }
  return 'this account';
}

function isServerAnswer(error: unknown): boolean {
  const e = error as { errno?: unknown; fatal?: unknown };
  return typeof e?.errno === 'number' && e.errno > 0 && e.fatal !== true;
}

function serverMessage(error: unknown): string {
  const e = error as { errno?: unknown; sqlMessage?: unknown; message?: unknown };
  return `${String(e.errno)} ${String(e.sqlMessage ?? e.message)}`;
}
