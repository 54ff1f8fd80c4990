// The CLI as a user runs it against PostgreSQL: the shared command scenarios, each test in its own database
// (CREATE DATABASE statusq_cli_<random> on STATUSQ_POSTGRES_URL, dropped afterwards), plus the NOTIFY
// triggers (and the doctor's check of them) and a missing database. The other shared groups: cli.postgres-operations.test.ts.
import { expect, it } from 'vitest';
import { cliScenarios } from './test/cli-scenarios.js';
import { postgresCliTarget } from './test/cli-targets.js';
import { checkOf, reportOf } from './test/cli-doctor-scenarios.js';

cliScenarios(
  'statusq CLI on PostgreSQL',
  postgresCliTarget,
  ['commands'],
  (ctx) => {
    it('init installs the NOTIFY triggers that wake idle workers, and the one that wakes waitFor only with --with await', async () => {
      const { statusq, db } = ctx();
      const triggers = async (table: string) =>
        (await db.query<{ tgname: string }>(`SELECT tgname FROM pg_trigger WHERE tgrelid = '${table}'::regclass AND NOT tgisinternal ORDER BY tgname`)).map((t) => t.tgname);
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      expect(await triggers('jobs')).toEqual(['statusq_notify_insert', 'statusq_notify_update']);
      expect((await statusq('init', '--db', db.url, '--table', 'awaited', '--with', 'await')).code).toBe(0);
      expect(await triggers('awaited')).toEqual(['statusq_notify_insert', 'statusq_notify_settle', 'statusq_notify_update']);
    });

    it("doctor: the wake-ups check says whether settles wake waitFor (migrate --with await adds that trigger); a table without a worker's trigger is a warning whose fix is migrate", async () => {
      const { statusq, db } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const wakeUps = async () => {
        const run = await statusq('doctor', '--db', db.url, '--table', 'jobs', '--json', '--race-jobs', '0');
        return checkOf(reportOf(run), 'wake-ups');
      };
      expect(await wakeUps()).toMatchObject({ status: 'pass', detail: expect.stringMatching(/not waitFor on settles, which reads on its backoff .*migrate --with await/) });
      expect((await statusq('migrate', '--db', db.url, '--table', 'jobs', '--with', 'await')).code).toBe(0);
      expect(await wakeUps()).toMatchObject({ status: 'pass', detail: 'NOTIFY triggers wake idle workers on new rows, and waitFor on settles' });
      await db.query('DROP TRIGGER statusq_notify_insert ON jobs');
      expect(await wakeUps()).toEqual({
        name: 'wake-ups',
        status: 'warn',
        detail: "jobs lacks statusq's NOTIFY triggers (made by an older version, or dropped): idle workers are not woken by new rows and poll",
        fix: 'statusq migrate --db "$STATUSQ_DATABASE_URL" --table jobs',
      });
      expect((await statusq('migrate', '--db', db.url, '--table', 'jobs')).code).toBe(0);
      expect(await wakeUps()).toMatchObject({ status: 'pass' });
    });

    it('a database that does not exist is a one-line database error (exit 1), with the password hidden', async () => {
      const missing = new URL(ctx().db.url);
      missing.pathname = '/statusq_no_such_database';
      const run = await ctx().statusq('stats', '--db', missing.toString(), '--table', 'jobs');
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/^statusq: database error/);
      expect(run.stderr.split('\n')).toHaveLength(1);
      if (missing.password) expect(run.stderr).not.toContain(`:${missing.password}@`);
    });
  },
);
