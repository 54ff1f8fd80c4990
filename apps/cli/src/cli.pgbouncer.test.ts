// The CLI behind a real PgBouncer in transaction mode (a private one for this file, in front of the shared
// PostgreSQL server): `work` through it says once in its log that LISTEN/NOTIFY is lost and polls; with
// --listen-db straight to the server its processes are woken again; `doctor` warns with the same advice and
// passes with --listen-db. Each test runs in its own database.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, afterEach, describe, expect, it } from 'vitest';
import { adminUrl, createTestDatabase, dropTestDatabase, pgBouncerBackend, pgBouncerSpec, pgBouncerUnavailable, postgresUnavailable, throughPgBouncer, withClient } from '@statusq/adapter-postgres/testing';
import { PrivateServer } from '@statusq/conformance';
import { childPids, launchCli, logLines, parseStats, runCliInProcess, until, writeFixture, type LaunchedCli } from './test/cli-harness.js';
import { checkOf, reportOf } from './test/cli-doctor-scenarios.js';

const unavailable = (await postgresUnavailable()) ?? pgBouncerUnavailable();

let dir = '';
let bouncer: PrivateServer | null = null;
let direct = '';
let pooled = '';
const launched: LaunchedCli[] = [];
const statusq = (...args: string[]) => runCliInProcess(dir, args);

/** The lines of a `work` log (JSON on stdout) that say notifications are lost. */
const lostLines = (run: LaunchedCli) =>
  logLines(run.stdout().split('\n').filter((line) => line.startsWith('{')).join('\n')).filter((line) => line.code === 'notifications-lost');

/** Backends of the test's database LISTENing on the jobs table's channel: workers whose wake-ups work. */
const listeners = () =>
  withClient(direct, async (c) => Number((await c.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN "statusq_jobs"'`)).rows[0].n));

if (unavailable !== null) {
  if (process.env.STATUSQ_REQUIRE_DATABASES === '1') it('PostgreSQL and PgBouncer are there (STATUSQ_REQUIRE_DATABASES=1)', () => void expect.fail(unavailable));
  else it.skip(`[needs pgbouncer] the CLI behind PgBouncer: ${unavailable}`, () => undefined);
} else {
  describe('statusq CLI behind PgBouncer (pool_mode = transaction)', () => {
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'statusq-cli-pgbouncer-'));
      bouncer = await PrivateServer.start(pgBouncerSpec(pgBouncerBackend(adminUrl())));
    });
    afterAll(async () => {
      await bouncer?.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    beforeEach(async () => {
      direct = await createTestDatabase('statusq_cli');
      pooled = throughPgBouncer(direct, bouncer!.port);
      expect((await statusq('init', '--db', pooled)).code).toBe(0);
    });
    afterEach(async () => {
      for (const run of launched.splice(0)) {
        run.child.kill('SIGKILL');
        await run.ended;
      }
      await dropTestDatabase(direct);
    });

    it('work through PgBouncer: one warn line says LISTEN/NOTIFY is lost and names --listen-db; the worker polls and still works the rows', async () => {
      const handler = writeFixture(dir, 'noop.mjs', 'export default async () => {};');
      const run = launchCli(dir, ['work', '--db', pooled, '--table', 'jobs', '--handler', handler, '--poll-max', '50ms', '--log-format', 'json']);
      launched.push(run);
      await until('the warning about lost notifications', () => lostLines(run).length > 0, 20_000);
      const [line] = lostLines(run);
      expect(line).toMatchObject({ level: 'warn', msg: expect.stringMatching(/^LISTEN\/NOTIFY does not work through this URL: .*transaction-mode pooler.*polling.*--poll-max.*; fix: .*--listen-db URL or STATUSQ_LISTEN_DATABASE_URL/) });
      expect(await listeners()).toBe(0);
      expect((await statusq('enqueue', '--db', pooled, '--payload', '{"n":1}')).code).toBe(0);
      await until('the row to be done by polling', async () => parseStats(await statusq('stats', '--db', pooled, '--table', 'jobs', '--json')).done === 1);
      run.child.kill('SIGTERM');
      const ended = await run.ended;
      expect(ended.code, ended.stderr).toBe(0);
      expect(lostLines(run)).toHaveLength(1);
    });

    // Whether the wake-up itself picks a row up at once (the worker's polls 30 s apart) is the adapter's test
    // (postgres.pgbouncer.test.ts); here, that the flag reaches every worker process's listening connection.
    it('work --listen-db straight to the server, --processes 2: both children LISTEN there (the URL reaches them through the environment), no warning, and a row enqueued through PgBouncer is worked', async () => {
      const handler = writeFixture(dir, 'noop.mjs', 'export default async () => {};');
      const run = launchCli(dir, ['work', '--db', pooled, '--listen-db', direct, '--table', 'jobs', '--handler', handler, '--processes', '2', '--poll-max', '30s', '--log-format', 'json']);
      launched.push(run);
      await until('both worker processes to listen on the server', async () => (await listeners()) === 2, 20_000);
      // The launcher hands the URL on in STATUSQ_LISTEN_DATABASE_URL, never on a command line (ps shows those).
      const children = childPids(run.child.pid!);
      expect(children).toHaveLength(2);
      for (const pid of children) expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).not.toContain('listen-db');
      expect((await statusq('enqueue', '--db', pooled, '--payload', '{"n":1}')).code).toBe(0);
      await until('the row to be done', async () => parseStats(await statusq('stats', '--db', pooled, '--table', 'jobs', '--json')).done === 1, 40_000);
      run.child.kill('SIGTERM');
      const ended = await run.ended;
      expect(ended.code, ended.stderr).toBe(0);
      expect(lostLines(run)).toEqual([]);
    });

    it('doctor through PgBouncer warns that LISTEN/NOTIFY is lost, naming --listen-db (exit 0: workers still run); with --listen-db the check passes and the race runs exactly once through the pooler', async () => {
      const behind = await statusq('doctor', '--db', pooled, '--race-jobs', '0', '--json');
      expect(behind.code, behind.stdout + behind.stderr).toBe(0);
      expect(checkOf(reportOf(behind), 'notify')).toMatchObject({
        status: 'warn',
        detail: expect.stringMatching(/^LISTEN\/NOTIFY does not work through this URL: a NOTIFY sent through it did not reach the listening connection within 5 s, as behind a transaction-mode pooler/),
        fix: expect.stringMatching(/statusq --listen-db URL or STATUSQ_LISTEN_DATABASE_URL/),
      });
      const fixed = await statusq('doctor', '--db', pooled, '--listen-db', direct, '--race-jobs', '200', '--race-workers', '2', '--json');
      expect(fixed.code, fixed.stdout + fixed.stderr).toBe(0);
      const report = reportOf(fixed);
      expect(checkOf(report, 'notify')).toMatchObject({ status: 'pass', detail: expect.stringMatching(/reached a connection to listenUrl \(--listen-db\) in \d+ ms/) });
      expect(report.race).toMatchObject({ jobs: 200, done: 200, ranTwice: 0, neverRan: 0, dropped: true });
    });
  });
}
