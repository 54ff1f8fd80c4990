// `statusq doctor` where only a database server can show it: a user without the privileges a worker needs
// (PostgreSQL and MySQL/MariaDB; SQLite has no users), and on PostgreSQL the shared NOTIFY trigger function,
// which the scratch table's drop removes only when no other table uses it. The scenarios every dialect runs
// are in cli-doctor-scenarios.ts.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminUrl, createTestDatabase, dropTestDatabase, postgresUnavailable, withClient } from '@statusq/adapter-postgres/testing';
import { adminQuery, createDatabase, dropDatabase, mysqlUnavailable, urlFor } from '@statusq/adapter-mysql/testing';
import { runCliInProcess } from './test/cli-harness.js';
import { checkOf, reportOf } from './test/cli-doctor-scenarios.js';
import { dialectSelected, type Dialect } from '../../../scripts/test-tiers.mjs';

const PASSWORD = 'D0ctorPw';

/** Registers `body` as a suite, or a skip (a failure under STATUSQ_REQUIRE_DATABASES=1) when the server is unreachable. */
function onServer(dialect: Dialect, title: string, unavailable: string | null, body: () => void): void {
  if (!dialectSelected(dialect)) return;
  if (unavailable === null) describe(title, body);
  else if (process.env.STATUSQ_REQUIRE_DATABASES === '1') it(`${title}: the database is reachable`, () => void expect.fail(unavailable));
  else it.skip(`[needs ${title}] ${unavailable}`, () => undefined);
}

let dir = '';
beforeAll(() => void (dir = mkdtempSync(join(tmpdir(), 'statusq-cli-doctor-'))));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const statusq = (...args: string[]) => runCliInProcess(dir, args);

/** The privileges scenario on any server: `restrictedUrl`'s user may SELECT from jobs and do nothing else. */
async function expectWorkerPrivilegesMissing(url: string, restrictedUrl: string): Promise<void> {
  expect((await statusq('init', '--db', url)).code).toBe(0);
  expect((await statusq('enqueue', '--db', url, '--payload', '{"n":1}')).code).toBe(0);
  const run = await statusq('doctor', '--db', restrictedUrl, '--table', 'jobs', '--race-jobs', '0', '--json');
  expect(run.code, run.stdout + run.stderr).toBe(1);
  expect(run.stdout + run.stderr).not.toContain(PASSWORD);
  const privileges = checkOf(reportOf(run), 'privileges');
  expect(privileges.status).toBe('fail');
  expect(privileges.detail).toMatch(/^SELECT granted; UPDATE refused \(workers need it\): .+; INSERT refused \(enqueue needs it; workers do not\): .+/);
  expect(privileges.fix).toMatch(/^GRANT UPDATE, INSERT ON .jobs. to the user of this URL$/);
  // The rest of the table checks still ran, with what SELECT lets them see.
  expect(checkOf(reportOf(run), 'table').status).toBe('pass');
  expect(checkOf(reportOf(run), 'pending index').status).toBe('pass');

  // The race needs to create its scratch table, which this user may not: a warning naming --race-jobs 0
  // (which says nothing about the claim), nothing left behind.
  const race = await statusq('doctor', '--db', restrictedUrl, '--race-jobs', '20', '--race-workers', '2', '--json');
  expect(race.code, race.stdout + race.stderr).toBe(0);
  const report = reportOf(race);
  expect(checkOf(report, 'race')).toMatchObject({ status: 'warn', detail: expect.stringMatching(/^not run: the scratch table statusq_doctor_\w+ could not be created/), fix: expect.stringMatching(/--race-jobs 0$/) });
  expect(report.race).toMatchObject({ done: 0, dropped: true });
  // The user's queue is as it was.
  expect(JSON.parse((await statusq('stats', '--db', url, '--table', 'jobs', '--json')).stdout)).toMatchObject({ pending: 1, done: 0 });
}

