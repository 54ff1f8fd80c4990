/**
 * `statusq doctor` on MySQL/MariaDB: the server settings that decide whether statusq runs safely there
 * (issue 18), judged from what the store read at open (MysqlServerSettings) and, where that is not enough,
 * one more look at the server. One function a setting, so each states its reasoning and its fix.
 */
import type { ServerCheck } from '@statusq/core/adapter';
import type { MysqlBinlogPlan } from './mysql-binlog.js';
import type { MysqlServerInfo, MysqlServerSettings } from './mysql-pool.js';

export interface MysqlServerCheckInput {
  server: MysqlServerInfo;
  settings: MysqlServerSettings;
  /** What the store decided at open for the server's binary log (mysql-binlog.ts). */
  binlog: MysqlBinlogPlan;
}

/** The checks, in the order the doctor lists them. */
export function mysqlServerChecks(input: MysqlServerCheckInput): ServerCheck[] {
  return [versionCheck(input), binlogCheck(input)];
}

function versionCheck({ server }: MysqlServerCheckInput): ServerCheck {
  const product = server.flavor === 'mariadb' ? 'MariaDB' : 'MySQL';
  if (server.skipLocked) return { name: 'version', status: 'pass', detail: `${product} ${server.major}.${server.minor}.${server.patch}: SELECT ... FOR UPDATE SKIP LOCKED, the native batch claim` };
  return {
    name: 'version',
    status: 'warn',
    detail: `${product} ${server.major}.${server.minor}.${server.patch} has no SKIP LOCKED: workers use the conditional-update claim`,
    fix: server.flavor === 'mariadb' ? 'MariaDB 10.6 or later' : 'MySQL 8.0.1 or later',
  };
}

/**
 * The binary log's format (mysql-binlog.ts). Pass: no binary log, ROW, MIXED, or STATEMENT with statusq's
 * sessions switched to ROW. Warn: STATEMENT kept, with the conditional-update claim at REPEATABLE READ (the
 * fallback). A store that refuses never opens: its `binlog` check (fail) comes with the refusal (StoreError.check).
 */
function binlogCheck({ binlog, settings }: MysqlServerCheckInput): ServerCheck {
  switch (binlog.mode) {
    case 'off':
      return { name: 'binlog', status: 'pass', detail: 'no binary log (log_bin OFF)' };
    case 'row':
      return { name: 'binlog', status: 'pass', detail: 'binlog_format ROW' };
    case 'mixed':
      return { name: 'binlog', status: 'pass', detail: "binlog_format MIXED: InnoDB logs statusq's READ COMMITTED writes by row" };
    case 'session-row':
      return {
        name: 'binlog',
        status: 'pass',
        detail: "binlog_format STATEMENT on the server; statusq's sessions log by row (SET SESSION binlog_format = 'ROW', which this account may): READ COMMITTED and the native claim as usual",
      };
    case 'statement':
      if (!binlog.fallback) {
        return { name: 'binlog', status: 'pass', detail: `binlog_format ${settings.binlogFormat}; statusq's sessions run REPEATABLE READ as asked (isolation=repeatable-read), which statement logging accepts` };
      }
      return {
        name: 'binlog',
        status: 'warn',
        detail:
          `binlog_format STATEMENT and this account may not switch its sessions to ROW (${binlog.refusal ?? 'refused'}): ` +
          'statusq runs its sessions at REPEATABLE READ with the conditional-update claim, which statement logging accepts (exactly-once, but slower than the native claim: see the adapter README)',
        fix: "SET GLOBAL binlog_format = 'ROW' on the server (MIXED works too), or grant this account BINLOG ADMIN (MariaDB) / SESSION_VARIABLES_ADMIN (MySQL): then the native claim at READ COMMITTED",
      };
  }
}
