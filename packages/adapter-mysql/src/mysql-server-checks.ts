/**
 * `statusq doctor` on MySQL/MariaDB: the server settings that decide whether statusq runs safely there
 * (issue 18), judged from what the store read at open (MysqlServerSettings) and, where that is not enough,
 * one more look at the server. One function a setting, so each states its reasoning and its fix.
 */
import type { ServerCheck } from '@statusq/core/adapter';
import type { MysqlServerInfo, MysqlServerSettings } from './mysql-pool.js';

export interface MysqlServerCheckInput {
  server: MysqlServerInfo;
  settings: MysqlServerSettings;
}

/** The checks, in the order the doctor lists them. */
export function mysqlServerChecks(input: MysqlServerCheckInput): ServerCheck[] {
  return [versionCheck(input), readOnlyCheck(input)];
}

/**
 * read_only (and MySQL's super_read_only, which forces read_only on): the server refuses writes from every
 * account without SUPER / CONNECTION_ADMIN (MySQL) or READ_ONLY ADMIN (MariaDB 10.11, which ALL ON *.*
 * includes), so a worker cannot claim there: a replica, or a primary a failover fenced. It fails even for an
 * account that may write anyway: an application's account should not hold those privileges, and a replica
 * written to drifts from its primary.
 */
function readOnlyCheck({ settings }: MysqlServerCheckInput): ServerCheck {
  if (!settings.readOnly) return { name: 'read_only', status: 'pass', detail: 'read_only is OFF: the server takes writes' };
  return {
    name: 'read_only',
    status: 'fail',
    detail:
      'read_only is ON: the server refuses writes (error 1290) from every account without SUPER or READ_ONLY ADMIN, so statusq cannot claim here; ' +
      'it is a replica, or a primary a failover fenced. A worker waits --read-only-wait (default 2m) for writes, then exits 1',
    fix: 'point the URL at the primary (the writer endpoint of a cluster); on the primary itself after a failover: SET GLOBAL read_only = OFF',
  };
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
