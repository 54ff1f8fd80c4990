// `statusq doctor` as an operator runs it, on every dialect: a good table passes with a clean race, a table
// the claim cannot use fails (exit 1) with the fix named, bad input is exit 2, and nothing of the user's
// changes. Part of the CLI scenarios every dialect runs.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { generateTableARows } from '@statusq/test-fixtures';
import type { CliContext, CliTarget } from './cli-target.js';
import { cliBin, cliEnv, launchCli, until, type CliRun } from './cli-harness.js';
import type { DoctorReport } from '../doctor-report.js';

/** Small enough to keep the scenarios quick, large enough that four workers' claims overlap. */
const RACE_JOBS = '400';

/** The line the doctor prints on stderr as the race begins (the only stderr of a run that is not bad input). */
const RACE_BEGINS = /^statusq doctor: race: \d+ jobs, \d+ workers on scratch table statusq_doctor_[0-9a-f]{10}$/;

/** The one JSON object `doctor --json` prints; stderr holds at most the race's progress line. */
export function reportOf(run: CliRun): DoctorReport {
  for (const line of run.stderr.split('\n').filter((l) => l !== '')) expect(line, 'doctor --json prints no other stderr').toMatch(RACE_BEGINS);
  return JSON.parse(run.stdout) as DoctorReport;
}

/** A fix line run by a POSIX shell exactly as printed, with `statusq` the built bin and the URL in the environment. */
function runFix(fix: string, dir: string, url: string): CliRun {
  const line = fix.replace(/ \(or: .*\)$/, '').replace(/^statusq /, `'${process.execPath}' '${cliBin}' `);
  const run = spawnSync('sh', ['-c', line], { cwd: dir, encoding: 'utf8', timeout: 60_000, env: cliEnv({ STATUSQ_DATABASE_URL: url }) });
  return { code: run.status, stdout: run.stdout.trim(), stderr: run.stderr.trim() };
}

export function checkOf(report: DoctorReport, name: string) {
  const found = report.checks.find((c) => c.name === name);
  if (!found) throw new Error(`no ${name} check in ${JSON.stringify(report.checks.map((c) => c.name))}`);
  return found;
}

