// `statusq inspect` as an operator runs it, on every dialect: a table worked by a real worker (some rows fail,
// some are abuse), a few claims and pending rows placed by SQL, then each status listed, the limit, JSON,
// one row whole, and bad input. Part of the CLI scenarios (cli-scenarios.ts).
import { expect, it } from 'vitest';
import { generateTableARows, handlerPath } from '@statusq/test-fixtures';
import type { CliContext, CliTarget } from './cli-target.js';

const LISTING_KEYS = ['id', 'date', 'status', 'dedupe_key', 'attempt_count', 'claimed_at', 'worker_id', 'next_attempt_at', 'last_error', 'finished_at'];
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

type JsonRow = Record<string, unknown>;

/**
 * jobs, worked and placed: 1, 5 done; 2, 6 abuse; 3, 4 failed after 2 attempts (4 finished later); 7 to 10
 * pending with dates 1, 3, 2, 4 s past 2024-01-01; 11 claimed in 2020 by a worker long gone, 12 claimed now.
 */
async function everyStatus(c: CliContext, target: CliTarget): Promise<void> {
  const { statusq, db, file } = c;
  expect((await statusq('init', '--db', db.url)).code).toBe(0);
  const worked = ['{"n":1}', '{"n":2,"kind":"abuse"}', '{"n":3,"kind":"poison"}', '{"n":4,"kind":"poison"}', '{"n":5}', '{"n":6,"kind":"abuse"}'];
  expect((await statusq('enqueue', '--db', db.url, '--file', file('worked.ndjson', worked.join('\n')))).code).toBe(0);
  const handler = file(
    'handler.mjs',
    `export default async (job, ctx) => {
       if (job.payload.kind === 'abuse') return ctx.abuse('spam');
       if (job.payload.kind === 'poison') throw new Error('boom ' + job.attempt + ' ' + 'x'.repeat(100));
     };`,
  );
  const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--max-attempts', '2', '--retry-delay', '1ms', '--exit-when-empty');
  expect(run.code, run.stderr).toBe(0);
  expect(run.stdout).toMatch(/done 2, failed 2, abuse 2, retried 2/);
  await db.query(`UPDATE jobs SET finished_at = ${target.dateLiteral('2025-01-01T00:00:00.000Z')} WHERE id = 3`);
  await db.query(`UPDATE jobs SET finished_at = ${target.dateLiteral('2025-01-02T00:00:00.000Z')} WHERE id = 4`);

  expect((await statusq('enqueue', '--db', db.url, '--file', file('later.ndjson', [7, 8, 9, 10, 11, 12].map((n) => `{"n":${n}}`).join('\n')))).code).toBe(0);
  for (const [id, second] of [[7, 1], [8, 3], [9, 2], [10, 4]] as const) {
    await db.query(`UPDATE jobs SET date = ${target.dateLiteral(`2024-01-01T00:00:0${second}.000Z`)} WHERE id = ${id}`);
  }
  await db.query(`UPDATE jobs SET status = 9, claimed_at = ${target.dateLiteral('2020-01-01T00:00:00.000Z')}, worker_id = 'gone:1:a:1' WHERE id = 11`);
  await db.query(`UPDATE jobs SET status = 9, claimed_at = ${target.now}, worker_id = 'live:2:b:1' WHERE id = 12`);
  expect(await c.stats()).toEqual({ pending: 4, processing: 2, done: 2, abuse: 2, failed: 2, other: 0 });
}