onServer('postgres', 'postgres', await postgresUnavailable(), () => {
  const functions = (url: string) => withClient(url, async (c) => Number((await c.query(`SELECT count(*) AS n FROM pg_proc WHERE proname IN ('statusq_notify', 'statusq_notify_settle')`)).rows[0].n));

  it('a user with SELECT only: the privileges check fails naming UPDATE and INSERT (exit 1); the race cannot create its table and says so', async () => {
    const url = await createTestDatabase('statusq_cli');
    const role = `statusq_doctor_${randomBytes(5).toString('hex')}`;
    try {
      await withClient(url, async (c) => {
        await c.query(`CREATE ROLE ${role} LOGIN PASSWORD '${PASSWORD}'`);
      });
      const restricted = new URL(url);
      restricted.username = role;
      restricted.password = PASSWORD;
      await statusq('init', '--db', url);
      await withClient(url, (c) => c.query(`GRANT SELECT ON jobs TO ${role}`));
      await expectWorkerPrivilegesMissing(url, restricted.toString());
    } finally {
      await dropTestDatabase(url);
      await withClient(adminUrl(), (c) => c.query(`DROP ROLE IF EXISTS ${role}`));
    }
  });

  it('a server that cannot be reached, with --table: still one JSON object, the connect check failed (exit 1)', async () => {
    // Port 1: nothing listens there, so the connection is refused at once.
    const unreachable = new URL(adminUrl());
    unreachable.port = '1';
    const run = await statusq('doctor', '--db', unreachable.toString(), '--table', 'jobs', '--json');
    expect(run.code, run.stdout + run.stderr).toBe(1);
    const report = reportOf(run);
    expect(report.ok).toBe(false);
    expect(report.checks.map((c) => [c.name, c.status])).toEqual([['connect', 'fail']]);
    expect(report.race).toBeNull();
  });

  it("the race's scratch table takes the shared trigger functions with it only when no other table's triggers use them", async () => {
    const url = await createTestDatabase('statusq_cli');
    try {
      const alone = await statusq('doctor', '--db', url, '--race-jobs', '50', '--json');
      expect(alone.code, alone.stdout + alone.stderr).toBe(0);
      expect(await functions(url)).toBe(0);

      // --with await: the table takes both shared functions, the workers' and waitFor's settle wake-up.
      expect((await statusq('init', '--db', url, '--with', 'await')).code).toBe(0);
      const beside = await statusq('doctor', '--db', url, '--race-jobs', '50', '--json');
      expect(beside.code, beside.stdout + beside.stderr).toBe(0);
      expect(await functions(url)).toBe(2);
      const triggers = await withClient(url, async (c) => (await c.query(`SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal ORDER BY tgname`)).rows.map((r: { tgname: string }) => r.tgname));
      expect(triggers).toEqual(['statusq_notify_insert', 'statusq_notify_settle', 'statusq_notify_update']);
    } finally {
      await dropTestDatabase(url);
    }
  });
});

onServer('mysql', 'mysqlServer', await mysqlUnavailable(), () => {
  it('INSERT is probed without the generated columns, which MySQL refuses a value for, beside a NOT NULL column without a default', async () => {
    const url = await createDatabase();
    try {
      const database = decodeURIComponent(new URL(url).pathname.slice(1));
      await adminQuery(
        `CREATE TABLE \`${database}\`.\`gen\` (id BIGINT AUTO_INCREMENT PRIMARY KEY, date DATETIME(3) NOT NULL, \`a.b\` VARCHAR(8) NOT NULL, doubled BIGINT AS (id * 2) VIRTUAL, status TINYINT NULL, INDEX gen_pending (status, date)) ENGINE=InnoDB`,
      );
      const run = await statusq('doctor', '--db', url, '--table', 'gen', '--race-jobs', '0', '--json');
      expect(checkOf(reportOf(run), 'privileges'), run.stdout).toMatchObject({ status: 'pass', detail: 'SELECT, UPDATE, INSERT on gen' });
    } finally {
      await dropDatabase(url);
    }
  });

  it('a user with SELECT only: the privileges check fails naming UPDATE and INSERT (exit 1); the race cannot create its table and says so', async () => {
    const url = await createDatabase();
    const database = decodeURIComponent(new URL(url).pathname.slice(1));
    const user = `statusq_doc_${randomBytes(4).toString('hex')}`;
    try {
      await adminQuery(`CREATE USER '${user}'@'%' IDENTIFIED BY '${PASSWORD}'`);
      await statusq('init', '--db', url);
      await adminQuery(`GRANT SELECT ON \`${database}\`.\`jobs\` TO '${user}'@'%'`);
      const restricted = new URL(urlFor(database));
      restricted.username = user;
      restricted.password = PASSWORD;
      await expectWorkerPrivilegesMissing(url, restricted.toString());
    } finally {
      await adminQuery(`DROP USER IF EXISTS '${user}'@'%'`);
      await dropDatabase(url);
    }
  });
});
