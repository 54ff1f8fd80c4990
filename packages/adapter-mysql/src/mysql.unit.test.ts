// Pure functions of the adapter: no server needed.
import { describe, expect, it } from 'vitest';
import { StoreError } from '@statusq/core';
import { MysqlStore, bindValue, connect, mysqlDialect, mysqlOrderTimeEncoding, optionsFromUrl, parseServerVersion, toStoreError, type MysqlStoreOptions } from './index.js';

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
    // The old names are refused, naming the new one.
    expect(() => optionsFromUrl('mysql://root@h/db?connectionLimit=8')).toThrow(/connectionLimit in the MySQL URL was renamed maxConnections/);
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
    await expect(connect('mysql://root@127.0.0.1:9/db?claimStrategy=skip-locked')).rejects.toThrow(/renamed native/);
  });

  it('binds a toISOString() value as a DATETIME literal and leaves everything else alone', () => {
    expect(bindValue('2024-01-02T03:04:05.678Z')).toBe('2024-01-02 03:04:05.678');
    expect(bindValue('2024-01-02 03:04:05.678')).toBe('2024-01-02 03:04:05.678');
    expect(bindValue('"2024-01-02T03:04:05.678Z"')).toBe('"2024-01-02T03:04:05.678Z"');
    expect(bindValue(5)).toBe(5);
    expect(bindValue(null)).toBeNull();
  });
});