export function inspectScenarios(ctx: () => CliContext, target: CliTarget): void {
  const json = async (...args: string[]): Promise<JsonRow[]> => {
    const run = await ctx().statusq('inspect', '--db', ctx().db.url, '--table', 'jobs', '--json', ...args);
    expect(run.code, run.stderr).toBe(0);
    return JSON.parse(run.stdout) as JsonRow[];
  };
  const ids = (rows: readonly JsonRow[]) => rows.map((row) => Number(row.id));

  it('inspect lists each status in its order: failed newest finished first (the default), abuse, processing oldest claim first, pending in claim order; --limit, --order, JSON fields', async () => {
    const c = ctx();
    await everyStatus(c, target);

    const failed = await json();
    expect(ids(failed)).toEqual([4, 3]);
    expect(Object.keys(failed[0]!)).toEqual(LISTING_KEYS);
    expect(failed[0]).toMatchObject({ status: 0, finished_at: '2025-01-02T00:00:00.000Z', last_error: `Error: boom 2 ${'x'.repeat(100)}` });
    expect(Number(failed[0]!.attempt_count)).toBe(2);
    for (const key of ['date', 'claimed_at', 'next_attempt_at']) expect(failed[0]![key], key).toMatch(ISO);

    const abuse = await json('--status', 'abuse');
    expect(ids(abuse).sort()).toEqual([2, 6]);
    expect(abuse.map((row) => row.last_error)).toEqual(['spam', 'spam']);

    const processing = await json('--status', 'processing');
    expect(ids(processing)).toEqual([11, 12]);
    expect(processing.map((row) => row.worker_id)).toEqual(['gone:1:a:1', 'live:2:b:1']);
    expect(processing[0]!.claimed_at).toBe('2020-01-01T00:00:00.000Z');

    expect(ids(await json('--status', 'pending'))).toEqual([10, 8, 9, 7]);
    expect(ids(await json('--status', 'pending', '--order', 'oldest'))).toEqual([7, 9, 8, 10]);
    expect(ids(await json('--status', 'pending', '--limit', '2'))).toEqual([10, 8]);
    expect((await json('--status', 'pending'))[0]).toMatchObject({ date: '2024-01-01T00:00:04.000Z', status: null, claimed_at: null, last_error: null });
  });

  it('inspect prints a readable table: times with ages by the database clock, status names, last_error cut with its length noted', async () => {
    const c = ctx();
    await everyStatus(c, target);
    const failed = await c.statusq('inspect', '--db', c.db.url, '--table', 'jobs');
    expect(failed.code, failed.stderr).toBe(0);
    const lines = failed.stdout.split('\n');
    expect(lines[0]).toBe("2 failed rows of jobs, newest finished first (finished_at); times UTC, ages by the database's clock");
    expect(lines[1]!.split(/\s+/)).toEqual(LISTING_KEYS);
    expect(lines).toHaveLength(5);
    const error = `Error: boom 2 ${'x'.repeat(100)}`;
    expect(lines[3]).toMatch(/^4 +\d{4}-/);
    expect(lines[3]).toContain(' failed ');
    expect(lines[3]).toContain('2025-01-02 00:00:00Z (');
    expect(lines[3]).toContain(`${error.slice(0, 60)}… (${error.length} chars)`);
    expect(lines[3]).not.toContain(error);
    expect(lines[4]).toMatch(/^3 /);

    const processing = await c.statusq('inspect', '--db', c.db.url, '--table', 'jobs', '--status', 'processing');
    expect(processing.stdout.split('\n')[0]).toBe("2 processing rows of jobs, oldest claim first (claimed_at); times UTC, ages by the database's clock");
    expect(processing.stdout).toMatch(/\n11 .* processing .*2020-01-01 00:00:00Z \(\d+d ago\) +gone:1:a:1/);
    // Claimed by the database's own clock a moment ago: an age of seconds, not the hours a zone error would show.
    expect(processing.stdout).toMatch(/\n12 .* processing .*\(\d+s ago\) +live:2:b:1/);

    const pending = await c.statusq('inspect', '--db', c.db.url, '--table', 'jobs', '--status', 'pending', '--limit', '3');
    expect(pending.stdout.split('\n')[0]).toBe("first 3 (--limit 3) pending rows of jobs, in claim order (date newest first); times UTC, ages by the database's clock");
    expect(pending.stdout.split('\n').slice(3).map((line) => line.split(/\s+/).slice(0, 5))).toEqual([
      ['10', '2024-01-01', '00:00:04Z', expect.stringMatching(/^\(\d+d$/), 'ago)'],
      ['8', '2024-01-01', '00:00:03Z', expect.stringMatching(/^\(\d+d$/), 'ago)'],
      ['9', '2024-01-01', '00:00:02Z', expect.stringMatching(/^\(\d+d$/), 'ago)'],
    ]);
    expect(pending.stdout.split('\n')[3]).toMatch(/ pending /);

    // A priority column comes first in the claim order, and the header says so (it said "date newest first"
    // over rows listed by priority; issue 40's probe).
    expect((await c.statusq('init', '--db', c.db.url, '--table', 'ranked', '--with', 'priority')).code).toBe(0);
    for (const [n, priority] of [[1, 0], [2, 5], [3, 0]] as const) {
      expect((await c.statusq('enqueue', '--db', c.db.url, '--table', 'ranked', '--payload', JSON.stringify({ n }), '--priority', String(priority))).code).toBe(0);
    }
    const ranked = await c.statusq('inspect', '--db', c.db.url, '--table', 'ranked', '--status', 'pending', '--json');
    // Ids 1, 2, 3 in enqueue order: 2 (priority 5) first, then the newest of the others.
    expect((JSON.parse(ranked.stdout) as JsonRow[]).map((row) => Number(row.id))).toEqual([2, 3, 1]);
    const rankedText = await c.statusq('inspect', '--db', c.db.url, '--table', 'ranked', '--status', 'pending');
    expect(rankedText.stdout.split('\n')[0]).toBe("3 pending rows of ranked, in claim order (priority highest first, then date newest first); times UTC, ages by the database's clock");

    await c.db.query('DELETE FROM jobs WHERE status = 2');
    expect(await c.statusq('inspect', '--db', c.db.url, '--table', 'jobs', '--status', 'abuse')).toMatchObject({ code: 0, stdout: 'no abuse rows in jobs' });
    expect(await c.statusq('inspect', '--db', c.db.url, '--table', 'jobs', '--status', 'abuse', '--json')).toMatchObject({ code: 0, stdout: '[]' });
  });

  it('inspect --id shows one row whole (payload and result too), --json one object; an id no row has exits 5', async () => {
    const c = ctx();
    await everyStatus(c, target);
    const whole = await c.statusq('inspect', '--db', c.db.url, '--table', 'jobs', '--id', '3');
    expect(whole.code, whole.stderr).toBe(0);
    const fields = Object.fromEntries(whole.stdout.split('\n').map((line) => /^(\S+)\s+(.*)$/.exec(line)!.slice(1, 3) as [string, string]));
    expect(fields).toMatchObject({
      id: '3',
      status: '0 (failed)',
      payload: '{"n":3,"kind":"poison"}',
      result: 'NULL',
      attempt_count: '2',
      last_error: `Error: boom 2 ${'x'.repeat(100)}`,
      finished_at: expect.stringMatching(/^2025-01-01 00:00:00\.000Z \(\d+d ago\)$/),
    });

    const one = await c.statusq('inspect', '--db', c.db.url, '--table', 'jobs', '--id', '3', '--json');
    expect(one.code, one.stderr).toBe(0);
    const row = JSON.parse(one.stdout) as JsonRow;
    expect(Number(row.id)).toBe(3);
    expect(row).toMatchObject({ status: 0, payload: '{"n":3,"kind":"poison"}', result: null, finished_at: '2025-01-01T00:00:00.000Z' });

    // 03 is row 3: an integer id column compares ids as numbers, as requeue --id does.
    expect(JSON.parse((await c.statusq('inspect', '--db', c.db.url, '--table', 'jobs', '--id', '03', '--json')).stdout)).toEqual(row);
    const missing = await c.statusq('inspect', '--db', c.db.url, '--table', 'jobs', '--id', '999', '--json');
    expect(missing).toMatchObject({ code: 5, stdout: '', stderr: 'statusq: inspect: no row of jobs has id 999' });
  });

  it("inspect on the seed's status-only table_a shows id, date, status and its kind column, and a row whole with the application's own columns", async () => {
    const { statusq, db } = ctx();
    for (const ddl of target.fixtures.tableA('table_a')) await db.query(ddl);
    await db.insertTableA(generateTableARows(30, { poisonEvery: 10, abuseEvery: 7 }));
    const run = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    expect(await ctx().stats('table_a')).toMatchObject({ failed: 3, abuse: 5, pending: 0 });

    const listed = await statusq('inspect', '--db', db.url, '--table', 'table_a', '--json');
    expect(listed.code, listed.stderr).toBe(0);
    const rows = JSON.parse(listed.stdout) as JsonRow[];
    expect(rows.map((r) => Number(r.id))).toEqual([30, 20, 10]);
    // The seed's text column `kind` is the table's kind column (by its name), listed after the status.
    for (const row of rows) expect(Object.keys(row)).toEqual(['id', 'date', 'status', 'kind']);

    const text = await statusq('inspect', '--db', db.url, '--table', 'table_a', '--status', 'abuse', '--limit', '2');
    expect(text.stdout.split('\n').slice(0, 2)).toEqual([
      "first 2 (--limit 2) abuse rows of table_a, newest id first; times UTC, ages by the database's clock",
      expect.stringMatching(/^id +date +status +kind$/),
    ]);
    expect(text.stdout.split('\n').slice(3).map((line) => line.split(/\s+/)[0])).toEqual(['29', '22']);

    const whole = await statusq('inspect', '--db', db.url, '--table', 'table_a', '--id', '10');
    expect(whole.code, whole.stderr).toBe(0);
    expect(whole.stdout).toMatch(/^url +https:\/\/example\.test\/item\/10$/m);
    expect(whole.stdout).toMatch(/^kind +poison$/m);
    expect(whole.stdout).toMatch(/^status +0 \(failed\)$/m);
  });

  it('inspect scrubs a database password out of the rows it prints (last_error quoting the URL)', async () => {
    const c = ctx();
    await everyStatus(c, target);
    await c.db.query(`UPDATE jobs SET last_error = 'cannot reach postgres://app:S3cretPw@db.internal/app' WHERE id = 4`);
    const env = { DATABASE_URL: 'postgres://app:S3cretPw@db.internal/app' };
    for (const args of [[], ['--json'], ['--id', '4'], ['--id', '4', '--json']]) {
      const run = await c.statusqWith(env, 'inspect', '--db', c.db.url, '--table', 'jobs', ...args);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout, args.join(' ')).toContain('postgres://app:***@db.internal/app');
      expect(run.stdout, args.join(' ')).not.toContain('S3cretPw');
    }
  });

  it.each([
    ['a status inspect does not list', ['--status', 'done'], /^statusq: inspect: status must be failed, abuse, processing or pending, got "done"$/],
    ['a zero --limit', ['--limit', '0'], /^statusq: inspect: limit must be an integer from 1 to 1000, got 0$/],
    ['a --limit past 1000', ['--limit', '1001'], /^statusq: inspect: limit must be an integer from 1 to 1000, got 1001$/],
    ['a --limit that is no number', ['--limit', 'ten'], /^statusq: --limit must be a whole number, got "ten"$/],
    ['--id with --status', ['--id', '1', '--status', 'failed'], /^statusq: inspect: --id shows one row whole; --status, --kind and --limit choose a listing/],
    ['--id twice', ['--id', '1', '--id', '2'], /^statusq: inspect: --id shows one row; give it once$/],
    ['an --id that is no integer', ['--id', 'abc'], /^statusq: inspect: --id "abc" is not an integer, and id column id is /],
    ['a missing table', ['--table', 'nope'], /^statusq: table "nope" does not exist$/],
  ] as Array<[string, string[], RegExp]>)('inspect refuses %s: exit 2, one line', async (_name, args, message) => {
    const { statusq, db } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const run = await statusq('inspect', '--db', db.url, '--table', 'jobs', ...args);
    expect(run.code, run.stderr).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(message);
    expect(run.stderr.split('\n')).toHaveLength(1);
  });
}
