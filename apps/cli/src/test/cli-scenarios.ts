// The CLI scenarios every dialect must pass, written once: each dialect's test file hands over a way to
// make a fresh database and run SQL in it, as the conformance suite takes a store factory.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TcpProxy, toMs, waitFor, type CallDeadlines } from '@statusq/conformance';
import { generateTableARows, handlerPath } from '@statusq/test-fixtures';
import { dashboardScenarios } from './cli-dashboard-scenarios.js';
import { doctorScenarios } from './cli-doctor-scenarios.js';
import { inspectScenarios } from './cli-inspect-scenarios.js';
import { lifecycleScenarios } from './cli-lifecycle-scenarios.js';
import { logScenarios } from './cli-log-scenarios.js';
import { metricsScenarios } from './cli-metrics-scenarios.js';
import { progressScenarios } from './cli-progress-scenarios.js';
import { childPids, launchCli, logLines, parseStats, runCliAsync, runCliInProcess, until, writeFixture } from './cli-harness.js';
import type { CliContext, CliTarget } from './cli-target.js';

export type { CliContext, CliTarget, CliTestDatabase } from './cli-target.js';

/** Short deadlines for the frozen-network scenario, so that each stuck call gives up within the test. */
const PROXY_DEADLINES: CallDeadlines = { connectTimeoutMs: 1000, queryTimeoutMs: 1000 };
const STOP_TIMEOUT_MS = 2000;
/**
 * After the stop timeout the worker hands the claim back (each try on the frozen database bounded by its 1 s
 * deadline) and the store closes (sockets that never answer cut after a 1 s grace): a few seconds here. Without
 * deadlines the process never exits.
 */
const EXIT_MARGIN_MS = 10_000;


/** The groups of shared scenarios, each registered by the function of its name. */
export const CLI_SCENARIO_GROUPS = ['commands', 'lifecycle', 'logs', 'metrics', 'doctor', 'inspect', 'progress', 'dashboard'] as const;
export type CliScenarioGroup = (typeof CLI_SCENARIO_GROUPS)[number];

/**
 * Registers the shared scenarios of `groups` under `title`, plus `extra(ctx)` for what only this dialect
 * shows. A dialect's scenarios are spread over a few test files (a group or more each) so that they run side
 * by side. An unavailable database skips them with `[needs <capability>]` or, with
 * STATUSQ_REQUIRE_DATABASES=1, fails.
 */
export function cliScenarios(title: string, target: CliTarget, groups: readonly CliScenarioGroup[], extra: (ctx: () => CliContext) => void = () => undefined): void {
  if (target.unavailable !== null) {
    if (process.env.STATUSQ_REQUIRE_DATABASES === '1') {
      it(`${title}: the database is reachable (STATUSQ_REQUIRE_DATABASES=1)`, () => {
        throw new Error(target.unavailable!);
      });
    } else {
      it.skip(`[needs ${target.capability}] ${title}: ${target.unavailable}`, () => undefined);
    }
    return;
  }
  let current: CliContext | null = null;
  const ctx = (): CliContext => {
    if (!current) throw new Error('no CLI test context outside a test');
    return current;
  };

  describe(title, () => {
    beforeEach(async () => {
      const dir = mkdtempSync(join(tmpdir(), `statusq-cli-${target.dialect}-`));
      const db = await target.create(dir);
      const statusq = (...args: string[]) => runCliInProcess(dir, args);
      current = {
        dir,
        db,
        statusq,
        statusqProcess: (...args) => runCliAsync(dir, args),
        statusqWith: (env, ...args) => runCliAsync(dir, args, undefined, env),
        stats: async (table = 'jobs') => parseStats(await statusq('stats', '--db', db.url, '--table', table, '--json')),
        file: (name, text) => writeFixture(dir, name, text),
      };
    });
    afterEach(async () => {
      const test = current;
      current = null;
      if (!test) return;
      await test.db.dispose();
      rmSync(test.dir, { recursive: true, force: true });
    });

    const register: Record<CliScenarioGroup, () => void> = {
      commands: () => commandScenarios(ctx, target),
      lifecycle: () => lifecycleScenarios(ctx, target),
      logs: () => logScenarios(ctx, target),
      metrics: () => metricsScenarios(ctx),
      doctor: () => doctorScenarios(ctx, target),
      inspect: () => inspectScenarios(ctx, target),
      progress: () => progressScenarios(ctx),
      dashboard: () => dashboardScenarios(ctx, target),
    };
    for (const group of groups) register[group]();

    extra(ctx);
  });
}