export function doctorScenarios(ctx: () => CliContext, target: CliTarget): void {
  describe('doctor', () => {
    /** Every row's id and status, in id order: what "unchanged" means for a user's table. */
    const rowsOf = async (table: string) =>
      (await ctx().db.query<{ id: unknown; status: unknown }>(`SELECT id, status FROM ${table} ORDER BY id`)).map((r) => [String(r.id), r.status === null ? null : Number(r.status)]);

    it('a managed table passes every check; the race runs every job exactly once on a scratch table that is gone afterwards; the table is unchanged', async () => {
      const { statusq, db, file, stats } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      expect((await statusq('enqueue', '--db', db.url, '--file', file('rows.ndjson', '{"n":1}\n{"n":2}\n{"n":3}\n'))).code).toBe(0);
      await db.query('UPDATE jobs SET status = 1 WHERE id = 2');
      const before = await rowsOf('jobs');

      const run = await statusq('doctor', '--db', db.url, '--table', 'jobs', '--json', '--race-jobs', RACE_JOBS);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      const report = reportOf(run);
      expect(report.ok).toBe(true);
      // The adapter's own server checks (StoreInspection.serverChecks: MySQL's version, binlog, ...) come
      // between the server line and the claim; each must pass on a test server all the same.
      // `wake-ups` only where the store keeps wake-ups in the table (StoreInspection.wakeUpCheck).
      const names = report.checks.map((c) => c.name).filter((name) => name !== 'wake-ups');
      expect([names[0], ...names.slice(names.indexOf('claim'))]).toEqual(['server', 'claim', 'clock', 'table', 'optional columns', 'pending index', 'claim plan', 'claim plan (--aging)', 'key index', 'privileges', 'race']);
      for (const c of report.checks) expect(c.status, `${c.name}: ${c.detail}`).toBe('pass');
      expect(checkOf(report, 'pending index').detail).toBe('jobs_statusq_pending');
      expect(checkOf(report, 'key index').detail).toBe('jobs_statusq_key: one pending or processing row per dedupe_key');
      expect(checkOf(report, 'claim plan').detail).toMatch(/^reads index jobs_statusq_pending, no sort/);
      expect(checkOf(report, 'privileges').detail).toBe('SELECT, UPDATE, INSERT on jobs');
      expect(report.server).toMatchObject({ version: expect.any(String), isolation: expect.any(String), timeZone: expect.any(String), claim: expect.stringMatching(/^(one statement|transaction)$/) });
      expect(report.server.capabilities).toMatchObject({ skipLocked: true, batchClaim: true });
      // Both clocks are this machine's (or a server beside it): well within the warning threshold.
      expect(Math.abs(report.server.clock!.offsetMs)).toBeLessThan(1000);
      expect(report.race).toMatchObject({ jobs: 400, workers: 4, done: 400, ranTwice: 0, neverRan: 0, candidatesLost: 0, dropped: true });
      expect(report.race!.left).toEqual({ pending: 0, processing: 0, failed: 0, abuse: 0, other: 0 });
      expect(report.race!.table).toMatch(/^statusq_doctor_[0-9a-f]{10}$/);

      // The scratch table is gone, seen by another command; the user's table is as it was.
      const gone = await statusq('stats', '--db', db.url, '--table', report.race!.table);
      expect(gone.code).toBe(2);
      expect(gone.stderr).toMatch(/does not exist/);
      expect(await rowsOf('jobs')).toEqual(before);
      expect(await stats()).toEqual({ pending: 2, processing: 0, done: 1, abuse: 0, failed: 0, other: 0 });

      // The readable report: a line a check, and the verdict.
      const text = await statusq('doctor', '--db', db.url, '--table', 'jobs', '--race-jobs', '0');
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toMatch(/^statusq doctor: /);
      expect(text.stdout).toMatch(/\n {2}pass {2}claim plan +reads index jobs_statusq_pending/);
      // Every check of the JSON run but the race (--race-jobs 0), the adapter's server checks included.
      expect(text.stdout.split('\n').at(-1)).toBe(`ok: ${report.checks.length - 1} checks passed, 0 warnings, 0 failed`);
      expect(await rowsOf('jobs')).toEqual(before);
    });

    it('a table without the pending index fails (exit 1) naming statusq migrate; once migrated it passes; its rows never change', async () => {
      const { statusq, db } = ctx();
      for (const sql of target.fixtures.tableA('table_a', { ownIndex: false })) await db.query(sql);
      await db.insertTableA(generateTableARows(40));
      await db.query('UPDATE table_a SET status = 1 WHERE id <= 10');
      const before = await rowsOf('table_a');

      const run = await statusq('doctor', '--db', db.url, '--table', 'table_a', '--json', '--race-jobs', '0');
      expect(run.code, run.stdout + run.stderr).toBe(1);
      const report = reportOf(run);
      expect(report.ok).toBe(false);
      expect(report.race).toBeNull();
      const index = checkOf(report, 'pending index');
      expect(index).toMatchObject({ status: 'fail', detail: expect.stringMatching(/^no table_a_statusq_pending and no other index serves the claim/) });
      // The command, and the adapter's own DDL for the index (CREATE INDEX, or ALTER TABLE ... ADD INDEX); the
      // URL as given when it holds no password, else the variable, never the redacted URL.
      expect(index.fix).toMatch(/^statusq migrate --db (\S+) --table table_a \(or: .*\btable_a_statusq_pending\b.*\)$/);
      expect(index.fix).not.toContain('***');
      if (new URL(db.url).password !== '') expect(index.fix).toContain('--db "$STATUSQ_DATABASE_URL" ');
      const plan = checkOf(report, 'claim plan');
      expect(plan.status, plan.detail).toBe('fail');
      expect(plan.detail).toMatch(/^(reads the whole table|reads index \S+, then sorts)/);
      // table_a has no claimed_at: a warning, never a failure.
      expect(checkOf(report, 'optional columns')).toMatchObject({ status: 'warn', fix: expect.stringMatching(/--with leases,retries$/) });
      expect(checkOf(report, 'table').status).toBe('pass');
      expect(checkOf(report, 'privileges').status).toBe('pass');
      expect(await rowsOf('table_a')).toEqual(before);

      // The fix as printed, run by a shell, is what makes the table pass.
      const migrated = runFix(index.fix!, ctx().dir, db.url);
      expect(migrated.code, migrated.stderr).toBe(0);
      const fixed = await statusq('doctor', '--db', db.url, '--table', 'table_a', '--json', '--race-jobs', '0');
      expect(fixed.code, fixed.stdout).toBe(0);
      const after = reportOf(fixed);
      expect(checkOf(after, 'pending index')).toMatchObject({ status: 'pass', detail: 'table_a_statusq_pending' });
      expect(checkOf(after, 'claim plan').status).toBe('pass');
      expect(await rowsOf('table_a')).toEqual(before);
    });

    it('a dedupe_key column without its key index fails the key index check (exit 1), naming migrate --with dedupe; once migrated it passes', async () => {
      const { statusq, db } = ctx();
      for (const sql of target.fixtures.tableA('table_a')) await db.query(sql);
      await db.query('ALTER TABLE table_a ADD dedupe_key VARCHAR(255)');
      const run = await statusq('doctor', '--db', db.url, '--table', 'table_a', '--json', '--race-jobs', '0');
      expect(run.code, run.stdout + run.stderr).toBe(1);
      const key = checkOf(reportOf(run), 'key index');
      expect(key).toMatchObject({ status: 'fail', detail: 'dedupe_key has no key index table_a_statusq_key: enqueues with a key are refused, since without it two enqueuers could both insert' });
      expect(key.fix).toMatch(/^statusq migrate --db (\S+) --table table_a --with dedupe$/);
      const migrated = runFix(key.fix!, ctx().dir, db.url);
      expect(migrated.code, migrated.stderr).toBe(0);
      const fixed = await statusq('doctor', '--db', db.url, '--table', 'table_a', '--json', '--race-jobs', '0');
      expect(checkOf(reportOf(fixed), 'key index')).toMatchObject({ status: 'pass', detail: 'table_a_statusq_key: one pending or processing row per dedupe_key' });
    });

    it("an application's own index that serves the claim is enough: the pending index check passes naming it", async () => {
      const { statusq, db } = ctx();
      for (const sql of target.fixtures.tableA('table_a')) await db.query(sql);
      await db.insertTableA(generateTableARows(20));
      const run = await statusq('doctor', '--db', db.url, '--table', 'table_a', '--json', '--race-jobs', '0');
      expect(run.code, run.stdout).toBe(0);
      const report = reportOf(run);
      expect(checkOf(report, 'pending index')).toMatchObject({ status: 'pass', detail: expect.stringMatching(/^no table_a_statusq_pending, but table_a_\w+ serves the claim$/) });
    });

    it('an index on the order column alone does not serve the claim: status does not bound its read, so the pending index and claim plan fail (exit 1)', async () => {
      const { statusq, db } = ctx();
      for (const sql of target.fixtures.tableA('table_a', { ownIndex: false })) await db.query(sql);
      await db.query('CREATE INDEX table_a_date ON table_a (date)');
      await db.insertTableA(generateTableARows(40));
      const run = await statusq('doctor', '--db', db.url, '--table', 'table_a', '--json', '--race-jobs', '0');
      expect(run.code, run.stdout + run.stderr).toBe(1);
      const report = reportOf(run);
      expect(checkOf(report, 'pending index')).toMatchObject({ status: 'fail', detail: expect.stringMatching(/^no table_a_statusq_pending and no other index serves the claim/) });
      const plan = checkOf(report, 'claim plan');
      expect(plan.status, plan.detail).toBe('fail');
      // Whatever each planner picks (the date index walked in order, or the table read and sorted), status does not bound the read.
      expect(plan.detail).toMatch(/^(reads index table_a_date unbounded by status|reads the whole table|reads index \S+, then sorts)/);
      expect(checkOf(report, 'claim plan (--aging)').status).not.toBe('pass');

      // Once migrated, the configured order's claim is served; where the planner still prefers the date index for
      // the aged read (MariaDB on this small table does), migrate has nothing left to add, and the fix says so.
      expect(runFix(checkOf(report, 'pending index').fix!, ctx().dir, db.url).code).toBe(0);
      const migrated = reportOf(await statusq('doctor', '--db', db.url, '--table', 'table_a', '--json', '--race-jobs', '0'));
      expect(checkOf(migrated, 'claim plan').status).toBe('pass');
      const aged = checkOf(migrated, 'claim plan (--aging)');
      if (aged.status !== 'pass') expect(aged.fix).toMatch(/^table_a_statusq_pending exists, but the planner chose \S+: refresh the table's statistics/);
    });

    it('SIGINT while the race fills its scratch table: exit 130, the report says interrupted, and the scratch table is gone', async () => {
      const { db, dir, statusq } = ctx();
      // A database the doctor can open (a SQLite file exists only once something created it).
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const cli = launchCli(dir, ['doctor', '--db', db.url, '--race-jobs', '100000', '--json']);
      await until('the race to begin', () => cli.stderr().split('\n').some((line) => RACE_BEGINS.test(line)));
      const table = /statusq_doctor_[0-9a-f]{10}/.exec(cli.stderr())![0];
      cli.child.kill('SIGINT');
      const run = await cli.ended;
      expect(run.code, run.stdout + run.stderr).toBe(130);
      expect(run.stderr).toMatch(/SIGINT: stopping the race and dropping statusq_doctor_/);
      const report = JSON.parse(run.stdout) as DoctorReport;
      expect(report.ok).toBe(false);
      expect(checkOf(report, 'race')).toMatchObject({ status: 'fail', detail: expect.stringMatching(/^interrupted by a signal; .*scratch table dropped$/) });
      expect(report.race).toMatchObject({ table, dropped: true });
      const gone = await statusq('stats', '--db', db.url, '--table', table);
      expect(gone.code).toBe(2);
      expect(gone.stderr).toMatch(/does not exist/);
    });

    it('an id that is not unique on its own, or a text status column, fails the table check (exit 1) with the fix; no row changes', async () => {
      const { statusq, db } = ctx();
      for (const [kind, table] of [['sharedId', 'pairs'], ['textStatus', 'texty']] as const) {
        for (const sql of target.fixtures.checked[kind]!(table)) await db.query(sql);
      }
      const date = "'2024-01-01 00:00:00.000'";
      await db.query(`INSERT INTO pairs (id, k, date) VALUES (1, 1, ${date}), (1, 2, ${date}), (2, 1, ${date})`);
      const before = await rowsOf('pairs');

      const shared = await statusq('doctor', '--db', db.url, '--table', 'pairs', '--json', '--race-jobs', '0');
      expect(shared.code, shared.stdout).toBe(1);
      const table = checkOf(reportOf(shared), 'table');
      expect(table).toMatchObject({ status: 'fail', detail: expect.stringMatching(/id column "id" is not unique/) });
      expect(table.fix).toMatch(/^make id the primary key, or CREATE UNIQUE INDEX .*pairs_id_unique.* ON .*pairs.* \(.id.\)$/);
      expect(await rowsOf('pairs')).toEqual(before);

      const texty = await statusq('doctor', '--db', db.url, '--table', 'texty', '--json', '--race-jobs', '0');
      expect(texty.code, texty.stdout).toBe(1);
      expect(checkOf(reportOf(texty), 'table')).toMatchObject({ status: 'fail', detail: expect.stringMatching(/status column "status" is .*, not an integer type/) });
    });

    it.each([
      ['a table that does not exist', (url: string) => ['--db', url, '--table', 'no_such_table'], /table "no_such_table" does not exist \(statusq init creates/],
      ['an invalid table name', (url: string) => ['--db', url, '--table', 'jobs; DROP TABLE jobs'], /invalid table name/],
      ['a URL without a scheme', () => ['--db', 'jobs.db'], /unsupported database URL "jobs.db"/],
      ['a race of no workers', (url: string) => ['--db', url, '--race-workers', '0'], /--race-workers must be 1 to 32, got 0/],
      ['a negative race', (url: string) => ['--db', url, '--race-jobs', '-5'], /--race-jobs must be 0 to 100000, got -5/],
    ] as Array<[string, (url: string) => string[], RegExp]>)('bad input, %s: one line on stderr, exit 2, nothing created', async (_name, args, expected) => {
      const { statusq, db } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const run = await statusq('doctor', ...args(db.url), '--json');
      expect(run.code, run.stderr).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(expected);
      expect(run.stderr.split('\n')).toHaveLength(1);
      expect(await ctx().stats()).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
    });
  });
}
