// `statusq enqueue` on every dialect: payloads and files, delays and run times, priorities, deduplication
// keys, tables whose ids the application assigns, and a file the database rejects a row of. Part of the CLI
// scenarios (cli-scenarios.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { toMs } from '@statusq/conformance';
import type { CliContext, CliTarget } from './cli-target.js';

export function enqueueScenarios(ctx: () => CliContext, target: CliTarget): void {
  it('enqueues payloads (a file, a blank line, non-ASCII text) and works them to done, abuse and failed with retries', async () => {
    const { statusq, stats, db, file } = ctx();
    expect((await statusq('init', '--db', db.url, '--table', 'tasks')).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--table', 'tasks', '--payload', '{"n":1,"text":"grüße ✓"}')).code).toBe(0);
    const rows = file('rows.ndjson', ['{"n":2}', '', '{"n":3,"kind":"abuse"}', '{"n":4,"kind":"poison"}'].join('\n'));
    expect(await statusq('enqueue', '--db', db.url, '--table', 'tasks', '--file', rows)).toMatchObject({ code: 0, stdout: 'enqueued 3 rows into tasks' });
    const handler = file(
      'handler.mjs',
      `export default async (job, ctx) => {
         if (job.payload.kind === 'abuse') return ctx.abuse('spam');
         if (job.payload.kind === 'poison') throw new Error('boom ' + job.attempt);
         return { doubled: job.payload.n * 2, text: job.payload.text };
       };`,
    );
    const run = await statusq('work', '--db', db.url, '--table', 'tasks', '--handler', handler, '--exit-when-empty', '--max-attempts', '3', '--retry-delay', '5ms', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/done 2, failed 1, abuse 1, retried 2/);
    expect(await stats('tasks')).toEqual({ pending: 0, processing: 0, done: 2, abuse: 1, failed: 1, other: 0 });
    const poison = await db.query<{ attempt_count: number; last_error: string }>('SELECT attempt_count, last_error FROM tasks WHERE status = 0');
    expect(poison.map((r) => ({ attempt_count: Number(r.attempt_count), last_error: r.last_error }))).toEqual([{ attempt_count: 3, last_error: 'Error: boom 3' }]);
    const results = (await db.query<{ result: string }>('SELECT result FROM tasks WHERE status = 1 ORDER BY id')).map((r) => JSON.parse(r.result) as unknown);
    expect(results).toEqual([{ doubled: 2, text: 'grüße ✓' }, { doubled: 4 }]);
  });

  it('enqueue --delay and --run-at: the delayed row waits for its time (the database clock), a run time already past is due at once, and work --exit-when-empty waits for both', async () => {
    const { statusq, stats, db, file, dir } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect(await statusq('enqueue', '--db', db.url, '--payload', '{"kind":"later"}', '--delay', '1500ms')).toMatchObject({ code: 0, stdout: 'enqueued 1 row into jobs' });
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"kind":"past"}', '--run-at', '2020-01-01T00:00:00+02:00')).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"kind":"now"}')).code).toBe(0);
    expect(await stats()).toMatchObject({ pending: 3 });
    const seen = join(dir, 'seen.ndjson');
    const handler = file(
      'record.mjs',
      `import { appendFileSync } from 'node:fs';
       export default async (job) => {
         const v = job.row.next_attempt_at;
         appendFileSync(${JSON.stringify(seen)}, JSON.stringify({ kind: job.payload.kind, at: Date.now(), notBefore: v instanceof Date ? v.toISOString() : v }) + '\\n');
       };`,
    );
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--exit-when-empty', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    const lines = readFileSync(seen, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { kind: string; at: number; notBefore: unknown });
    // The two due rows run in the first claim; the delayed one after its time.
    expect(lines.map((l) => l.kind).slice(0, 2).sort()).toEqual(['now', 'past']);
    const later = lines[2]!;
    expect(later.kind).toBe('later');
    expect(later.at).toBeGreaterThanOrEqual(toMs(later.notBefore)! - 5);
    expect(toMs(lines.find((l) => l.kind === 'past')!.notBefore)).toBe(Date.UTC(2019, 11, 31, 22));
    expect(await stats()).toMatchObject({ pending: 0, done: 3 });
  });

  it('init --with priority and enqueue --priority: higher first, then newest; migrate reports the priority index; --priority on a table without the column exits 2 and writes nothing', async () => {
    const { statusq, stats, db, file, dir } = ctx();
    expect(await statusq('init', '--db', db.url, '--table', 'plain')).toMatchObject({ code: 0 });
    const refused = await statusq('enqueue', '--db', db.url, '--table', 'plain', '--payload', '{"n":1}', '--priority', '3');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^statusq: table plain has no priority column, which a job's priority needs \(statusq migrate --with priority adds it\)$/);
    expect(await stats('plain')).toMatchObject({ pending: 0 });
    expect(await statusq('migrate', '--db', db.url, '--table', 'plain', '--with', 'priority')).toMatchObject({ code: 0, stdout: 'migrated plain: added columns priority and index plain_statusq_priority' });

    expect(await statusq('init', '--db', db.url, '--with', 'priority')).toMatchObject({ code: 0, stdout: 'created table jobs' });
    for (const [n, priority] of [[1, '0'], [2, '5'], [3, '-1'], [4, '5'], [5, '0']] as const) {
      expect((await statusq('enqueue', '--db', db.url, '--payload', JSON.stringify({ n }), ...(priority === '0' ? [] : ['--priority', priority]))).code).toBe(0);
    }
    const seen = join(dir, 'seen.txt');
    const handler = file('record.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(seen)}, job.payload.n + ' ' + job.row.priority + '\\n'); };`);
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--concurrency', '1', '--exit-when-empty', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(seen, 'utf8').trim().split('\n')).toEqual(['4 5', '2 5', '5 0', '1 0', '3 -1']);
    for (const bad of ['1.5', 'high']) {
      const result = await statusq('enqueue', '--db', db.url, '--payload', '{"n":9}', '--priority', bad);
      expect(result.code).toBe(2);
      expect(result.stderr).toBe(`statusq: --priority must be a whole number, got ${JSON.stringify(bad)}`);
    }
    const huge = await statusq('enqueue', '--db', db.url, '--payload', '{"n":9}', '--priority', '99999999999');
    expect(huge.code).toBe(2);
    expect(huge.stderr).toMatch(/priority must be an integer from -2147483648 to 2147483647, got 99999999999/);
    expect(await stats()).toMatchObject({ pending: 0, done: 5 });
  });

  it('enqueue --key: a second enqueue of a live key inserts nothing and names the row that holds it (exit 0); once that row is done the key is free; migrate --with dedupe builds the key index; bad keys exit 2 and write nothing', async () => {
    const { statusq, stats, db, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const first = await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}', '--key', 'invoice-7');
    expect(first.code, first.stderr).toBe(0);
    const id = /^enqueued 1 row into jobs \(id (\d+), key "invoice-7"\)$/.exec(first.stdout)?.[1];
    expect(id, first.stdout).toBeDefined();
    expect(await statusq('enqueue', '--db', db.url, '--payload', '{"n":2}', '--key', 'invoice-7')).toMatchObject({
      code: 0,
      stdout: `duplicate: row ${id} holds key "invoice-7" and is pending or processing; nothing inserted into jobs`,
    });
    expect(await stats()).toMatchObject({ pending: 1 });
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', file('noop.mjs', 'export default async () => {};'), '--exit-when-empty', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    const again = await statusq('enqueue', '--db', db.url, '--payload', '{"n":3}', '--key', 'invoice-7');
    expect(again.stdout).toMatch(/^enqueued 1 row into jobs \(id \d+, key "invoice-7"\)$/);
    expect(again.stdout).not.toContain(`id ${id},`);

    const rows = file('two.ndjson', '{"n":4}\n{"n":5}\n');
    for (const [args, message] of [
      // Named as --key, not as the payload (it was `--payload:`, issue 40's probe).
      [['--payload', '{"n":9}', '--key', ''], /^statusq: enqueue: --key: a deduplication key is 1 to 255 characters without surrounding whitespace, got ""$/],
      [['--payload', '{"n":9}', '--key', 'x'.repeat(256)], /^statusq: enqueue: --key: a deduplication key is 1 to 255 characters/],
      [['--file', rows, '--key', 'k'], /^statusq: enqueue: --key names one row, and .*two\.ndjson holds 2/],
    ] as Array<[string[], RegExp]>) {
      const refused = await statusq('enqueue', '--db', db.url, ...args);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(message);
    }
    expect(await stats()).toMatchObject({ pending: 1, done: 1 });

    for (const ddl of target.fixtures.tableA('table_a')) await db.query(ddl);
    const missing = await statusq('enqueue', '--db', db.url, '--table', 'table_a', '--payload', '{"id":1}', '--key', 'k');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe("statusq: table table_a has no dedupe_key column, which a deduplication key needs (statusq migrate --with dedupe adds it)");
    expect(await statusq('migrate', '--db', db.url, '--table', 'table_a', '--with', 'dedupe')).toMatchObject({
      code: 0,
      stdout: 'migrated table_a: added columns dedupe_key and indexes table_a_statusq_pending, table_a_statusq_key',
    });
    expect(await statusq('migrate', '--db', db.url, '--table', 'table_a', '--with', 'dedupe')).toMatchObject({ code: 0, stdout: 'table table_a is up to date; nothing to do' });
    expect(await statusq('migrate', '--db', db.url, '--table', 'table_a', '--with', 'progress')).toMatchObject({ code: 0, stdout: 'migrated table_a: added columns progress' });
    // The relay's index is reported with the column (it was made and not said; issue 40's probe).
    expect(await statusq('migrate', '--db', db.url, '--table', 'table_a', '--with', 'dispatch')).toMatchObject({ code: 0, stdout: 'migrated table_a: added columns dispatched_at and index table_a_statusq_dispatch' });
    expect(await statusq('init', '--db', db.url, '--table', 'reports', '--with', 'progress')).toMatchObject({ code: 0, stdout: 'created table reports' });
    expect(await statusq('doctor', '--db', db.url, '--table', 'reports', '--json', '--race-jobs', '0')).toMatchObject({ code: 0, stdout: expect.stringContaining("progress (a running handler's last ctx.progress)") });
  });

  it('a table whose ids the application assigns (table_a on MySQL and PostgreSQL): a row without its id and a schedule that would insert rows without one exit 2 with the fix before anything is written; a row with its id goes in', async () => {
    const { statusq, stats, db, file } = ctx();
    const ddl = target.fixtures.checked.assignedId;
    if (!ddl) throw new Error('every dialect has an assignedId fixture');
    for (const sql of ddl('assigned')) await db.query(sql);
    // These used to fail in the database ("Field 'id' doesn't have a default value"), the schedule every second.
    const noId = await statusq('enqueue', '--db', db.url, '--table', 'assigned', '--payload', '{"date":"2026-01-01 00:00:00.000"}');
    expect(noId).toMatchObject({ code: 2, stdout: '', stderr: 'statusq: --payload: gives no id, and assigned.id gets none from the database (no AUTO_INCREMENT, identity, serial or DEFAULT): give each row its id' });
    const schedule = file('assigned-schedule.yaml', ['schedules:', '  - name: hourly', "    cron: '0 * * * *'", "    row: { date: '2026-01-01 00:00:00.000' }", ''].join('\n'));
    const scheduled = await statusq('work', '--db', db.url, '--table', 'assigned', '--handler', file('noop.mjs', 'export default async () => {};'), '--schedule', schedule, '--exit-when-empty');
    expect(scheduled.code, scheduled.stderr).toBe(2);
    expect(scheduled.stderr).toContain("schedule hourly: assigned.id gets no value from the database (no AUTO_INCREMENT, identity, serial or DEFAULT), so the schedule's row must give the id");
    expect(await stats('assigned')).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
    expect(await statusq('enqueue', '--db', db.url, '--table', 'assigned', '--payload', '{"id":41,"date":"2026-01-01 00:00:00.000"}')).toMatchObject({ code: 0, stdout: 'enqueued 1 row into assigned' });
    expect(await stats('assigned')).toMatchObject({ pending: 1 });
    // A schedule whose row fixes the id fires once; here that id is taken already, so its first tick stops the
    // scheduler, which drains the worker: exit 2 with the reason, not a failed INSERT every second.
    const fixed = file('fixed-schedule.yaml', ['schedules:', '  - name: every-second', "    cron: '* * * * * *'", "    row: { id: 41, date: '2026-01-01 00:00:00.000' }", '    catchUp: 0', ''].join('\n'));
    const collided = await statusq('work', '--db', db.url, '--table', 'assigned', '--handler', file('noop.mjs', 'export default async () => {};'), '--schedule', fixed);
    expect(collided.code, collided.stderr).toBe(2);
    expect(collided.stderr).toContain("schedule every-second: its row's id is already in assigned, so tick ");
    expect(await stats('assigned')).toMatchObject({ pending: 0, done: 1 });
  });

  describe('enqueue of a file the database rejects a row of', () => {
    // 1,500 rows with blank lines in between (so item and line numbers differ); the 1,201st repeats an id.
    const lines: string[] = [];
    let badLine = 0;
    for (let n = 1; n <= 1500; n++) {
      if (n % 400 === 0) lines.push('');
      lines.push(JSON.stringify({ id: n === 1201 ? 7 : n, name: `row ${n}` }));
      if (n === 1201) badLine = lines.length;
    }
    const count = async () => Number((await ctx().db.query<{ n: unknown }>('SELECT COUNT(*) AS n FROM items'))[0]!.n);

    beforeEach(async () => {
      await ctx().db.query('CREATE TABLE items (id INTEGER PRIMARY KEY, name VARCHAR(50) NOT NULL, status INTEGER)');
    });

    it('commits nothing by default and names the line (exit 1)', async () => {
      const run = await ctx().statusq('enqueue', '--db', ctx().db.url, '--table', 'items', '--file', ctx().file('rows.ndjson', lines.join('\n')));
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(new RegExp(`^statusq: database error \\(UniqueViolation [^)]*\\): \\S*rows\\.ndjson line ${badLine} was rejected by the database, so nothing was committed: `));
      expect(run.stderr.split('\n')).toHaveLength(1);
      expect(await count()).toBe(0);
    });

    it('with --chunk, says how many rows the chunks before the bad line committed', async () => {
      const rows = ctx().file('rows.ndjson', lines.join('\n'));
      const run = await ctx().statusq('enqueue', '--db', ctx().db.url, '--table', 'items', '--file', rows, '--chunk', '500');
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(new RegExp(`: 1000 rows committed before \\S*rows\\.ndjson line ${badLine} failed: `));
      expect(await count()).toBe(1000);
    });
  });
}
