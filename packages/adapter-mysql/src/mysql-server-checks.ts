/**
 * `statusq doctor` on MySQL/MariaDB: the server settings that decide whether statusq runs safely there
 * (issue 18), judged from what the store read at open (MysqlServerSettings) and, where that is not enough,
 * one more look at the server. One function a setting, so each states its reasoning and its fix.
 */
import type { Row, ServerCheck, StatementRunner } from '@statusq/core/adapter';
import { mysqlTextLimit } from './mysql-catalog.js';
import { SUGGESTED_MAX_ALLOWED_PACKET, mysqlStatementLimit, upgradeFix, type MysqlServerInfo, type MysqlServerSettings } from './mysql-pool.js';
import type { MysqlBinlogPlan } from './mysql-binlog.js';
import { GATE_WAIT_SECONDS, type MysqlClaimGate } from './mysql-claim-gate.js';

export interface MysqlServerCheckInput {
  server: MysqlServerInfo;
  settings: MysqlServerSettings;
  /** What the store decided at open for the server's binary log (mysql-binlog.ts). */
  binlog: MysqlBinlogPlan;
  /** The store's claim gate (mysql-claim-gate.ts); absent: not known (no line). */
  claimGate?: MysqlClaimGate | undefined;
  /** Whether the native claim's statements travel in multi-statement packets (mysql-pipeline.ts); absent: no line. */
  claimPipeline?: { readonly pipelineRefusal: string | null } | undefined;
  /** For the checks that need one more look at the server (through the store: statusq's own session). */
  runner?: StatementRunner | undefined;
}

/** The checks, in the order the doctor lists them. */
export async function mysqlServerChecks(input: MysqlServerCheckInput): Promise<ServerCheck[]> {
  return Promise.all([versionCheck(input), binlogCheck(input), maxAllowedPacketCheck(input), lockWaitTimeoutCheck(input), primaryKeyCheck(input), lowerCaseTableNamesCheck(input), autocommitCheck(input), readOnlyCheck(input), ...claimGateCheck(input), ...claimRoundTripsCheck(input)]);
}

/** One row of a look at the server, or null when there is no runner or the look failed (the check then says what it can without it). */
async function look(input: MysqlServerCheckInput, sql: string): Promise<Row | null> {
  if (!input.runner) return null;
  try {
    return (await input.runner.execute({ sql, params: [] })).rows[0] ?? null;
  } catch {
    return null;
  }
}

/**
 * Below this the doctor warns: payloads and results of more than about half of it are refused. Never a
 * failure: measured on MariaDB 10.11 at its minimum (max_allowed_packet and net_buffer_length 1 KB), init,
 * enqueue and a 50-slot worker draining 500 jobs (with and without aging) ran, and the conformance race passes
 * there (mysql.server-settings.test.ts).
 */
export const PACKET_WARN_BELOW = 1024 * 1024;
/**
 * max_allowed_packet bounds every statement statusq sends. Claims and grouped completions split their id
 * lists to fit (Store.statementLimit), so a small packet costs round trips, not correctness; but a payload,
 * result or error message goes inside one statement (escaped: up to twice its size), so values above about
 * half the packet are refused at enqueue (ConfigError) or fail their job (the reason in last_error).
 */
export function maxAllowedPacketCheck({ settings }: MysqlServerCheckInput): ServerCheck {
  const packet = settings.maxAllowedPacket;
  const values = mysqlTextLimit('longtext', null, Number.MAX_SAFE_INTEGER, packet)?.bytes ?? 0;
  const fix = mysqlStatementLimit(packet).fix;
  if (packet < PACKET_WARN_BELOW) {
    return {
      name: 'max_allowed_packet',
      status: 'warn',
      detail: `${packet} bytes: payloads and results above ${values} bytes are refused (enqueue: ConfigError; a handler's result: the job fails with the reason), and claims and grouped completions are split into statements of at most ${packet} bytes`,
      fix,
    };
  }
  return { name: 'max_allowed_packet', status: 'pass', detail: `${packet} bytes: payloads and results up to ${values} bytes (${SUGGESTED_MAX_ALLOWED_PACKET} suggested)` };
}

/**
 * statusq sets its own lock wait timeout on every session (lockWaitTimeoutSeconds, default 10), so the
 * server's default, even 1 s, changes nothing; said here so an operator comparing the two is not surprised.
 */
async function lockWaitTimeoutCheck(input: MysqlServerCheckInput): Promise<ServerCheck> {
  const row = await look(input, 'SELECT @@global.innodb_lock_wait_timeout AS server, @@session.innodb_lock_wait_timeout AS session');
  if (!row) return { name: 'innodb_lock_wait_timeout', status: 'pass', detail: "statusq's sessions set their own (lockWaitTimeoutSeconds, default 10 s)" };
  return {
    name: 'innodb_lock_wait_timeout',
    status: 'pass',
    detail: `server default ${Number(row.server)} s; statusq's sessions use ${Number(row.session)} s (lockWaitTimeoutSeconds)`,
  };
}

/**
 * MySQL 8.0.13+'s sql_require_primary_key and MariaDB's innodb_force_primary_key refuse a table without a
 * primary key, and (MySQL) an ALTER of one. Every table statusq creates has one; migrating an application's
 * table without one is refused (StoreError Unsupported). SHOW VARIABLES, since each server lacks the other's variable.
 */