/** The commands themselves: init, enqueue, work, stats, migrate, requeue and the rest, and their bad input. */
function commandScenarios(ctx: () => CliContext, target: CliTarget): void {
  it('init creates a managed table once; a second init changes nothing', async () => {
    const { statusq, stats, db } = ctx();
    expect(await statusq('init', '--db', db.url)).toMatchObject({ code: 0, stdout: 'created table jobs' });
    expect(await statusq('init', '--db', db.url)).toMatchObject({ code: 0, stdout: 'table jobs already exists; nothing to do' });
    expect(await stats()).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
  });

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

  it('work --schedule (YAML) with --processes 2: every tick of an every-second schedule runs once, logged by the process that claimed it; a bad schedule file exits 2 before the database is touched', async () => {
    const { statusq, db, file, dir } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const schedules = file('schedules.yaml', ['schedules:', '  - name: heartbeat', "    cron: '* * * * * *'", '    payload: { ping: true }', '    catchUp: 0', ''].join('\n'));
    const seen = join(dir, 'seen.txt');
    const handler = file('record.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(seen)}, job.row.dedupe_key + '\\n'); };`);
    const run = launchCli(dir, ['work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--schedule', schedules, '--processes', '2', '--poll-max', '50ms']);
    const ran = () => (existsSync(seen) ? readFileSync(seen, 'utf8').trim().split('\n').filter(Boolean) : []);
    await waitFor('three ticks to run', () => ran().length >= 3, { timeoutMs: 30_000, intervalMs: 50 });
    run.child.kill('SIGTERM');
    const result = await run.ended;
    expect(result.code, result.stderr).toBe(0);
    const keys = ran();
    expect(new Set(keys).size).toBe(keys.length);
    const ticks = keys.map((key) => Date.parse(key.replace('schedule:heartbeat:', ''))).sort((a, b) => a - b);
    for (let i = 1; i < ticks.length; i++) expect(ticks[i]! - ticks[i - 1]!).toBe(1000);
    const logged = logLines(result.stdout).filter((line) => typeof line.msg === 'string' && line.msg.startsWith('schedule heartbeat: enqueued tick'));
    expect(logged.length).toBeGreaterThanOrEqual(keys.length);
    expect(new Set(logged.map((line) => line.tick)).size).toBe(logged.length);

    for (const [text, message] of [
      ['schedules: [{ name: x, cron: "every day" }]', /^statusq: .*bad\.yaml: schedule x: cron "every day" is not a cron expression/],
      ['{ not yaml', /^statusq: --schedule: .*bad\.yaml is neither YAML nor JSON/],
    ] as Array<[string, RegExp]>) {
      const refused = await statusq('work', '--db', 'sqlite:/nonexistent/dir/never.db', '--table', 'jobs', '--handler', handler, '--schedule', file('bad.yaml', text));
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(message);
    }
  });

  it('work --max-instances 1: a second instance exits 0 at once naming the holder; one with --wait starts when the first dies (its slot expires by --instance-lease) and runs jobs; bad cap flags exit 2 before the database is touched', async () => {
    const { statusq, db, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const handler = file('noop.mjs', 'export default async () => {};');
    const holding = (stdout: string) => stdout.includes('"msg":"holding instance slot 1 of 1"');
    const first = launchCli(ctx().dir, ['work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--max-instances', '1', '--instance-lease', '2s', '--processes', '2', '--poll-max', '50ms']);
    await waitFor('the first instance to hold its slot', () => holding(first.stdout()), { timeoutMs: 30_000, intervalMs: 50 });

    const over = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--max-instances', '1');
    expect(over.code, over.stderr).toBe(0);
    expect(logLines(over.stdout).map((line) => line.msg)).toContainEqual(expect.stringMatching(/^1 of 1 instance slots on jobs are held \(.+:\d+ \(slot 1\)\); exiting \(code 0\)/));

    const waiting = launchCli(ctx().dir, ['work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--max-instances', '1', '--wait', '--instance-lease', '2s', '--poll-max', '50ms']);
    await waitFor('the second instance to wait', () => waiting.stdout().includes('; waiting for one"'), { timeoutMs: 30_000, intervalMs: 50 });
    // The launcher dies without releasing its slot; its children drain and exit on their own.
    first.child.kill('SIGKILL');
    await first.ended;
    await waitFor('the waiting instance to take the expired slot', () => holding(waiting.stdout()), { timeoutMs: 30_000, intervalMs: 50 });
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
    await waitFor('the row to be done', async () => (await ctx().stats()).done === 1, { timeoutMs: 30_000, intervalMs: 50 });
    waiting.child.kill('SIGTERM');
    expect((await waiting.ended).code).toBe(0);
    // Released on the way out: the next instance gets the slot at once.
    const next = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--max-instances', '1', '--exit-when-empty');
    expect(next.code, next.stderr).toBe(0);
    expect(holding(next.stdout)).toBe(true);

    for (const [flags, message] of [
      [['--max-instances', '0'], /max instances must be a whole number from 1 to 1000, got 0/],
      [['--max-instances', 'two'], /--max-instances must be a whole number/],
      [['--wait'], /--wait needs --max-instances/],
      [['--max-instances', '2', '--instance-lease', '10ms'], /the instance lease must be from 1000 ms/],
    ] as Array<[string[], RegExp]>) {
      const refused = await statusq('work', '--db', 'sqlite:/nonexistent/dir/never.db', '--table', 'jobs', '--handler', handler, ...flags);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(message);
    }
  });

  it('work --rate 10/s --processes 3: one budget for every process, so 20 jobs take about two seconds and no second holds more than the limit and its burst; a bad rate exits 2 before the database is touched', async () => {
    const { statusq, db, file, dir } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--file', file('rows.ndjson', Array.from({ length: 20 }, (_, n) => `{"n":${n}}`).join('\n')))).code).toBe(0);
    const seen = join(dir, 'starts.txt');
    const handler = file('record.mjs', `import { appendFileSync } from 'node:fs';\nexport default async () => { appendFileSync(${JSON.stringify(seen)}, Date.now() + '\\n'); };`);
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--rate', '10/s', '--processes', '3', '--concurrency', '16', '--exit-when-empty', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    const starts = readFileSync(seen, 'utf8').trim().split('\n').map(Number).sort((a, b) => a - b);
    expect(starts).toHaveLength(20);
    // 10 a second, a burst of 1: starts 100 ms apart, whichever process takes them.
    expect(starts.at(-1)! - starts[0]!).toBeGreaterThanOrEqual(18 * 100 - 100);
    for (let i = 0; i < starts.length; i++) expect(starts.filter((t) => t >= starts[i]! && t < starts[i]! + 1000).length).toBeLessThanOrEqual(12);

    for (const [rate, message] of [
      ['5/d', /--rate must be a number of jobs from 1 to 1000000 per s, m or h/],
      ['0/s', /--rate must be a number of jobs/],
    ] as Array<[string, RegExp]>) {
      const refused = await statusq('work', '--db', 'sqlite:/nonexistent/dir/never.db', '--table', 'jobs', '--handler', handler, '--rate', rate);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(message);
    }
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

  it("issue 40's run: migrate --beside, then work --processes 3 over the seed's table_a with a child SIGKILLed mid-run and a handler that throws for some ids: every row ends in its rule's status, every run counted, nothing left processing, the table's columns unchanged", async () => {
    const { stats, db, dir, file } = ctx();
    for (const ddl of target.fixtures.tableA('table_a')) await db.query(ddl);
    const rows = generateTableARows(900, { poisonEvery: 50, abuseEvery: 40, flakyEvery: 30 });
    await db.insertTableA(rows);
    const mysql = db.url.startsWith('mysql');
    // SHOW CREATE TABLE less its index lines: what migrate --beside must leave as it was (MySQL/MariaDB).
    const definition = async () =>
      mysql ? String(Object.values((await db.query<Record<string, unknown>>('SHOW CREATE TABLE table_a'))[0]!)[1]).split('\n').filter((line) => !/^\s*(KEY|INDEX)\b/.test(line)).map((line) => line.replace(/,$/, '')) : [];
    const columnsOf = async () => Object.keys((await db.query<Record<string, unknown>>('SELECT * FROM table_a WHERE id = 1'))[0]!).sort();
    const [before, beforeColumns] = [await definition(), await columnsOf()];
    expect((await ctx().statusq('migrate', '--db', db.url, '--table', 'table_a', '--beside')).code).toBe(0);

    const ledger = join(dir, 'ledger.txt');
    const handler = file(
      'slow-table-a.mjs',
      `import fixture from ${JSON.stringify(pathToFileURL(handlerPath('table-a.mjs')).href)};\nexport default async (job, ctx) => { try { return await fixture(job, ctx); } finally { await new Promise((r) => setTimeout(r, 10)); } };\n`,
    );
    const run = launchCli(dir, ['work', '--db', db.url, '--table', 'table_a', '--handler', handler, '--processes', '3', '--concurrency', '4', '--lease', '2s', '--retry-delay', '1ms', '--exit-when-empty'], 120_000, { STATUSQ_LEDGER: ledger });
    await until('three worker processes', () => childPids(run.child.pid!).length === 3);
    await until('some rows done', async () => (await stats('table_a')).done >= 60, 60_000);
    const [victim] = childPids(run.child.pid!);
    process.kill(victim!, 'SIGKILL');
    const result = await run.ended;
    expect(result.code, result.stderr).toBe(0);
    expect(logLines(result.stdout).filter((line) => line.level === 'warn').map((line) => line.msg)).toContain(`worker process ${victim} killed by SIGKILL`);

    const t = { ok: 0, poison: 0, abuse: 0, flaky: 0 };
    for (const row of rows) t[row.kind]++;
    expect(await stats('table_a')).toEqual({ pending: 0, processing: 0, done: t.ok + t.flaky, abuse: t.abuse, failed: t.poison, other: 0 });
    const runs = new Map<string, number>();
    for (const line of readFileSync(ledger, 'utf8').trim().split('\n')) runs.set(line.split(' ')[0]!, (runs.get(line.split(' ')[0]!) ?? 0) + 1);
    const read = await db.query<{ id: unknown; status: unknown; attempts: unknown }>('SELECT t.id AS id, t.status AS status, s.attempt_count AS attempts FROM table_a t LEFT JOIN table_a_statusq s ON s.id = t.id');
    // Each attempt counted: those that failed, were retried or were cut off by the kill, plus the last one that a
    // success or an abuse does not count; a claim killed before its handler started may count without a run.
    const uncounted = read.filter((r) => Number(r.attempts ?? 0) + (Number(r.status) === 0 ? 0 : 1) < (runs.get(String(r.id)) ?? 0)).map((r) => `${String(r.id)}: ${String(r.attempts)} of ${runs.get(String(r.id))}`);
    expect(uncounted).toEqual([]);
    expect(read.filter((r) => Number(r.status) === 0 && Number(r.attempts) !== 3)).toEqual([]);
    expect(await columnsOf()).toEqual(beforeColumns);
    expect(await definition()).toEqual(before);
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

  it('newest-first by default and oldest-first with --order oldest', async () => {
    const { statusq, db, dir, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const date = (s: number) => target.dateLiteral(`2024-01-01T00:00:0${s}.000Z`);
    await db.query(`INSERT INTO jobs (date, payload) VALUES (${date(1)}, '{"n":1}'), (${date(3)}, '{"n":3}'), (${date(2)}, '{"n":2}')`);
    const seen = join(dir, 'seen.txt');
    const handler = file('order.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(seen)}, job.payload.n + '\\n'); };`);
    const runOnce = async (...extra: string[]) => {
      writeFileSync(seen, '');
      const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--concurrency', '1', '--exit-when-empty', ...extra);
      expect(run.code, run.stderr).toBe(0);
      return readFileSync(seen, 'utf8').trim().split('\n').map(Number);
    };
    expect(await runOnce()).toEqual([3, 2, 1]);
    await db.query('UPDATE jobs SET status = NULL');
    expect(await runOnce('--order', 'oldest')).toEqual([1, 2, 3]);
  });

  it('work on a status-only table ends with one warn line naming the rows left processing and the command that returns them, exit 0; under --processes the launcher says it', async () => {
    // The probe's case: a killed --processes child left a row in 9, and work --exit-when-empty exited 0 without a word.
    const { statusq, stats, db } = ctx();
    for (const ddl of target.fixtures.tableA('table_a')) await db.query(ddl);
    await db.insertTableA(generateTableARows(20).map((row) => ({ ...row, kind: 'ok' as const })));
    await db.query('UPDATE table_a SET status = 9 WHERE id IN (3, 7)');
    const expected =
      '2 rows of table_a left processing (ids 3, 7) and the table has no lease column, so nothing returns them by itself: if no worker is running them (a worker was killed), ' +
      'stop every worker and run statusq requeue --table table_a --status processing --force; statusq migrate --with leases makes it automatic';
    for (const extra of [[], ['--processes', '2']]) {
      const run = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--exit-when-empty', ...extra);
      expect(run.code, run.stderr).toBe(0);
      expect(logLines(run.stdout).filter((line) => line.level === 'warn').map((line) => line.msg), extra.join(' ')).toEqual([expected]);
    }
    expect(await stats('table_a')).toMatchObject({ pending: 0, processing: 2, done: 18 });
    // With nothing left processing, nothing is said.
    await db.query('UPDATE table_a SET status = NULL WHERE id IN (3, 7)');
    const clean = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--exit-when-empty');
    expect(logLines(clean.stdout).filter((line) => line.level === 'warn')).toEqual([]);
  });

  it('work --select: job.row carries the named columns and statusq\'s own, not the rest; an unknown column exits 2 before any claim, a blank name is a usage error', async () => {
    const { statusq, stats, db, dir, file } = ctx();
    for (const ddl of target.fixtures.tableA('table_a')) await db.query(ddl);
    await db.insertTableA(generateTableARows(20).map((row) => ({ ...row, kind: 'ok' as const })));
    expect((await statusq('migrate', '--db', db.url, '--table', 'table_a', '--with', 'leases')).code).toBe(0);
    const seen = join(dir, 'keys.txt');
    const handler = file('keys.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(seen)}, Object.keys(job.row).sort().join(',') + '\\n'); };`);
    const refused = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handler, '--select', 'kind,nope', '--exit-when-empty');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/select column "nope"/);
    expect(await stats('table_a')).toMatchObject({ pending: 20, processing: 0 });
    expect((await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handler, '--select', 'kind,,url')).code).toBe(2);

    writeFileSync(seen, '');
    const run = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handler, '--select', ' kind ', '--concurrency', '4', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    expect(new Set(readFileSync(seen, 'utf8').trim().split('\n'))).toEqual(new Set(['claimed_at,date,id,kind,status,worker_id']));
    expect(await stats('table_a')).toMatchObject({ pending: 0, done: 20 });
  });

  it('work refuses, exit 2 and one line, a table whose id is not unique on its own or whose status is not an integer, and changes no row; a unique index on id is enough', async () => {
    const { statusq, db, file } = ctx();
    for (const [kind, table] of [['sharedId', 'pairs'], ['textStatus', 'texty'], ['uniqueId', 'keyed']] as const) {
      for (const sql of target.fixtures.checked[kind]!(table)) await db.query(sql);
    }
    const date = "'2024-01-01 00:00:00.000'";
    await db.query(`INSERT INTO pairs (id, k, date) VALUES (1, 1, ${date}), (1, 2, ${date}), (2, 1, ${date})`);
    await db.query(`INSERT INTO keyed (id, k, date) VALUES (1, 1, ${date}), (2, 1, ${date})`);
    await db.query(`INSERT INTO texty (id, date) VALUES (1, ${date}), (2, ${date})`);
    const handler = file('ok.mjs', 'export default async () => {};');
    const work = (table: string) => statusq('work', '--db', db.url, '--table', table, '--handler', handler, '--exit-when-empty');
    const statuses = async (table: string) => (await db.query<{ status: unknown }>(`SELECT status FROM ${table} ORDER BY id`)).map((r) => (r.status === null ? null : Number(r.status)));

    const shared = await work('pairs');
    expect(shared.code, shared.stderr).toBe(2);
    expect(shared.stderr).toMatch(/id column "id" is not unique: it must be the primary key or have a unique index of its own/);
    expect(shared.stderr.split('\n')).toHaveLength(1);
    expect(await statuses('pairs')).toEqual([null, null, null]);

    const texty = await work('texty');
    expect(texty.code, texty.stderr).toBe(2);
    expect(texty.stderr).toMatch(/status column "status" is (varchar\(8\)|character varying), not an integer type/);
    expect(texty.stderr.split('\n')).toHaveLength(1);
    expect(await statuses('texty')).toEqual([null, null]);

    // keyed has the same PRIMARY KEY (id, k) as pairs plus a unique index on id alone.
    const keyed = await work('keyed');
    expect(keyed.code, keyed.stderr).toBe(0);
    expect(await statuses('keyed')).toEqual([1, 1]);
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

  it(
    '[needs throughProxy] work: the database stops answering (TCP open, no packets), then SIGTERM: the failing call is logged and the process exits within --stop-timeout plus a bounded margin',
    async (t) => {
      if (!target.throughProxy) t.skip();
      const { statusq, db, dir, file } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
      const route = target.throughProxy!(db.url, PROXY_DEADLINES);
      const proxy = await TcpProxy.start(route.upstream);
      try {
        const started = join(dir, 'started.txt');
        // Gives up as soon as its signal aborts: only the database can hold the stop up.
        const handler = file(
          'wait.mjs',
          `import { writeFileSync } from 'node:fs';\nexport default async (job, ctx) => {\n  writeFileSync(${JSON.stringify(started)}, String(job.id));\n  await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));\n};`,
        );
        const args = ['work', '--db', route.via(proxy), '--table', 'jobs', '--handler', handler, '--concurrency', '1', '--stop-timeout', `${STOP_TIMEOUT_MS}ms`];
        const work = launchCli(dir, args, STOP_TIMEOUT_MS + EXIT_MARGIN_MS + 30_000);
        await waitFor('the job to start', () => existsSync(started), { timeoutMs: 30_000 });
        proxy.freeze();
        const signalled = Date.now();
        work.child.kill('SIGTERM');
        const run = await work.ended;
        const exitMs = Date.now() - signalled;
        expect(run.code, `the process did not exit by itself (killed after ${exitMs} ms); stderr: ${run.stderr}`).not.toBeNull();
        expect(exitMs, run.stderr).toBeLessThan(STOP_TIMEOUT_MS + EXIT_MARGIN_MS);
        // The call the frozen database never answered is logged, naming the database, once per outage.
        const outage = logLines(run.stdout).filter((line) => line.level === 'warn' && line.msg.startsWith('database unavailable'));
        expect(outage, run.stdout).toHaveLength(1);
        expect(outage[0]!.msg).toMatch(/PostgreSQL|MySQL/);
        console.info(`[${target.dialect}] frozen network: statusq work exited ${exitMs} ms after SIGTERM (--stop-timeout ${STOP_TIMEOUT_MS}ms), code ${run.code}`);
      } finally {
        await proxy.close();
      }
    },
    STOP_TIMEOUT_MS + EXIT_MARGIN_MS + 60_000,
  );

  describe('bad input: one line on stderr, exit code 2, nothing touched', () => {
    beforeEach(async () => {
      const { statusq, db } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
    });
    const handler = () => ctx().file('ok.mjs', 'export default async () => {};');
    const db = () => ctx().db.url;
    const cases: Array<[string, () => string[], RegExp]> = [
      ['an unknown flag', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--bogus'], /Unknown option '--bogus'/],
      ['an invalid table name', () => ['work', '--db', db(), '--table', 'jobs; DROP TABLE jobs', '--handler', handler()], /invalid table name/],
      ['an invalid column name', () => ['work', '--db', db(), '--table', 'jobs', '--status-column', '1status', '--handler', handler()], /invalid status column/],
      ['a missing table', () => ['work', '--db', db(), '--table', 'nope', '--handler', handler()], /table "nope" does not exist/],
      ['a missing column', () => ['stats', '--db', db(), '--table', 'jobs', '--order-column', 'created'], /no order column "created"/],
      ['a missing handler file', () => ['work', '--db', db(), '--table', 'jobs', '--handler', join(ctx().dir, 'missing.mjs')], /handler file not found/],
      ['a handler without a default export', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handlerPath('no-default.mjs')], /no default export/],
      ['a default export that is not a function', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handlerPath('not-a-function.mjs')], /not a function/],
      ['a missing --table', () => ['work', '--db', db(), '--handler', handler()], /--table is required/],
      ['a bad --concurrency', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--concurrency', '0'], /concurrency must be an integer/],
      ['a bad --retry-delay', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--retry-delay', 'soon'], /invalid --retry-delay/],
      ['a duration without a unit', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--lease', '30'], /^statusq: --lease 30 has no unit: write 30s or 30ms/],
      ['a --poll-max that would spin', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--poll-max', '1ms'], /^statusq: --poll-max must be at least 10ms, got 1ms$/],
      ['a lease past the timer limit', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--lease', '100d'], /--lease 100d is too long: at most 24d/],
      ['a stop timeout past the timer limit', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--stop-timeout', '30d'], /--stop-timeout 30d is too long: at most 24d/],
      ['a negative --concurrency', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--concurrency', '-1'], /concurrency must be an integer from 1 to 10000, got -1$/],
      ['a negative --concurrency=', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--concurrency=-1'], /concurrency must be an integer from 1 to 10000, got -1$/],
      ['a --concurrency above the batch limit', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--concurrency', '20000'], /concurrency must be an integer from 1 to 10000, got 20000$/],
      ['a zero --batch', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--batch', '0'], /batch must be an integer from 1 to 10000, got 0$/],
      ['no --db and no URL variable', () => ['stats', '--table', 'jobs'], /--db is required \(or set STATUSQ_DATABASE_URL or DATABASE_URL\)/],
      ['a bad --order', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--order', 'random'], /--order must be newest or oldest/],
      ['invalid JSON in an ndjson file', () => ['enqueue', '--db', db(), '--file', ctx().file('bad.ndjson', '{"n":2}\n{nope}\n')], /line 2 is not valid JSON/],
      ['a requeue of done rows', () => ['requeue', '--db', db(), '--table', 'jobs', '--status', 'done'], /^statusq: illegal status transition done -> pending \(requeue\): only failed, abuse or processing rows can be requeued$/],
      ['a requeue of pending rows', () => ['requeue', '--db', db(), '--table', 'jobs', '--status', 'pending'], /^statusq: illegal status transition pending -> pending \(requeue\)/],
      ['a requeue status that is no state', () => ['requeue', '--db', db(), '--table', 'jobs', '--status', 'stuck'], /--status must be failed, abuse or processing .*got "stuck"$/],
      ['--force on failed rows', () => ['requeue', '--db', db(), '--table', 'jobs', '--status', 'failed', '--force'], /--force and --lease apply only to --status processing/],
      ['a bad --chunk', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--chunk', '0'], /chunk must be a positive integer/],
      ['an unknown --with group', () => ['migrate', '--db', db(), '--table', 'jobs', '--with', 'leases,magic'], /unknown column group "magic"/],
      ['a --delay without a unit', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--delay', '30'], /^statusq: --delay 30 has no unit: write 30s or 30ms/],
      ['a negative --delay', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--delay', '-5s'], /invalid --delay "-5s"/],
      ['a --delay past 100 years', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--delay', '40000d'], /--delay 40000d is too long: at most 36500d/],
      ['a --run-at that is not a date', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--run-at', 'tomorrow'], /^statusq: --run-at must be a date and time with a zone, such as 2026-12-01T10:00:00Z, got "tomorrow"$/],
      ['a --run-at without a zone', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--run-at', '2026-12-01T10:00:00'], /--run-at must be a date and time with a zone/],
      ['a --run-at that is no day', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--run-at', '2026-02-31T10:00:00Z'], /--run-at must be a date and time with a zone/],
      ['--delay with --run-at', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--delay', '5s', '--run-at', '2026-12-01T10:00:00Z'], /give --delay or --run-at, not both/],
    ];
    it.each(cases)('%s', async (_name, args, message) => {
      const run = await ctx().statusq(...args());
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stderr.split('\n')).toHaveLength(1);
      expect(await ctx().stats()).toEqual({ pending: 1, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
    });
  });

  it('the URL comes from --db, else STATUSQ_DATABASE_URL, else DATABASE_URL', async () => {
    const { statusq, statusqWith, db } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
    const counts = 'pending 1  processing 0  done 0  abuse 0  failed 0  other 0';
    const nowhere = 'oracle://nowhere/db';
    expect(await statusqWith({ STATUSQ_DATABASE_URL: db.url }, 'stats', '--table', 'jobs')).toMatchObject({ code: 0, stdout: counts });
    expect(await statusqWith({ DATABASE_URL: db.url }, 'stats', '--table', 'jobs')).toMatchObject({ code: 0, stdout: counts });
    expect(await statusqWith({ STATUSQ_DATABASE_URL: db.url, DATABASE_URL: nowhere }, 'stats', '--table', 'jobs')).toMatchObject({ code: 0, stdout: counts });
    expect(await statusqWith({ STATUSQ_DATABASE_URL: nowhere, DATABASE_URL: nowhere }, 'stats', '--db', db.url, '--table', 'jobs')).toMatchObject({ code: 0, stdout: counts });
  });

  it('work --processes hands the URL to its children in the environment, never in their argv (ps)', async () => {
    const { statusq, stats, db, dir, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--file', file('rows.ndjson', Array.from({ length: 20 }, (_, n) => `{"n":${n}}`).join('\n')))).code).toBe(0);
    const seen = join(dir, 'seen.ndjson');
    const handler = file(
      'record.mjs',
      `import { appendFileSync } from 'node:fs';
       export default async () => { appendFileSync(${JSON.stringify(seen)}, JSON.stringify({ argv: process.argv, url: process.env.STATUSQ_DATABASE_URL }) + '\\n'); };`,
    );
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--processes', '2', '--concurrency', '2', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    const children = readFileSync(seen, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { argv: string[]; url?: string });
    expect(children).toHaveLength(20);
    for (const child of children) {
      expect(child.argv.filter((arg) => arg === '--db' || arg.includes(db.url))).toEqual([]);
      expect(child.url).toBe(db.url);
    }
    expect(await stats()).toEqual({ pending: 0, processing: 0, done: 20, abuse: 0, failed: 0, other: 0 });
  });

  it('a password in a database URL never reaches stdout or stderr, whatever the message', async () => {
    const { statusq, statusqWith, db, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const handler = file('ok.mjs', 'export default async () => {};');
    for (const [what, url, code] of urlsWithPassword(db.url)) {
      for (const [how, run] of [
        ['stats --db', () => statusq('stats', '--db', url, '--table', 'jobs')],
        ['work with STATUSQ_DATABASE_URL', () => statusqWith({ STATUSQ_DATABASE_URL: url }, 'work', '--table', 'jobs', '--handler', handler, '--exit-when-empty')],
      ] as const) {
        const result = await run();
        const label = `${what} (${how}): ${result.stderr}`;
        expect(result.code, label).toBe(code);
        expect(result.stderr.split('\n'), label).toHaveLength(1);
        expect(`${result.stdout}\n${result.stderr}`, label).not.toMatch(/S3cretPw/);
      }
    }
    // Text that only contains the password (here a handler's error quoting the application's own
    // DATABASE_URL) is scrubbed too, though it never passed through redactUrl.
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
    // A handler's own console output is scrubbed too (it was printed in clear; issue 40's probe).
    const leaky = file('leaky.mjs', 'export default async () => { console.log(`connecting to ${process.env.DATABASE_URL}`); process.stderr.write(Buffer.from(`retrying ${process.env.DATABASE_URL}\\n`)); throw new Error(`cannot reach ${process.env.DATABASE_URL}`); };');
    const run = await statusqWith({ DATABASE_URL: 'postgres://app:S3cretPw@db.internal/app' }, 'work', '--db', db.url, '--table', 'jobs', '--handler', leaky, '--verbose', '--max-attempts', '1', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    const [failed] = logLines(run.stdout.split('\n').filter((line) => line.startsWith('{')).join('\n')).filter((line) => line.level === 'error');
    expect(failed!.err!.message).toBe('cannot reach postgres://app:***@db.internal/app');
    expect(failed!.err!.stack).toMatch(/^Error: cannot reach postgres:\/\/app:\*\*\*@db\.internal\/app\n/);
    expect(run.stdout).not.toMatch(/S3cretPw/);
    expect(run.stdout.split('\n')).toContain('connecting to postgres://app:***@db.internal/app');
    expect(run.stderr).toBe('retrying postgres://app:***@db.internal/app');
  });

  it('--verbose (--log-level debug) logs one bounded line per job, however long the error', async () => {
    const { statusq, db, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
    const handler = file('huge.mjs', `export default async () => { throw new Error('x'.repeat(1_000_000) + '\\nsecond line'); };`);
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--verbose', '--max-attempts', '1', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    const lines = logLines(run.stdout);
    expect(lines.map((line) => line.level)).toEqual(['info', 'error', 'info']);
    expect(lines[0]!.msg).toBe('worker started on jobs');
    expect(lines[2]!.msg).toMatch(/^worked 1 job in /);
    expect(lines[1]!.msg).toBe(`job failed: Error: ${'x'.repeat(500 - 'Error: '.length)}… (1000019 chars)`);
    expect(lines[1]!.err!.message).toBe(`${'x'.repeat(500)}… (1000012 chars)`);
    expect(lines[1]!.err!.stack).toMatch(/^Error: x{4089}… \(\d+ chars\)$/);
    for (const line of run.stdout.split('\n')) expect(line.length).toBeLessThan(6_000);
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

/**
 * [what, URL holding the password S3cretPw, expected exit code]: every way a URL can fail, on this dialect's
 * scheme. SQLite URLs hold no password, so its list is the adapter-independent ones.
 */
function urlsWithPassword(dbUrl: string): Array<[string, string, number]> {
  // A database without a network address (a file) cannot be given a password: only the bad-URL cases apply.
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(dbUrl)) {
    return [
      ['an unsupported scheme', 'oracle://app:S3cretPw@h/db', 2],
      ['an empty user name', 'foo://:S3cretPw@h/db', 2],
      ['a password query parameter', 'oracle://app@h/db?password=S3cretPw', 2],
      ['no slashes after the scheme', 'postgresql:postgres:S3cretPw@h/db', 2],
      ['a URL without a scheme', 'app:S3cretPw@h/db', 2],
    ];
  }
  const scheme = new URL(dbUrl).protocol;
  const withPassword = (edit: (url: URL) => void): string => {
    const url = new URL(dbUrl);
    url.password = 'S3cretPw';
    edit(url);
    return url.toString();
  };
  return [
    ['a refused connection', withPassword((url) => (url.port = '1')), 1],
    ['a database that does not exist', withPassword((url) => (url.pathname = '/statusq_no_such_database')), 1],
    ['a port out of range', `${scheme}//app:S3cretPw@127.0.0.1:99999/db`, 2],
    ['a bad percent-escape', `${scheme}//app:S3cretPw%zz@127.0.0.1/db`, 2],
    ['no slashes after the scheme', `${scheme}app:S3cretPw@127.0.0.1/db`, 2],
    // pg reads a password parameter (then the connection is refused); a MySQL URL takes none, so it is bad input.
    ['a password query parameter and a refused connection', withPassword((url) => ((url.port = '1'), (url.password = ''), url.searchParams.set('password', 'S3cretPw'))), scheme.startsWith('postgres') ? 1 : 2],
  ];
}
