// The CLI on a MariaDB server that writes its binary log by statement (log_bin ON, binlog_format STATEMENT),
// where InnoDB refuses writes at READ COMMITTED and the account may not switch its sessions to ROW: the store
// refuses at open (@statusq/adapter-mysql's mysql-binlog.ts), so `statusq work` exits 1 at once with the reason
// and the fixes (never a retry loop), and `statusq doctor` reports the failed binlog check. The server is a
// private one of this file's own, never the shared one. The adapter's own cases are in its mysql.binlog.test.ts.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrivateServer } from '@statusq/conformance';
import { runCliAsync } from './test/cli-harness.js';
import { checkOf, reportOf } from './test/cli-doctor-scenarios.js';

const PASSWORD = 'Binl0gPw';
/** As the adapter's private servers find them: STATUSQ_MARIADB_BIN, else the Debian paths. */
const binary = (name: string) =>
  (process.env.STATUSQ_MARIADB_BIN ? [process.env.STATUSQ_MARIADB_BIN] : ['/usr/sbin', '/usr/bin', '/usr/local/bin', '/usr/local/mysql/bin']).map((d) => join(d, name)).find((path) => existsSync(path));
const SERVER = binary('mariadbd');
const INSTALL = binary('mariadb-install-db');

async function query(port: number, sql: string): Promise<unknown> {
  const conn = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root', connectTimeout: 2000 });
  conn.on('error', () => undefined);
  try {
    return (await conn.query(sql))[0];
  } finally {
    await conn.end().catch(() => conn.destroy());
  }
}

/** A MariaDB logging by statement, with an account that has every grant a worker needs on `statusq_binlog` and nothing global. */
async function startStatementServer(): Promise<PrivateServer> {
  const server = await PrivateServer.start({
    name: 'MariaDB',
    user: 'mysql',
    // --tmpdir: its own, never /tmp. A MariaDB server (the install's bootstrap too) deletes every `#sql*` file in
    // its tmpdir when it starts, which took the shared server's temporary tables from under a running query
    // ("Error on delete of '/tmp/#sql-temptable-....MAI' (Errcode: 2)" in another suite).
    init: (dir) => ({ file: INSTALL!, args: ['--no-defaults', `--datadir=${join(dir, 'data')}`, `--tmpdir=${dir}`, '--auth-root-authentication-method=normal', '--skip-test-db', '--skip-name-resolve'] }),
    run: (dir, port) => ({
      file: SERVER!,
      args: [
        '--no-defaults',
        `--datadir=${join(dir, 'data')}`,
        `--tmpdir=${dir}`,
        `--port=${port}`,
        '--bind-address=127.0.0.1',
        `--socket=${join(dir, 'mariadbd.sock')}`,
        `--pid-file=${join(dir, 'mariadbd.pid')}`,
        '--skip-name-resolve',
        '--innodb-buffer-pool-size=64M',
        `--log-bin=${join(dir, 'binlog')}`,
        '--binlog-format=STATEMENT',
        '--server-id=1',
      ],
    }),
    stopSignal: 'SIGTERM',
    ready: (port) => query(port, 'SELECT 1').then(() => true, () => false),
  });
  try {
    for (const sql of [
      'CREATE DATABASE statusq_binlog',
      `CREATE USER 'statusq_app'@'%' IDENTIFIED BY '${PASSWORD}'`,
      "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP ON statusq_binlog.* TO 'statusq_app'@'%'",
    ]) {
      await query(server.port, sql);
    }
  } catch (error) {
    await server.stop();
    throw error;
  }
  return server;
}

/** Runs where a MariaDB server binary is installed (CI installs one); otherwise skipped, or failed under STATUSQ_REQUIRE_DATABASES=1. */
function withMariadb(title: string, body: () => void): void {
  if (SERVER && INSTALL) describe(title, body);
  else if (process.env.STATUSQ_REQUIRE_DATABASES === '1') it(`${title}: a MariaDB server binary (mariadbd) is installed`, () => void expect.fail('no mariadbd; set STATUSQ_MARIADB_BIN'));
  else it.skip(`[needs mariadbd] ${title}`, () => undefined);
}

