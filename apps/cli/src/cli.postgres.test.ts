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
    it('init installs the NOTIFY triggers that wake idle workers and waitFor', async () => {
      const { statusq, db } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const triggers = await db.query<{ tgname: string }>(`SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal ORDER BY tgname`);
      expect(triggers.map((t) => t.tgname)).toEqual(['statusq_notify_insert', 'statusq_notify_settle', 'statusq_notify_update']);
    });

    it('doctor: a table without the settle trigger (migrated by an older version) is a wake-ups warning whose fix is migrate, which adds it', async () => {
      const { statusq, db } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const wakeUps = async () => {
        const run = await statusq('doctor', '--db', db.url, '--table', 'jobs', '--json', '--race-jobs', '0');
        return checkOf(reportOf(run), 'wake-ups');
      };
      expect(await wakeUps()).toMatchObject({ status: 'pass' });
      await db.query('DROP TRIGGER statusq_notify_settle ON jobs');
      expect(await wakeUps()).toEqual({
        name: 'wake-ups',
        status: 'warn',
        detail: "jobs lacks statusq's NOTIFY triggers (made by an older version, or dropped): waitFor and enqueue --wait see a settle by polling, up to about 1 s late, instead of within milliseconds",
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