async function primaryKeyCheck(input: MysqlServerCheckInput): Promise<ServerCheck> {
  if (!input.runner) return { name: 'primary_key_required', status: 'pass', detail: 'every table statusq creates has a primary key' };
  let rows: Row[];
  try {
    rows = (await input.runner.execute({ sql: "SHOW VARIABLES WHERE Variable_name IN ('sql_require_primary_key', 'innodb_force_primary_key')", params: [] })).rows;
  } catch {
    rows = [];
  }
  const on = rows.filter((r) => /^(on|1)$/i.test(String(r.Value ?? r.value ?? ''))).map((r) => String(r.Variable_name ?? r.variable_name));
  if (on.length === 0) return { name: 'primary_key_required', status: 'pass', detail: 'not required by the server; every table statusq creates has one all the same' };
  // MariaDB's variable checks CREATE TABLE only (measured: migrate's ALTERs of a table without one run);
  // MySQL's also refuses ALTER TABLE and CREATE INDEX on such a table.
  const alters = on.includes('sql_require_primary_key')
    ? 'migrate refuses an application table without one until it has a PRIMARY KEY'
    : 'an application table without one can still be migrated';
  return { name: 'primary_key_required', status: 'pass', detail: `${on.join(', ')} = ON: every table statusq creates has a primary key; ${alters}` };
}

/** How the server compares table names decides whether `Jobs` and `jobs` are the same table: information only. */
export function lowerCaseTableNamesCheck({ settings }: MysqlServerCheckInput): ServerCheck {
  const meaning: Record<number, string> = {
    0: 'table names are stored and compared as written: configure the table name exactly as it was created',
    1: 'table names are stored in lower case and compared without case: `Jobs` and `jobs` name the same table',
    2: 'table names are stored as written and compared in lower case: `Jobs` and `jobs` name the same table',
  };
  const n = settings.lowerCaseTableNames;
  return { name: 'lower_case_table_names', status: 'pass', detail: `${n}: ${meaning[n] ?? 'unknown value'}` };
}

/**
 * statusq's sessions turn autocommit on (mysql-pool.ts), whatever init_connect or the server's default says;
 * `settings.autocommit` is the session's after that. The server's own setting matters to the application's
 * other code on the same account.
 */
async function autocommitCheck(input: MysqlServerCheckInput): Promise<ServerCheck> {
  const { settings } = input;
  if (!settings.autocommit) {
    return { name: 'autocommit', status: 'fail', detail: "statusq's session runs with autocommit off although its set-up turned it on: its writes would not commit", fix: 'SET GLOBAL autocommit = 1, and remove SET autocommit=0 from init_connect' };
  }
  const row = await look(input, 'SELECT @@global.autocommit AS server, @@global.init_connect AS init');
  const off = row !== null && (Number(row.server) === 0 || /autocommit\s*=\s*(0|off)/i.test(String(row.init ?? '')));
  if (!off) return { name: 'autocommit', status: 'pass', detail: 'on' };
  return {
    name: 'autocommit',
    status: 'pass',
    detail: `the server turns autocommit off (${Number(row.server) === 0 ? 'autocommit = 0' : `init_connect = ${JSON.stringify(String(row.init))}`}); statusq turns it back on in each of its own sessions`,
  };
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

/**
 * Whether the native claims pass the claim gate (mysql-claim-gate.ts). Warn: asked for, but the server refused
 * GET_LOCK, so many claimers of a table contend unchecked. No line for a store without the native claim.
 */
function claimGateCheck({ claimGate }: MysqlServerCheckInput): ServerCheck[] {
  if (claimGate === undefined) return [];
  if (claimGate.active) {
    return [{ name: 'claim_gate', status: 'pass', detail: `at most ${claimGate.width} claims of a table at once (GET_LOCK, waiting up to ${GATE_WAIT_SECONDS} s): many claimers do not slow each other down` }];
  }
  if (claimGate.width === 0) return [{ name: 'claim_gate', status: 'pass', detail: 'no claim gate (claimGate=0 asked for none)' }];
  return [
    {
      name: 'claim_gate',
      status: 'warn',
      detail: `claims run without the claim gate: ${claimGate.offBecause}; past a few dozen claimers of one table MariaDB's claims slow each other down (docs/benchmarks.md)`,
      fix: 'keep the claimers of one table to a few dozen, or run them where GET_LOCK is allowed (MariaDB Galera refuses it with wsrep_on)',
    },
  ];
}

/** The native claim's round trips: one or two in multi-statement packets; warn where the server or a proxy refused them. */
function claimRoundTripsCheck({ claimPipeline }: MysqlServerCheckInput): ServerCheck[] {
  if (claimPipeline === undefined) return [];
  if (claimPipeline.pipelineRefusal === null) {
    return [{ name: 'claim_round_trips', status: 'pass', detail: 'the native claim takes one round trip on a table with an integer id, two on others (its statements travel in multi-statement packets)' }];
  }
  return [
    {
      name: 'claim_round_trips',
      status: 'warn',
      detail: `multi-statement packets not used (${claimPipeline.pipelineRefusal}): each claim takes four round trips, six with the claim gate, which far from the server is most of a claim`,
      fix: "keep the workers close to the database; where the server or a proxy refused the packets, let statusq's connections send them (CLIENT_MULTI_STATEMENTS; no privilege is needed)",
    },
  ];
}

function versionCheck({ server }: MysqlServerCheckInput): ServerCheck {
  const product = server.flavor === 'mariadb' ? 'MariaDB' : 'MySQL';
  if (server.skipLocked) return { name: 'version', status: 'pass', detail: `${product} ${server.major}.${server.minor}.${server.patch}: SELECT ... FOR UPDATE SKIP LOCKED, the native batch claim` };
  return {
    name: 'version',
    status: 'warn',
    detail: `${product} ${server.major}.${server.minor}.${server.patch} has no SKIP LOCKED: workers use the conditional-update claim`,
    fix: upgradeFix(server, true),
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
