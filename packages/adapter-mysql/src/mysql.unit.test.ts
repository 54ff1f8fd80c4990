// Pure functions of the adapter: no server needed.
import { describe, expect, it } from 'vitest';
import { StoreError } from '@statusq/core';
import type { StoreWarning } from '@statusq/core/adapter';
import type { ResolvedTable, Statement, StatementRunner } from '@statusq/core/adapter';
import { MysqlClaimGate, probeClaimGate } from './mysql-claim-gate.js';
import { planBinlog, type BinlogPlanInput } from './mysql-binlog.js';
import { isConnectionLost } from './mysql-errors.js';
import { mysqlStatementLimit, unsupportedVersion } from './mysql-pool.js';
import { maxAllowedPacketCheck } from './mysql-server-checks.js';
import { MysqlStore, bindValue, connect, mysqlDialect, mysqlOrderTimeEncoding, optionsFromUrl, parseServerVersion, toStoreError, type MysqlServerInfo, type MysqlStoreOptions } from './index.js';

const native = (errno: number | undefined, code: string, extra: Record<string, unknown> = {}) => Object.assign(new Error(code), { errno, code, ...extra });

describe('mysql adapter, without a server', () => {
  it('maps native errors to StoreError kinds and keeps the native code', () => {
    const cases: Array<[unknown, string, string | number]> = [
      [native(1213, 'ER_LOCK_DEADLOCK'), 'WriteConflict', 1213],
      [native(1205, 'ER_LOCK_WAIT_TIMEOUT'), 'WriteConflict', 1205],
      [native(1062, 'ER_DUP_ENTRY'), 'UniqueViolation', 1062],
      [native(undefined, 'PROTOCOL_CONNECTION_LOST', { fatal: true }), 'ConnectionLost', 'PROTOCOL_CONNECTION_LOST'],
      [native(undefined, 'ECONNRESET'), 'ConnectionLost', 'ECONNRESET'],
      [native(-111, 'ECONNREFUSED'), 'ConnectionLost', 'ECONNREFUSED'],
      [native(2006, 'CR_SERVER_GONE_ERROR'), 'ConnectionLost', 2006],
      [native(2013, 'CR_SERVER_LOST'), 'ConnectionLost', 2013],
      [native(4031, 'ER_CLIENT_INTERACTION_TIMEOUT'), 'ConnectionLost', 4031],
      [native(1927, 'ER_CONNECTION_KILLED'), 'ConnectionLost', 1927],
      [native(1290, 'ER_OPTION_PREVENTS_STATEMENT', { sqlMessage: 'The MariaDB server is running with the --read-only option so it cannot execute this statement' }), 'ReadOnly', 1290],
      [native(1290, 'ER_OPTION_PREVENTS_STATEMENT', { sqlMessage: 'The MySQL server is running with the --super-read-only option so it cannot execute this statement' }), 'ReadOnly', 1290],
      [native(1290, 'ER_OPTION_PREVENTS_STATEMENT', { sqlMessage: 'The MySQL server is running with the --secure-file-priv option so it cannot execute this statement' }), 'Unknown', 1290],
      [native(1836, 'ER_READ_ONLY_MODE'), 'ReadOnly', 1836],
      [native(1792, 'ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION'), 'ReadOnly', 1792],
      [native(1146, 'ER_NO_SUCH_TABLE'), 'Unknown', 1146],
      [native(1064, 'ER_PARSE_ERROR'), 'Unknown', 1064],
      [native(1665, 'ER_BINLOG_STMT_MODE_AND_ROW_ENGINE'), 'Unsupported', 1665],
      // A Galera node outside the primary component; 1047 without WSREP is an unknown protocol command.
      [native(1047, 'ER_UNKNOWN_COM_ERROR', { sqlMessage: 'WSREP has not yet prepared node for application use' }), 'ConnectionLost', 1047],
      [native(1047, 'ER_UNKNOWN_COM_ERROR', { sqlMessage: 'Unknown command' }), 'Unknown', 1047],
    ];
    for (const [error, kind, code] of cases) {
      const mapped = toStoreError(error);
      expect(mapped, String(code)).toBeInstanceOf(StoreError);
      expect((mapped as StoreError).kind, String(code)).toBe(kind);
      expect((mapped as StoreError).nativeCode, String(code)).toBe(code);
      expect((mapped as StoreError).cause).toBe(error);
    }
    const plain = new TypeError('not a database error');
    expect(toStoreError(plain)).toBe(plain);
  });

  it('spells SQL the MySQL way: backticks, ? placeholders, NOW(3) and INTERVAL arithmetic on the server clock', () => {
    expect(mysqlDialect.quoteIdentifier('app.jobs')).toBe('`app`.`jobs`');
    expect(mysqlDialect.quoteIdentifier('we`ird')).toBe('`we``ird`');
    expect(mysqlDialect.placeholder(3)).toBe('?');
    expect(mysqlDialect.now).toBe('NOW(3)');
    expect(mysqlDialect.nowPlusMs('?')).toBe('(NOW(3) + INTERVAL (?) * 1000 MICROSECOND)');
    expect(mysqlDialect.orderCutoff('?', 'native')).toBe(mysqlDialect.nowPlusMs('?'));
    expect(mysqlDialect.orderCutoff('?', 'epochMs')).toMatch(/UNIX_TIMESTAMP\(NOW\(3\)\) \* 1000/);
    expect(mysqlDialect.orderCutoff('?', 'text')).toMatch(/DATE_FORMAT/);
    expect(mysqlOrderTimeEncoding('datetime(3)')).toBe('native');
    expect(mysqlOrderTimeEncoding('timestamp')).toBe('native');
    expect(mysqlOrderTimeEncoding('bigint(20)')).toBe('epochMs');
    expect(mysqlOrderTimeEncoding('varchar(32)')).toBe('text');
  });

  it('detects SKIP LOCKED support from the server version', () => {
    expect(parseServerVersion('10.11.19-MariaDB-0+deb12u1')).toMatchObject({ flavor: 'mariadb', major: 10, minor: 11, skipLocked: true });
    expect(parseServerVersion('10.6.0-MariaDB')).toMatchObject({ skipLocked: true });
    expect(parseServerVersion('10.5.23-MariaDB-log')).toMatchObject({ flavor: 'mariadb', skipLocked: false });
    expect(parseServerVersion('8.0.36')).toMatchObject({ flavor: 'mysql', skipLocked: true });
    expect(parseServerVersion('8.0.0-dmr')).toMatchObject({ skipLocked: false });
    expect(parseServerVersion('5.7.44-log')).toMatchObject({ flavor: 'mysql', skipLocked: false });
  });

  it('detects what each server version has, and refuses servers older than statusq supports', () => {
    const cases: Array<[string, Partial<MysqlServerInfo>, boolean]> = [
      ['8.0.36', { flavor: 'mysql', skipLocked: true, jsonType: 'native', isolationVariable: 'transaction_isolation' }, true],
      ['8.4.3-commercial', { flavor: 'mysql', major: 8, minor: 4, skipLocked: true }, true],
      ['5.7.44-log', { skipLocked: false, jsonType: 'native', isolationVariable: 'transaction_isolation' }, true],
      ['5.7.19', { skipLocked: false, jsonType: 'native', isolationVariable: 'tx_isolation' }, true],
      ['5.7.6', { skipLocked: false }, false],
      ['5.6.51', { skipLocked: false, jsonType: 'none' }, false],
      ['11.4.2-MariaDB', { flavor: 'mariadb', skipLocked: true, jsonType: 'alias', isolationVariable: 'transaction_isolation' }, true],
      ['10.11.19-MariaDB-0+deb12u1', { flavor: 'mariadb', skipLocked: true, isolationVariable: 'tx_isolation' }, true],
      ['10.5.23-MariaDB-log', { flavor: 'mariadb', skipLocked: false, jsonType: 'alias' }, true],
      // MariaDB's handshake prefix, as a proxy may repeat it: not version 5.5.5.
      ['5.5.5-10.6.12-MariaDB-log', { flavor: 'mariadb', major: 10, minor: 6, patch: 12, skipLocked: true }, true],
      ['10.2.1-MariaDB', { flavor: 'mariadb', jsonType: 'none' }, false],
      ['10.1.48-MariaDB', { flavor: 'mariadb', skipLocked: false }, false],
    ];
    for (const [version, expected, supported] of cases) {
      const server = parseServerVersion(version);
      expect(server, version).toMatchObject(expected);
      if (supported) expect(unsupportedVersion(server), version).toBeNull();
      else expect(unsupportedVersion(server), version).toMatch(/older than statusq supports: it needs (MySQL 5\.7\.7|MariaDB 10\.2\.2) or later/);
    }
  });

  it('the claim gate: a server that refuses GET_LOCK turns it off for good with one warning and the claim runs ungated; a lost connection is no refusal; a failed claim still gives the lock back', async () => {
    const table = { table: 'jobs' } as ResolvedTable;
    const galera = () => native(1235, 'ER_NOT_SUPPORTED_YET', { sqlMessage: "This version of MariaDB doesn't yet support 'GET_LOCK in cluster (WSREP_ON=ON)'" });
    const runner = (answer: (statement: Statement) => unknown, sent: string[] = []): StatementRunner => ({
      execute: async (statement) => {
        sent.push(statement.sql);
        const result = answer(statement);
        if (result instanceof Error) throw result;
        return { rows: [{ held: result }], affected: 0 };
      },
    });
    const warnings: StoreWarning[] = [];
    const refused = new MysqlClaimGate(8, { claimGateTimeouts: 0 }, (warning) => warnings.push(warning));
    const sent: string[] = [];
    const refusing = runner(galera, sent);
    expect(await refused.admit(table, refusing, async () => 'claimed')).toBe('claimed');
    expect(await refused.admit(table, refusing, async () => 'claimed again')).toBe('claimed again');
    expect(sent).toHaveLength(1);
    expect(refused.active).toBe(false);
    expect(warnings.map((w) => w.code)).toEqual(['claim-gate-refused']);
    expect(warnings[0]!.message).toMatch(/GET_LOCK in cluster/);
    expect(refused.offBecause).toMatch(/^the server refused GET_LOCK/);
    // Found at open: off before the first claim.
    const probed = new MysqlClaimGate(8, { claimGateTimeouts: 0 }, () => undefined);
    await probeClaimGate(probed, async () => {
      throw galera();
    });
    expect(probed.active).toBe(false);
    // A lost connection is the claim's own failure: the gate stays on, and the error goes to the claim's retry.
    const lost = new MysqlClaimGate(8, { claimGateTimeouts: 0 }, () => undefined);
    await expect(lost.admit(table, runner(() => native(2013, 'PROTOCOL_CONNECTION_LOST', { fatal: true })), async () => 'never')).rejects.toMatchObject({ errno: 2013 });
    await expect(probeClaimGate(lost, async () => Promise.reject(native(2013, 'PROTOCOL_CONNECTION_LOST', { fatal: true })))).rejects.toMatchObject({ errno: 2013 });
    expect(lost.active).toBe(true);
    // Granted, then the claim fails: the lock is released before the error goes on; a wait past the bound is counted.
    const stats = { claimGateTimeouts: 0 };
    const granted = new MysqlClaimGate(8, stats, () => undefined);
    const statements: string[] = [];
    await expect(granted.admit(table, runner(() => 1, statements), async () => Promise.reject(new Error('deadlock')))).rejects.toThrow('deadlock');
    expect(statements.map((sql) => sql.split('(')[0])).toEqual(['SELECT GET_LOCK', 'DO RELEASE_LOCK']);
    expect(await granted.admit(table, runner(() => 0), async () => 'ungated')).toBe('ungated');
    expect(stats.claimGateTimeouts).toBe(1);
  });

  it('parses mysql:// and mariadb:// URLs with adapter options', () => {
    expect(optionsFromUrl('mysql://app:s%40cret@db.example:3307/queue?claimStrategy=conditional-update&maxConnections=8')).toEqual({
      host: 'db.example',
      port: 3307,
      user: 'app',
      password: 's@cret',
      database: 'queue',
      claimStrategy: 'conditional-update',
      maxConnections: 8,
    });
    expect(optionsFromUrl('mariadb://root@127.0.0.1/test')).toMatchObject({ host: '127.0.0.1', user: 'root', database: 'test' });
    expect(() => optionsFromUrl('mysql://root@127.0.0.1:3306/')).toThrow(/one database/);
    expect(() => optionsFromUrl('postgres://x/y')).toThrow(/not a MySQL URL/);
    expect(() => optionsFromUrl('mysql://root@h/db?maxConnections=0')).toThrow(/maxConnections in the MySQL URL must be a positive integer/);
    expect(optionsFromUrl('mysql://root@h/db?idleProbeMs=0&lockWaitTimeout=3')).toMatchObject({ idleProbeMs: 0, lockWaitTimeoutSeconds: 3 });
    for (const bad of ['-1', '', ' ', '1.5', 'soon']) {
      expect(() => optionsFromUrl(`mysql://root@h/db?idleProbeMs=${bad}`), bad).toThrow(/idleProbeMs in the MySQL URL must be a whole number, 0 or more/);
    }
    expect(() => optionsFromUrl('mysql://root@h/db?lockWaitTimeout=0')).toThrow(/lockWaitTimeout in the MySQL URL must be a positive integer/);
    expect(optionsFromUrl('mysql://root@h/db?claimGate=0')).toMatchObject({ claimGate: 0 });
    expect(optionsFromUrl('mysql://root@h/db?claimGate=16')).toMatchObject({ claimGate: 16 });
    for (const bad of ['-1', '', '2.5', 'many']) {
      expect(() => optionsFromUrl(`mysql://root@h/db?claimGate=${bad}`), bad).toThrow(/claimGate in the MySQL URL must be a whole number, 0 or more/);
    }
    // The old names are refused, naming the new one.
    expect(() => optionsFromUrl('mysql://root@h/db?connectionLimit=8')).toThrow(/connectionLimit in the MySQL URL was renamed maxConnections/);
    // A parameter nobody reads was dropped without a word (issue 40's probe): mysql2 is given none of them.
    for (const bad of ['bogus=1', 'ssl=true', 'claimstrategy=native']) {
      const name = bad.split('=')[0]!;
      expect(() => optionsFromUrl(`mysql://root@h/db?${bad}`), bad).toThrow(new RegExp(`^unknown parameter "${name}" in the MySQL URL; it takes binlogFallback, claimGate, claimStrategy, connectTimeout, idleProbeMs, isolation, lockWaitTimeout, maxConnections, queryTimeout, schemaTimeout$`));
    }
    expect(optionsFromUrl('mysql://root@h/db?connectTimeout=2000&queryTimeout=1500&schemaTimeout=60000')).toMatchObject({
      connectTimeoutMs: 2000,
      queryTimeoutMs: 1500,
      schemaTimeoutMs: 60_000,
    });
    for (const bad of ['queryTimeout=0', 'queryTimeout=1.5', 'connectTimeout=soon', 'schemaTimeout=-1']) {
      expect(() => optionsFromUrl(`mysql://root@h/db?${bad}`), bad).toThrow(/in the MySQL URL must be a positive whole number of milliseconds/);
    }
  });

  it('refuses the old option names and claim strategies before connecting, naming the new ones', async () => {
    // Port 9 (discard) is never reached: each check fails before the pool opens a connection.
    const open = (options: Record<string, unknown>) => MysqlStore.open({ host: '127.0.0.1', port: 9, ...options } as MysqlStoreOptions);
    await expect(open({ claimStrategy: 'skip-locked' })).rejects.toThrow(/claimStrategy skip-locked was renamed native/);
    await expect(open({ claimStrategy: 'auto' })).rejects.toThrow(/claimStrategy auto was renamed native/);
    await expect(open({ claimStrategy: 'fastest' })).rejects.toThrow(/claimStrategy must be native or conditional-update, got "fastest"/);
    await expect(open({ connectionLimit: 8 })).rejects.toThrow(/connectionLimit was renamed maxConnections/);
    await expect(open({ deadlockRetries: 3 })).rejects.toThrow(/deadlockRetries was removed/);
    for (const bad of [-1, 1.5, 1025, '8']) await expect(open({ claimGate: bad }), String(bad)).rejects.toThrow(/claimGate must be a whole number of claims at once per table, from 0 \(no gate\) to 1024/);
    await expect(open({ onWarning: 'log it' })).rejects.toThrow(/onWarning must be a function/);
    await expect(connect('mysql://root@127.0.0.1:9/db?claimStrategy=skip-locked')).rejects.toThrow(/renamed native/);
  });

  it('binds a toISOString() value as a DATETIME literal and leaves everything else alone', () => {
    expect(bindValue('2024-01-02T03:04:05.678Z')).toBe('2024-01-02 03:04:05.678');
    expect(bindValue('2024-01-02 03:04:05.678')).toBe('2024-01-02 03:04:05.678');
    expect(bindValue('"2024-01-02T03:04:05.678Z"')).toBe('"2024-01-02T03:04:05.678Z"');
    expect(bindValue(5)).toBe(5);
    expect(bindValue(null)).toBeNull();
  });

  it('maps the settings that refuse a statement whatever is retried to Unsupported: packet too large (and drops that connection), primary key required', () => {
    for (const errno of [1153, 1173, 3750]) {
      const error = toStoreError(native(errno, 'ER_X'));
      expect(error).toMatchObject({ kind: 'Unsupported', nativeCode: errno, retryable: false });
    }
    expect((toStoreError(native(1153, 'ER_NET_PACKET_TOO_LARGE')) as Error).message).toMatch(/SET GLOBAL max_allowed_packet = 64M/);
    expect(isConnectionLost(native(1153, 'ER_NET_PACKET_TOO_LARGE'))).toBe(true);
  });

  it('max_allowed_packet: the statement limit and the doctor verdict follow the packet', () => {
    expect(mysqlStatementLimit(16384)).toMatchObject({ bytes: 16368, setting: 'max_allowed_packet = 16384' });
    const settings = { logBin: false, binlogFormat: 'ROW', readOnly: false, lowerCaseTableNames: 0, autocommit: true };
    const check = (maxAllowedPacket: number) => maxAllowedPacketCheck({ server: parseServerVersion('10.11.6-MariaDB'), settings: { ...settings, maxAllowedPacket }, binlog: { mode: 'off', isolation: 'read-committed', fallback: false } });
    expect(check(64 * 1024 * 1024)).toMatchObject({ status: 'pass' });
    expect(check(1024 * 1024)).toMatchObject({ status: 'pass', detail: '1048576 bytes: payloads and results up to 522240 bytes (64M suggested)' });
    expect(check(1024 * 1024 - 1024)).toMatchObject({ status: 'warn', fix: expect.stringMatching(/^SET GLOBAL max_allowed_packet = 64M/) });
    // MariaDB's minimum: statusq still runs there (measured), so a warning, with values up to 256 bytes.
    expect(check(1024)).toMatchObject({ status: 'warn', detail: expect.stringMatching(/^1024 bytes: payloads and results above 256 bytes are refused/) });
  });

  describe('the binary log plan at open (mysql-binlog.ts)', () => {
    const input = (over: Partial<BinlogPlanInput> = {}): BinlogPlanInput => ({
      flavor: 'mariadb',
      logBin: true,
      binlogFormat: 'STATEMENT',
      isolation: 'read-committed',
      binlogFallback: 'refuse',
      conditionalUpdateAnyway: false,
      ...over,
    });
    /** A probe connection that answers each statement as `answer` says, and records what it ran. */
    const session = (answer: (sql: string) => unknown = () => [[]]) => {
      const ran: string[] = [];
      return {
        ran,
        query: async (sql: string) => {
          ran.push(sql);
          const result = answer(sql);
          if (result instanceof Error) throw result;
          return result;
        },
      };
    };
    const denied = native(1227, 'ER_SPECIFIC_ACCESS_DENIED_ERROR', { sqlMessage: 'Access denied; you need (at least one of) the SUPER, BINLOG ADMIN privilege(s) for this operation' });
    const refusing = () => session((sql) => (sql.startsWith('SET SESSION binlog_format') ? denied : sql.startsWith('SELECT CURRENT_USER') ? [[{ account: 'app@%' }]] : [[]]));

    it('no binary log, ROW, MIXED, or REPEATABLE READ asked for: nothing to run', async () => {
      for (const [over, mode] of [
        [{ logBin: false }, 'off'],
        [{ binlogFormat: 'ROW' }, 'row'],
        [{ binlogFormat: 'MIXED' }, 'mixed'],
        [{ isolation: 'repeatable-read' }, 'statement'],
      ] as const) {
        const s = session();
        expect(await planBinlog(input(over), s)).toEqual({ mode, isolation: over.isolation ?? 'read-committed', fallback: false });
        expect(s.ran).toEqual([]);
      }
    });

    it('STATEMENT: the sessions switch to ROW when the account may', async () => {
      const s = session();
      expect(await planBinlog(input(), s)).toEqual({ mode: 'session-row', isolation: 'read-committed', fallback: false });
      expect(s.ran).toEqual(["SET SESSION binlog_format = 'ROW'"]);
    });

    it('STATEMENT, an account that may not: refuses (Unsupported, with the check), unless the fallback is allowed', async () => {
      const error = await planBinlog(input(), refusing()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreError);
      expect(error).toMatchObject({ kind: 'Unsupported', nativeCode: 'BINLOG_FORMAT', retryable: false, check: { name: 'binlog', status: 'fail' } });
      expect((error as StoreError).message).toContain("GRANT BINLOG ADMIN ON *.* TO 'app'@'%'");
      const mysqlError = await planBinlog(input({ flavor: 'mysql' }), refusing()).catch((e: unknown) => e);
      expect((mysqlError as StoreError).message).toContain("GRANT SESSION_VARIABLES_ADMIN ON *.* TO 'app'@'%'");

      for (const over of [{ binlogFallback: 'conditional-update' }, { conditionalUpdateAnyway: true }] as const) {
        const s = refusing();
        expect(await planBinlog(input(over), s)).toEqual({ mode: 'statement', isolation: 'repeatable-read', fallback: true, refusal: expect.stringMatching(/^1227 Access denied/) });
        expect(s.ran).toEqual(["SET SESSION binlog_format = 'ROW'", 'SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ']);
      }
    });

    it('a lost connection is the open failing, not a verdict on the account', async () => {
      const lost = native(undefined, 'PROTOCOL_CONNECTION_LOST', { fatal: true });
      await expect(planBinlog(input({ binlogFallback: 'conditional-update' }), session(() => lost))).rejects.toBe(lost);
    });

    it('binlogFallback comes from the URL and is checked', async () => {
      expect(optionsFromUrl('mysql://u@h/db?binlogFallback=conditional-update').binlogFallback).toBe('conditional-update');
      await expect(MysqlStore.open({ host: '127.0.0.1', port: 1, binlogFallback: 'always' as never })).rejects.toThrow(/binlogFallback must be refuse or conditional-update, got "always"/);
    });
  });
});
