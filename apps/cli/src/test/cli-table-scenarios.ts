// The commands that make, change and tidy a table, on every dialect: init, migrate (columns of the table's own
// or a claims table beside it), stats, requeue and prune. Part of the CLI scenarios (cli-scenarios.ts).
import { describe, expect, it } from 'vitest';
import { generateTableARows, handlerPath } from '@statusq/test-fixtures';
import type { CliContext, CliTarget } from './cli-target.js';

export function tableScenarios(ctx: () => CliContext, target: CliTarget): void {
  it('init creates a managed table once; a second init changes nothing', async () => {
    const { statusq, stats, db } = ctx();
    expect(await statusq('init', '--db', db.url)).toMatchObject({ code: 0, stdout: 'created table jobs' });
    expect(await statusq('init', '--db', db.url)).toMatchObject({ code: 0, stdout: 'table jobs already exists; nothing to do' });
    expect(await stats()).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
  });

  it('cancel: a pending and a processing --id row end failed with "cancelled: <reason>"; a done row and an unknown id are listed (exit 5); no --id, and a table without last_error, are bad input (exit 2)', async () => {
    const { statusq, stats, db, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--file', file('rows.ndjson', [1, 2, 3].map((n) => `{"n":${n}}`).join('\n')))).code).toBe(0);
    // Row 2 as a worker holds it, row 3 finished: cancel takes the first two and lists the third.
    await db.query('UPDATE jobs SET status = 9 WHERE id = 2');
    await db.query('UPDATE jobs SET status = 1 WHERE id = 3');
    const run = await statusq('cancel', '--db', db.url, '--table', 'jobs', '--id', '1', '--id', '2', '--reason', 'not needed');
    expect(run, run.stderr).toMatchObject({ code: 0, stdout: "cancelled 2 rows of jobs (pending ones end failed; running ones' workers abort them at their next heartbeat)" });
    expect(await stats()).toMatchObject({ pending: 0, processing: 0, done: 1, failed: 2 });
    expect((await db.query<{ last_error: unknown }>('SELECT last_error FROM jobs WHERE id <= 2 ORDER BY id')).map((r) => r.last_error)).toEqual(['cancelled: not needed', 'cancelled: not needed']);
    expect(await statusq('cancel', '--db', db.url, '--table', 'jobs', '--id', '3', '--id', '999', '--id', '1')).toMatchObject({
      code: 5,
      stdout: "cancelled 0 rows of jobs (pending ones end failed; running ones' workers abort them at their next heartbeat); not cancelled: 3 (status done), 999 (not found), 1 (status failed)",
    });
    expect(await stats()).toMatchObject({ done: 1, failed: 2 });
    expect(await statusq('cancel', '--db', db.url, '--table', 'jobs')).toMatchObject({ code: 2, stderr: expect.stringMatching(/^statusq: cancel: --id is required/) });
    await db.query('CREATE TABLE plain (id INTEGER PRIMARY KEY, date TIMESTAMP NULL, status INTEGER NULL)');
    await db.query('INSERT INTO plain (id, status) VALUES (1, NULL)');
    expect(await statusq('cancel', '--db', db.url, '--table', 'plain', '--id', '1')).toMatchObject({ code: 2, stderr: expect.stringMatching(/last_error column.*migrate --with retries/) });
    expect((await db.query<{ status: unknown }>('SELECT status FROM plain')).map((r) => r.status)).toEqual([null]);
  });

  it('prune: --dry-run counts, then deletes (or --archive moves) finished rows past --older-than in batches; pending rows and refused statuses stay (exit 2)', async () => {
    const { statusq, stats, db, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--file', file('rows.ndjson', [1, 2, 3, 4, 5].map((n) => `{"n":${n}}`).join('\n')))).code).toBe(0);
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', file('noop.mjs', 'export default async () => {};'), '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    await db.query(`UPDATE jobs SET finished_at = ${target.dateLiteral('2020-01-01T00:00:00.000Z')} WHERE id <= 3`);
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":6}')).code).toBe(0);

    expect(await statusq('prune', '--db', db.url, '--table', 'jobs', '--status', 'done', '--older-than', '30d', '--dry-run')).toMatchObject({
      code: 0,
      stdout: 'would delete 3 done rows of jobs finished more than 30d ago (by finished_at); nothing changed (--dry-run)',
    });
    expect(await stats()).toMatchObject({ pending: 1, done: 5 });
    expect(await statusq('prune', '--db', db.url, '--table', 'jobs', '--status', 'done', '--older-than', '30d', '--batch', '2', '--archive', 'jobs_archive')).toMatchObject({
      code: 0,
      stdout: 'moved 3 done rows of jobs finished more than 30d ago (by finished_at) to jobs_archive (created) in 2 batches',
    });
    expect(await stats()).toMatchObject({ pending: 1, done: 2 });
    expect((await db.query<{ n: unknown }>('SELECT COUNT(*) AS n FROM jobs_archive WHERE status = 1')).map((r) => Number(r.n))).toEqual([3]);
    expect(await statusq('prune', '--db', db.url, '--table', 'jobs', '--status', 'done,abuse,failed', '--older-than', '0s')).toMatchObject({
      code: 0,
      stdout: 'deleted 2 done, abuse, failed rows of jobs finished more than 0s ago (by finished_at) in 1 batch',
    });
    for (const [args, message] of [
      [['--status', 'pending', '--older-than', '1d'], /^statusq: prune removes finished rows only \(done, abuse, failed\); "pending" rows are still to run or running$/],
      [['--status', 'done'], /^statusq: prune: --older-than is required/],
      [['--status', 'done', '--older-than', '30'], /--older-than/],
    ] as Array<[string[], RegExp]>) {
      const refused = await statusq('prune', '--db', db.url, '--table', 'jobs', ...args);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(message);
    }
    expect(await stats()).toMatchObject({ pending: 1, done: 0 });
  });

  it("migrates the seed's table_a (twice: the second is a no-op), works it with the plain .mjs fixture handler, and requeues", async () => {
    const { statusq, stats, db } = ctx();
    for (const ddl of target.fixtures.tableA('table_a')) await db.query(ddl);
    await db.insertTableA(generateTableARows(300, { poisonEvery: 50, abuseEvery: 40 }));
    expect(await statusq('migrate', '--db', db.url, '--table', 'table_a', '--with', 'leases,retries')).toMatchObject({
      code: 0,
      stdout: 'migrated table_a: added columns claimed_at, worker_id, attempt_count, next_attempt_at, last_error and index table_a_statusq_pending',
    });
    expect(await statusq('migrate', '--db', db.url, '--table', 'table_a', '--with', 'leases,retries')).toMatchObject({ code: 0, stdout: 'table table_a is up to date; nothing to do' });

    const run = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--concurrency', '8', '--batch', '16', '--retry-delay', '1ms', '--lease', '30s', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    expect(await stats('table_a')).toEqual({ pending: 0, processing: 0, done: 286, abuse: 8, failed: 6, other: 0 });
    const [poison] = await db.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM table_a WHERE kind = 'poison' AND status = 0 AND attempt_count = 3`);
    expect(Number(poison!.n)).toBe(6);

    // No finished_at here: the date column says when a row was queued, not when it was worked.
    const refused = await statusq('prune', '--db', db.url, '--table', 'table_a', '--status', 'done', '--older-than', '30d', '--dry-run');
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(/^statusq: prune: table_a has no finished_at column, so when its rows finished is not known; migrate --with results adds it, or --by-order-column \(byOrderColumn\) judges age by date/);
    expect(await statusq('prune', '--db', db.url, '--table', 'table_a', '--status', 'done', '--older-than', '0s', '--by-order-column', '--dry-run')).toMatchObject({
      code: 0,
      stdout: 'would delete 286 done rows of table_a queued more than 0s ago (by date); nothing changed (--dry-run)',
    });

    expect(await statusq('requeue', '--db', db.url, '--table', 'table_a', '--status', 'failed', '--id', '50', '--id', '100')).toMatchObject({ code: 0, stdout: 'requeued 2 failed rows of table_a' });
    expect(await stats('table_a')).toMatchObject({ pending: 2, failed: 4 });
    expect(await statusq('requeue', '--db', db.url, '--table', 'table_a', '--status', 'abuse')).toMatchObject({ code: 0, stdout: 'requeued 8 abuse rows of table_a' });
    expect(await stats('table_a')).toMatchObject({ pending: 10, abuse: 0 });
  });

  it("migrate --beside on the seed's table_a: its columns stay as they were, work runs retries and give-ups with the counts in the claims table, inspect shows them, doctor passes, prune takes the claims rows with the rows; --beside on a table with lease columns is exit 2", async () => {
    const { statusq, stats, db } = ctx();
    for (const ddl of target.fixtures.tableA('table_a')) await db.query(ddl);
    await db.insertTableA(generateTableARows(300, { poisonEvery: 50, abuseEvery: 40, flakyEvery: 30 }));
    expect(await statusq('migrate', '--db', db.url, '--table', 'table_a', '--beside')).toMatchObject({
      code: 0,
      stdout: 'migrated table_a: added claims table table_a_statusq and index table_a_statusq_pending',
    });
    expect(await statusq('migrate', '--db', db.url, '--table', 'table_a', '--beside')).toMatchObject({ code: 0, stdout: 'table table_a is up to date; nothing to do' });
    const [row] = await db.query<Record<string, unknown>>('SELECT * FROM table_a WHERE id = 1');
    expect(Object.keys(row!).sort()).toEqual(['date', 'id', 'kind', 'status', 'url']);

    const run = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--concurrency', '8', '--batch', '16', '--retry-delay', '1ms', '--lease', '30s', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    expect(await stats('table_a')).toEqual({ pending: 0, processing: 0, done: 286, abuse: 8, failed: 6, other: 0 });
    const [counted] = await db.query<{ n: unknown; attempts: unknown }>(`SELECT COUNT(*) AS n, SUM(s.attempt_count) AS attempts FROM table_a t JOIN table_a_statusq s ON s.id = t.id WHERE t.kind = 'poison' AND t.status = 0 AND s.last_error LIKE '%unreachable host%'`);
    expect([Number(counted!.n), Number(counted!.attempts)]).toEqual([6, 18]);
    const [flaky] = await db.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM table_a t JOIN table_a_statusq s ON s.id = t.id WHERE t.kind = 'flaky' AND t.status = 1 AND s.attempt_count = 1`);
    expect(Number(flaky!.n)).toBe(10);
    const [after] = await db.query<Record<string, unknown>>('SELECT * FROM table_a WHERE id = 1');
    expect(Object.keys(after!).sort()).toEqual(['date', 'id', 'kind', 'status', 'url']);

    const shown = await statusq('inspect', '--db', db.url, '--table', 'table_a', '--id', '50');
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^attempt_count\s+3$/m);
    expect(shown.stdout).toMatch(/^last_error\s+Error: unreachable host/m);
    const doctor = await statusq('doctor', '--db', db.url, '--table', 'table_a', '--race-jobs', '200', '--race-workers', '2');
    expect(doctor.code, doctor.stdout).toBe(0);
    expect(doctor.stdout).toMatch(/pass\s+claims table\s+table_a_statusq holds the claim state of table_a, keyed by id/);
    expect(doctor.stdout).toMatch(/pass\s+privileges\s+SELECT, UPDATE, INSERT on table_a; SELECT, UPDATE, INSERT on table_a_statusq/);

    const [done] = await db.query<{ id: unknown }>('SELECT id FROM table_a WHERE status = 1 ORDER BY id LIMIT 1');
    await db.query(`DELETE FROM table_a WHERE id = ${Number(done!.id)}`);
    expect(await statusq('prune', '--db', db.url, '--table', 'table_a', '--status', 'abuse', '--older-than', '0s', '--dry-run')).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^would delete 8 abuse rows of table_a finished more than 0s ago \(by finished_at\), and 1 row of table_a_statusq whose row is gone; nothing changed/),
    });

    for (const ddl of target.fixtures.tableA('table_b')) await db.query(ddl);
    expect(await statusq('migrate', '--db', db.url, '--table', 'table_b', '--with', 'leases')).toMatchObject({ code: 0 });
    const both = await statusq('migrate', '--db', db.url, '--table', 'table_b', '--beside');
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/already keeps claim state in columns of its own \(claimed_at, worker_id\).*one or the other/);
  });

  describe('requeue --status processing judges rows by their lease', () => {
    const statusOf = async (table: string, id: string | number) => {
      const [row] = await ctx().db.query<{ status: unknown }>(`SELECT status FROM ${table} WHERE id = ${typeof id === 'number' ? id : `'${id}'`}`);
      return row!.status === null ? null : Number(row!.status);
    };

    it('with leases: a live lease is left (and reported) unless --force; an expired one is requeued and its attempt counts', async () => {
      const { statusq, stats, db, file } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      expect((await statusq('enqueue', '--db', db.url, '--file', file('three.ndjson', '{"n":1}\n{"n":2}\n{"n":3}\n'))).code).toBe(0);
      // Row 1 is held by a running worker (claimed just now), row 2 by one that died long ago.
      await db.query(`UPDATE jobs SET status = 9, claimed_at = ${target.now} WHERE id = 1`);
      await db.query(`UPDATE jobs SET status = 9, claimed_at = ${target.dateLiteral('2020-01-01T00:00:00.000Z')} WHERE id = 2`);

      const run = await statusq('requeue', '--db', db.url, '--table', 'jobs', '--status', 'processing');
      expect(run, run.stderr).toMatchObject({ code: 0, stdout: expect.stringMatching(/^requeued 1 processing row of jobs with an expired lease \(lease 5m assumed.*\); 1 processing row left: lease live/) });
      expect(await stats()).toEqual({ pending: 2, processing: 1, done: 0, abuse: 0, failed: 0, other: 0 });
      expect(await statusOf('jobs', 1)).toBe(9);
      const [reaped] = await db.query<{ attempt_count: unknown; last_error: string }>('SELECT attempt_count, last_error FROM jobs WHERE id = 2');
      expect({ attempts: Number(reaped!.attempt_count), error: reaped!.last_error }).toEqual({ attempts: 1, error: expect.stringMatching(/^lease expired after 300000 ms/) });

      // A lease longer than the claim's age keeps the claim; naming an id reports why it stayed.
      await db.query(`UPDATE jobs SET status = 9, claimed_at = ${target.now} WHERE id = 2`);
      expect(await statusq('requeue', '--db', db.url, '--table', 'jobs', '--status', 'processing', '--lease', '1h', '--id', '2')).toMatchObject({
        code: 5,
        stdout: expect.stringMatching(/^requeued 0 processing rows of jobs with an expired lease \(lease 1h\); 1 processing row left: lease live.*; not requeued: 2 \(lease live\)$/),
      });
      expect(await statusq('requeue', '--db', db.url, '--table', 'jobs', '--status', 'processing', '--force')).toMatchObject({
        code: 0,
        stdout: 'requeued 2 processing rows of jobs (--force: live leases included)',
      });
      expect(await stats()).toEqual({ pending: 3, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
    });

    it('without leases: refused (exit 2, row untouched) unless --force', async () => {
      const { statusq, db } = ctx();
      await db.query('CREATE TABLE plain (id INTEGER PRIMARY KEY, status INTEGER)');
      await db.query('INSERT INTO plain (id, status) VALUES (1, 9), (2, NULL)');
      const refused = await statusq('requeue', '--db', db.url, '--table', 'plain', '--order-column', 'id', '--status', 'processing');
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/table plain has no lease column, so statusq cannot tell a crashed worker's rows from running ones; stop every worker, then run again with --force$/);
      expect(refused.stderr.split('\n')).toHaveLength(1);
      expect(await statusOf('plain', 1)).toBe(9);
      expect(await statusq('requeue', '--db', db.url, '--table', 'plain', '--order-column', 'id', '--status', 'processing', '--force')).toMatchObject({
        code: 0,
        stdout: 'requeued 1 processing row of plain',
      });
      expect(await statusOf('plain', 1)).toBe(null);
    });
  });

  describe('requeue --id compares ids as the id column holds them and reports the ones it left', () => {
    it('integer ids: not found and wrong status reported (exit 5); 02 is row 2; abc is bad input', async () => {
      const { statusq, stats, db, file } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      expect((await statusq('enqueue', '--db', db.url, '--file', file('three.ndjson', '{"n":1}\n{"n":2}\n{"n":3}\n'))).code).toBe(0);
      await db.query('UPDATE jobs SET status = 0 WHERE id IN (1, 2)');
      await db.query('UPDATE jobs SET status = 1 WHERE id = 3');
      expect(await statusq('requeue', '--db', db.url, '--table', 'jobs', '--status', 'failed', '--id', '1', '--id', '3', '--id', '99')).toMatchObject({
        code: 5,
        stdout: 'requeued 1 failed row of jobs; not requeued: 3 (status done), 99 (not found)',
      });
      expect(await statusq('requeue', '--db', db.url, '--table', 'jobs', '--status', 'failed', '--id', '02')).toMatchObject({ code: 0, stdout: 'requeued 1 failed row of jobs' });
      const bad = await statusq('requeue', '--db', db.url, '--table', 'jobs', '--status', 'failed', '--id', 'abc');
      expect(bad).toMatchObject({ code: 2, stderr: expect.stringMatching(/--id "abc" is not an integer/) });
      expect(await stats()).toEqual({ pending: 2, processing: 0, done: 1, abuse: 0, failed: 0, other: 0 });
    });

    it("an id beyond the id column's integers is no row's: not found (exit 5) on every dialect, as inspect says", async () => {
      // PostgreSQL refused such an id with an error (exit 1) where MariaDB found no row (issue 40's probe).
      const { statusq, db } = ctx();
      await db.query('CREATE TABLE small_ids (id SMALLINT PRIMARY KEY, status INTEGER)');
      await db.query('INSERT INTO small_ids (id, status) VALUES (7, 0)');
      const beyond = ['40000', '9223372036854775808', '99999999999999999999999', '-99999999999999999999999'];
      expect(await statusq('requeue', '--db', db.url, '--table', 'small_ids', '--order-column', 'id', '--status', 'failed', ...beyond.flatMap((id) => ['--id', id]), '--id', '7')).toMatchObject({
        code: 5,
        stdout: `requeued 1 failed row of small_ids; not requeued: ${beyond.map((id) => `${id} (not found)`).join(', ')}`,
      });
      for (const id of beyond) {
        expect(await statusq('inspect', '--db', db.url, '--table', 'small_ids', '--order-column', 'id', '--id', id), id).toMatchObject({ code: 5, stdout: '', stderr: `statusq: inspect: no row of small_ids has id ${id}` });
        expect(await statusq('requeue', '--db', db.url, '--table', 'small_ids', '--order-column', 'id', '--status', 'failed', '--id', id), id).toMatchObject({ code: 5, stdout: `requeued 0 failed rows of small_ids; not requeued: ${id} (not found)` });
      }
    });

    it("text ids: '010' is not '10', and a number-like id never makes the database cast the column", async () => {
      const { statusq, db } = ctx();
      await db.query('CREATE TABLE codes (id VARCHAR(20) PRIMARY KEY, status INTEGER)');
      await db.query(`INSERT INTO codes (id, status) VALUES ('10', 0), ('x', 0)`);
      const statuses = async () => (await db.query<{ id: string; status: unknown }>('SELECT id, status FROM codes ORDER BY id')).map((r) => [r.id, r.status === null ? null : Number(r.status)]);
      expect(await statusq('requeue', '--db', db.url, '--table', 'codes', '--order-column', 'id', '--status', 'failed', '--id', '010')).toMatchObject({
        code: 5,
        stdout: 'requeued 0 failed rows of codes; not requeued: 010 (not found)',
      });
      expect(await statuses()).toEqual([['10', 0], ['x', 0]]);
      expect(await statusq('requeue', '--db', db.url, '--table', 'codes', '--order-column', 'id', '--status', 'failed', '--id', '10')).toMatchObject({ code: 0, stdout: 'requeued 1 failed row of codes' });
      expect(await statuses()).toEqual([['10', null], ['x', 0]]);
    });
  });

  it('stats counts rows whose status is none of the five codes as other, so the counts add up', async () => {
    const { statusq, db } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--file', ctx().file('rows.ndjson', '{"n":1}\n{"n":2}\n{"n":3}\n{"n":4}\n'))).code).toBe(0);
    await db.query('UPDATE jobs SET status = 7 WHERE id = 1');
    await db.query('UPDATE jobs SET status = -1 WHERE id = 2');
    await db.query('UPDATE jobs SET status = 1 WHERE id = 3');
    expect(await statusq('stats', '--db', db.url, '--table', 'jobs')).toMatchObject({ code: 0, stdout: 'pending 1  processing 0  done 1  abuse 0  failed 0  other 2' });
    expect(await ctx().stats()).toEqual({ pending: 1, processing: 0, done: 1, abuse: 0, failed: 0, other: 2 });
  });
}
