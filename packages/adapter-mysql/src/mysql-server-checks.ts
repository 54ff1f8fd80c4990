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
  return [versionCheck(input)];
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
