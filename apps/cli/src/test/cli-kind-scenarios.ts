// Kinds from the command line on every dialect: init/migrate --with kinds, enqueue --kind, work --handlers (a
// directory of <kind>.mjs) and --handler (an object of kinds), stats by kind, and their bad input; and what shows
// a kind waiting for a handler: inspect --kind, doctor's counts and warnings by kind, work's warn line. Part of
// the CLI scenarios (cli-scenarios.ts).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { DoctorReport } from '../doctor-report.js';
import { logLines } from './cli-harness.js';
import type { CliContext, CliTarget } from './cli-target.js';

export function kindScenarios(ctx: () => CliContext, target: CliTarget): void {
  it('work --handlers DIR runs each kind with its file and leaves other kinds pending; --handler with an object of kinds does the same; stats counts by kind', async () => {
    const { statusq, db, dir, file } = ctx();
    expect(await statusq('init', '--db', db.url, '--table', 'jobs', '--with', 'kinds')).toMatchObject({ code: 0, stdout: 'created table jobs' });
    for (const [kind, count] of [['email', 3], ['report.daily', 2], ['archive', 1]] as const) {
      for (let n = 0; n < count; n++) expect((await statusq('enqueue', '--db', db.url, '--kind', kind, '--payload', JSON.stringify({ n }))).code).toBe(0);
    }
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"none":true}')).code).toBe(0);
    const handlers = join(dir, 'handlers');
    mkdirSync(handlers);
    writeFileSync(join(handlers, 'email.mjs'), 'export default async (job) => ({ sent: job.payload.n, kind: job.kind });');
    writeFileSync(join(handlers, 'report.daily.mjs'), 'export default async (job) => ({ made: job.payload.n, kind: job.kind });');
    // A fleet-wide limit of one email at a time still drains them (one by one), and leaves the other kinds free.
    const run = await statusq('work', '--db', db.url, '--handlers', handlers, '--table', 'jobs', '--kind-concurrency', 'email=1', '--exit-when-empty', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/done 5, failed 0, abuse 0/);
    const results = await db.query<{ kind: string; result: string }>("SELECT kind, result FROM jobs WHERE status = 1 ORDER BY id");
    expect(results.map((r) => [r.kind, (JSON.parse(r.result) as { kind: string }).kind])).toEqual([...Array(3).fill(['email', 'email']), ...Array(2).fill(['report.daily', 'report.daily'])]);
    const stats = await statusq('stats', '--db', db.url, '--table', 'jobs', '--json');
    expect(JSON.parse(stats.stdout)).toMatchObject({ pending: 2, done: 5, kinds: { '': { pending: 1 }, archive: { pending: 1 }, email: { done: 3 }, 'report.daily': { done: 2 } } });
    expect((await statusq('stats', '--db', db.url, '--table', 'jobs')).stdout.split('\n')).toContain('  kind archive: pending 1  processing 0  done 0  abuse 0  failed 0  other 0');

    const byKind = file('kinds.mjs', 'export default { archive: async () => "archived" };');
    const archived = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', byKind, '--exit-when-empty', '--poll-max', '50ms');
    expect(archived.code, archived.stderr).toBe(0);
    expect(JSON.parse((await statusq('stats', '--db', db.url, '--table', 'jobs', '--json')).stdout)).toMatchObject({ pending: 1, done: 6, kinds: { '': { pending: 1 }, archive: { done: 1 } } });
  });

  it('bad kinds input exits 2 naming the fix, before anything is written or claimed', async () => {
    const { statusq, stats, db, dir, file } = ctx();
    expect((await statusq('init', '--db', db.url, '--table', 'plain')).code).toBe(0);
    expect(await statusq('enqueue', '--db', db.url, '--table', 'plain', '--kind', 'email', '--payload', '{}')).toMatchObject({
      code: 2,
      stderr: "statusq: table plain has no kind column, which a job's kind needs (statusq migrate --with kinds adds it)",
    });
    expect((await statusq('init', '--db', db.url, '--table', 'jobs', '--with', 'kinds')).code).toBe(0);
    expect(await statusq('enqueue', '--db', db.url, '--kind', "x'; DROP TABLE jobs; --", '--payload', '{}')).toMatchObject({ code: 2, stderr: expect.stringMatching(/^statusq: enqueue: kind must be 1 to 100 letters/) });
    expect((await statusq('enqueue', '--db', db.url, '--kind', 'email', '--payload', '{}')).code).toBe(0);
    const notFunctions = file('bad.mjs', 'export default { email: "nope" };');
    expect(await statusq('work', '--db', db.url, '--handler', notFunctions, '--table', 'jobs', '--exit-when-empty')).toMatchObject({ code: 2, stderr: expect.stringMatching(/default export's "email" is a string, not a function/) });
    const emptyDir = join(dir, 'empty');
    mkdirSync(emptyDir);
    expect(await statusq('work', '--db', db.url, '--handlers', emptyDir, '--table', 'jobs', '--exit-when-empty')).toMatchObject({ code: 2, stderr: expect.stringMatching(/has no \.mjs or \.js file/) });
    const handlers = join(dir, 'handlers');
    mkdirSync(handlers);
    writeFileSync(join(handlers, 'email.mjs'), 'export default async () => undefined;');
    expect(await statusq('work', '--db', db.url, '--handlers', handlers, '--handler', notFunctions, '--table', 'jobs')).toMatchObject({ code: 2, stderr: 'statusq: work: give --handler or --handlers, not both' });
    expect(await statusq('work', '--db', db.url, '--handlers', handlers, '--table', 'plain', '--exit-when-empty')).toMatchObject({ code: 2, stderr: expect.stringMatching(/table plain has no kind column, which handlers by kind need/) });
    expect(await statusq('migrate', '--db', db.url, '--table', 'plain', '--with', 'kinds', '--kind-column', 'nope')).toMatchObject({ code: 2, stderr: expect.stringMatching(/has no kind column "nope"/) });
    for (const [limit, message] of [['email=0', /email's limit must be a whole number from 1 to 100000, got "0"/], ['email', /takes kind=limit pairs/], ['a;b=1', /kind must be 1 to 100 letters/]] as const) {
      expect(await statusq('work', '--db', db.url, '--handlers', handlers, '--table', 'jobs', '--kind-concurrency', limit, '--exit-when-empty')).toMatchObject({ code: 2, stderr: expect.stringMatching(message) });
    }
    expect(await statusq('work', '--db', db.url, '--handler', file('one.mjs', 'export default async () => undefined;'), '--table', 'jobs', '--kind-concurrency', 'email=1', '--exit-when-empty')).toMatchObject({ code: 2, stderr: expect.stringMatching(/kindConcurrency limits kinds: it needs handlers by kind/) });
    expect(await stats('jobs')).toMatchObject({ pending: 1, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
  });

  it('a kind no worker handles is seen: inspect lists the kind column and --kind K, doctor counts by kind and warns about the kind that waits too long with none processing, work warns once per kind it has no handler for', async () => {
    const { statusq, db, dir } = ctx();
    expect((await statusq('init', '--db', db.url, '--table', 'jobs', '--with', 'kinds')).code).toBe(0);
    for (const kind of ['email', 'email', 'archive']) expect((await statusq('enqueue', '--db', db.url, '--kind', kind, '--payload', '{}')).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{}')).code).toBe(0);
    // The archive row (id 3) has waited three hours; the others were enqueued just now.
    await db.query(`UPDATE jobs SET date = ${target.dateLiteral(new Date(Date.now() - 3 * 3_600_000).toISOString())} WHERE id = 3`);

    const listed = await statusq('inspect', '--db', db.url, '--table', 'jobs', '--status', 'pending', '--json');
    expect(listed.code, listed.stderr).toBe(0);
    const rows = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
    expect(Object.keys(rows[0]!).slice(0, 4)).toEqual(['id', 'date', 'status', 'kind']);
    expect(rows.map((row) => [Number(row.id), row.kind]).sort((a, b) => Number(a[0]) - Number(b[0]))).toEqual([[1, 'email'], [2, 'email'], [3, 'archive'], [4, null]]);
    const archive = await statusq('inspect', '--db', db.url, '--table', 'jobs', '--status', 'pending', '--kind', 'archive', '--json');
    expect((JSON.parse(archive.stdout) as Array<Record<string, unknown>>).map((row) => [Number(row.id), row.kind])).toEqual([[3, 'archive']]);
    const text = await statusq('inspect', '--db', db.url, '--table', 'jobs', '--status', 'pending', '--kind', 'email');
    expect(text.stdout.split('\n')[0]).toMatch(/^2 pending rows of kind email of jobs, in claim order/);
    expect(text.stdout.split('\n')[1]).toMatch(/^id\s+date\s+status\s+kind\s/);
    expect((await statusq('inspect', '--db', db.url, '--table', 'jobs', '--status', 'failed', '--kind', 'email')).stdout).toBe('no failed rows of kind email in jobs');
    expect(await statusq('inspect', '--db', db.url, '--table', 'jobs', '--kind', "x' OR '1'='1")).toMatchObject({ code: 2, stderr: expect.stringMatching(/^statusq: inspect: kind must be 1 to 100 letters, digits or _ \. : \/ -/) });
    expect(await statusq('inspect', '--db', db.url, '--table', 'jobs', '--id', '1', '--kind', 'email')).toMatchObject({ code: 2, stderr: expect.stringMatching(/--id shows one row whole; --status, --kind and --limit choose a listing/) });
    expect((await statusq('init', '--db', db.url, '--table', 'plain')).code).toBe(0);
    expect(await statusq('inspect', '--db', db.url, '--table', 'plain', '--kind', 'email')).toMatchObject({ code: 2, stderr: expect.stringMatching(/table plain has no kind column \(statusq migrate --with kinds adds it/) });
    // A table without kinds lists what it did, with no kind column.
    expect((await statusq('enqueue', '--db', db.url, '--table', 'plain', '--payload', '{}')).code).toBe(0);
    expect(Object.keys((JSON.parse((await statusq('inspect', '--db', db.url, '--table', 'plain', '--status', 'pending', '--json')).stdout) as object[])[0]!)).not.toContain('kind');

    const doctor = async (...args: string[]) => {
      const run = await statusq('doctor', '--db', db.url, '--table', 'jobs', '--race-jobs', '0', '--json', ...args);
      expect(run.stdout, run.stderr).not.toBe('');
      return JSON.parse(run.stdout) as DoctorReport;
    };
    const kindChecks = (report: DoctorReport) => report.checks.filter((check) => check.name.startsWith('kind'));
    const report = await doctor();
    expect(report.kinds).toEqual({
      '': { pending: 1, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 },
      archive: { pending: 1, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 },
      email: { pending: 2, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 },
    });
    expect(kindChecks(report)).toEqual([
      { name: 'kinds', status: 'pass', detail: 'rows by kind: (no kind) 1 pending; archive 1 pending; email 2 pending' },
      {
        name: 'kind archive',
        status: 'warn',
        detail: expect.stringMatching(/^1 due pending row of kind archive, the oldest waiting [23]h \(over --stalled-after 10m\) and none processing: no running worker seems to have a handler for archive$/),
        fix: expect.stringMatching(/^start a worker with a handler for archive: statusq work --db \S+ --table jobs --handlers DIR \(DIR\/archive\.mjs\)/),
      },
    ]);
    // The threshold is --stalled-after's: past the archive row's wait, nothing warns.
    expect(kindChecks(await doctor('--stalled-after', '1d')).map((check) => check.name)).toEqual(['kinds']);
    // A table without kinds: no kinds key, no kind check.
    const plain = JSON.parse((await statusq('doctor', '--db', db.url, '--table', 'plain', '--race-jobs', '0', '--json')).stdout) as DoctorReport;
    expect(plain).not.toHaveProperty('kinds');
    expect(kindChecks(plain)).toEqual([]);
    expect(await statusq('doctor', '--db', db.url, '--stalled-after', '5m', '--race-jobs', '0')).toMatchObject({ code: 2, stderr: expect.stringMatching(/--stalled-after judges the kinds of a table: give --table/) });

    // A worker with a handler for email only: it works the emails and warns once for each kind it leaves waiting.
    const handlers = join(dir, 'handlers');
    mkdirSync(handlers);
    writeFileSync(join(handlers, 'email.mjs'), 'export default async () => undefined;');
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handlers', handlers, '--exit-when-empty', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    const warnings = logLines(run.stdout).filter((line) => line.level === 'warn');
    expect(warnings.map((line) => [line.kind, line.pending, line.msg])).toEqual([
      [null, 1, '1 pending row without a kind wait, none processing: workers with handlers by kind never claim them; a worker with one --handler for every row does'],
      ['archive', 1, '1 pending row of kind archive wait, none processing, and this worker has no handler for archive: start a worker that has one (--handlers DIR with archive.mjs)'],
    ]);
    expect(await ctx().stats()).toMatchObject({ pending: 2, done: 2 });

    // A row of the kind processing: some worker has it, so the doctor does not warn about it, however old.
    expect((await statusq('enqueue', '--db', db.url, '--kind', 'archive', '--payload', '{}')).code).toBe(0);
    await db.query(`UPDATE jobs SET status = 9, claimed_at = ${target.now}, worker_id = 'w:1:a:1' WHERE id = 5`);
    const busy = await doctor();
    expect(busy.kinds).toMatchObject({ archive: { pending: 1, processing: 1 }, email: { done: 2 } });
    expect(kindChecks(busy).map((check) => check.name)).toEqual(['kinds']);
  });

  it("an application's own kind column (--kind-column) is read the same way by inspect, doctor (its fix line keeps the flag) and work's warning", async () => {
    const { statusq, db, dir } = ctx();
    expect((await statusq('init', '--db', db.url, '--table', 'urls')).code).toBe(0);
    await db.query('ALTER TABLE urls ADD url_type VARCHAR(50)');
    expect((await statusq('migrate', '--db', db.url, '--table', 'urls', '--with', 'kinds', '--kind-column', 'url_type')).code).toBe(0);
    for (const kind of ['feed', 'page']) expect((await statusq('enqueue', '--db', db.url, '--table', 'urls', '--kind-column', 'url_type', '--kind', kind, '--payload', '{}')).code).toBe(0);
    await db.query(`UPDATE urls SET date = ${target.dateLiteral(new Date(Date.now() - 3 * 3_600_000).toISOString())} WHERE id = 2`);

    const pages = await statusq('inspect', '--db', db.url, '--table', 'urls', '--kind-column', 'url_type', '--status', 'pending', '--kind', 'page', '--json');
    expect((JSON.parse(pages.stdout) as Array<Record<string, unknown>>).map((row) => [Number(row.id), row.url_type])).toEqual([[2, 'page']]);
    const report = JSON.parse((await statusq('doctor', '--db', db.url, '--table', 'urls', '--kind-column', 'url_type', '--race-jobs', '0', '--json')).stdout) as DoctorReport;
    expect(report.kinds).toMatchObject({ feed: { pending: 1 }, page: { pending: 1 } });
    expect(report.checks.filter((check) => check.name.startsWith('kind '))).toEqual([
      expect.objectContaining({ name: 'kind page', status: 'warn', fix: expect.stringMatching(/statusq work --db \S+ --table urls --kind-column url_type --handlers DIR \(DIR\/page\.mjs\)/) }),
    ]);

    const handlers = join(dir, 'handlers');
    mkdirSync(handlers);
    writeFileSync(join(handlers, 'feed.mjs'), 'export default async () => undefined;');
    const run = await statusq('work', '--db', db.url, '--table', 'urls', '--kind-column', 'url_type', '--handlers', handlers, '--exit-when-empty', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    expect(logLines(run.stdout).filter((line) => line.level === 'warn').map((line) => [line.kind, line.pending])).toEqual([['page', 1]]);
    expect(await ctx().stats('urls')).toMatchObject({ pending: 1, done: 1 });
  });
}