withMariadb('statusq CLI on a MariaDB that logs by statement, as an account that may not switch to ROW', () => {
  let server: PrivateServer | undefined;
  let dir = '';
  let url = '';
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'statusq-cli-binlog-'));
    server = await startStatementServer();
    url = `mysql://statusq_app:${PASSWORD}@127.0.0.1:${server.port}/statusq_binlog`;
    expect((await runCliAsync(dir, ['init', '--db', `mysql://root@127.0.0.1:${server.port}/statusq_binlog`, '--table', 'jobs'])).code).toBe(0);
    writeFileSync(join(dir, 'noop.mjs'), 'export default async () => {};\n');
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it('statusq work exits 1 at once with the setting and the fixes on stderr, the password hidden; no retry, no row touched', async () => {
    const started = Date.now();
    const run = await runCliAsync(dir, ['work', '--db', url, '--table', 'jobs', '--handler', join(dir, 'noop.mjs'), '--exit-when-empty'], 30_000);
    const seconds = (Date.now() - started) / 1000;
    expect(run.code, run.stdout + run.stderr).toBe(1);
    // Node's start-up and one connection: a retry loop would take its backoff (seconds) at least.
    expect(seconds).toBeLessThan(10);
    const lines = run.stderr.split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^statusq: database error \(Unsupported BINLOG_FORMAT\): the server writes its binary log by statement \(log_bin ON, binlog_format STATEMENT\)/);
    expect(lines[0]).toContain("'statusq_app'@'%' may not switch its own sessions to ROW");
    expect(lines[0]).toContain("Fix: SET GLOBAL binlog_format = 'ROW'");
    expect(lines[0]).toContain("GRANT BINLOG ADMIN ON *.* TO 'statusq_app'@'%'");
    expect(lines[0]).toContain('binlogFallback=conditional-update');
    expect(run.stdout + run.stderr).not.toContain(PASSWORD);
    // --processes refuses in the launcher, before any child starts.
    const launched = await runCliAsync(dir, ['work', '--db', url, '--table', 'jobs', '--handler', join(dir, 'noop.mjs'), '--exit-when-empty', '--processes', '2'], 30_000);
    expect(launched.code, launched.stdout + launched.stderr).toBe(1);
    expect(launched.stderr.split('\n')).toHaveLength(1);
    expect(launched.stderr).toMatch(/^statusq: database error \(Unsupported BINLOG_FORMAT\)/);
  });

  it('statusq doctor: the server answers, the binlog check fails with the fix (exit 1); with binlogFallback=conditional-update it warns and the race passes (exit 0)', async () => {
    const refused = await runCliAsync(dir, ['doctor', '--db', url, '--table', 'jobs', '--json'], 60_000);
    expect(refused.code, refused.stdout + refused.stderr).toBe(1);
    const report = reportOf(refused);
    expect(checkOf(report, 'connect').status).toBe('pass');
    expect(checkOf(report, 'binlog')).toMatchObject({ status: 'fail', detail: expect.stringMatching(/binlog_format STATEMENT/), fix: expect.stringMatching(/^SET GLOBAL binlog_format = 'ROW'/) });

    const fallback = await runCliAsync(dir, ['doctor', '--db', `${url}?binlogFallback=conditional-update`, '--table', 'jobs', '--race-jobs', '200', '--race-workers', '4', '--json'], 90_000);
    expect(fallback.code, fallback.stdout + fallback.stderr).toBe(0);
    const ok = reportOf(fallback);
    expect(checkOf(ok, 'binlog')).toMatchObject({ status: 'warn', detail: expect.stringMatching(/REPEATABLE READ with the conditional-update claim/) });
    expect(checkOf(ok, 'race').status).toBe('pass');
    expect(ok.server.isolation).toBe('REPEATABLE-READ');
  });
});
