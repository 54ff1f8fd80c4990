// Groups from the command line on every dialect: init/migrate --with groups (and --group-column), enqueue --group,
// work --group-concurrency / --group-rate, work --kind-rate, and their bad input. Part of the CLI scenarios
// (cli-scenarios.ts); the limits' races across processes are the conformance kit's (cases/groups.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { CliContext } from './cli-target.js';

/**
 * A handler that appends `group start end` per run (10 ms each) to a ledger of its own, the group read from
 * `column`. A module of its own name too: the CLI runs in this process, which caches a module by its path.
 */
function ledgerHandler(ctx: CliContext, column: string): { handler: string; mostAtOnce(group: string): number } {
  const ledger = join(ctx.dir, `runs-${column}.txt`);
  const handler = ctx.file(
    `ledger-${column}.mjs`,
    [
      "import { appendFileSync } from 'node:fs';",
      'export default async (job) => {',
      '  const start = Date.now();',
      '  await new Promise((resolve) => setTimeout(resolve, 10));',
      `  appendFileSync(${JSON.stringify(ledger)}, \`\${job.row[${JSON.stringify(column)}] ?? '-'} \${start} \${Date.now()}\\n\`);`,
      '};',
    ].join('\n'),
  );
  return {
    handler,
    mostAtOnce(group) {
      const events = readFileSync(ledger, 'utf8').trim().split('\n').map((line) => line.split(' ')).filter(([g]) => g === group).flatMap(([, start, end]) => [[Number(start), 1], [Number(end), -1]] as const);
      let now = 0;
      let most = 0;
      for (const [, step] of events.sort((a, b) => a[0] - b[0] || a[1] - b[1])) most = Math.max(most, (now += step));
      return most;
    },
  };
}

export function groupScenarios(ctx: () => CliContext): void {
  it('enqueue --group and work --group-concurrency 1 --group-rate: each host one row at a time, rows without a group beside them; stats and migrate on an application\'s own host column', async () => {
    const { statusq, db, stats } = ctx();
    expect(await statusq('init', '--db', db.url, '--table', 'jobs', '--with', 'groups')).toMatchObject({ code: 0, stdout: 'created table jobs' });
    for (const group of ['a.test', 'a.test', 'a.test', 'b.test', 'b.test', 'b.test', null]) {
      expect((await statusq('enqueue', '--db', db.url, '--payload', '{}', ...(group === null ? [] : ['--group', group]))).code).toBe(0);
    }
    const ledger = ledgerHandler(ctx(), 'group_key');
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', ledger.handler, '--concurrency', '6', '--group-concurrency', '1', '--group-rate', '100/s', '--exit-when-empty', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/done 7, failed 0, abuse 0/);
    // The limits are listed at start-up, as given.
    const started = run.stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as { msg: string }).find((line) => line.msg === 'worker started on jobs');
    expect(started).toMatchObject({ groupConcurrency: 1, groupRate: '100/s' });
    expect([ledger.mostAtOnce('a.test'), ledger.mostAtOnce('b.test')]).toEqual([1, 1]);
    expect(await stats('jobs')).toMatchObject({ pending: 0, processing: 0, done: 7 });

    // The application fills a host column of its own: migrate names it, and every command names it too.
    expect((await statusq('init', '--db', db.url, '--table', 'pages')).code).toBe(0);
    await db.query('ALTER TABLE pages ADD host VARCHAR(200)');
    expect(await statusq('migrate', '--db', db.url, '--table', 'pages', '--with', 'groups', '--group-column', 'host')).toMatchObject({ code: 0, stdout: expect.stringMatching(/^migrated pages: added .*statusq_group/) });
    for (const host of ['c.test', 'c.test']) expect((await statusq('enqueue', '--db', db.url, '--table', 'pages', '--group-column', 'host', '--group', host, '--payload', '{}')).code).toBe(0);
    const own = ledgerHandler(ctx(), 'host');
    const pages = await statusq('work', '--db', db.url, '--table', 'pages', '--group-column', 'host', '--handler', own.handler, '--concurrency', '4', '--group-concurrency', '1', '--exit-when-empty', '--poll-max', '50ms');
    expect(pages.code, pages.stderr).toBe(0);
    expect(own.mostAtOnce('c.test')).toBe(1);
    expect(JSON.parse((await statusq('stats', '--db', db.url, '--table', 'pages', '--group-column', 'host', '--json')).stdout)).toMatchObject({ pending: 0, done: 2 });
  });

  it('bad group and kind-rate input exits 2 naming the fix, before anything is written or claimed', async () => {
    const { statusq, stats, db, file } = ctx();
    expect((await statusq('init', '--db', db.url, '--table', 'plain')).code).toBe(0);
    expect(await statusq('enqueue', '--db', db.url, '--table', 'plain', '--group', 'a.test', '--payload', '{}')).toMatchObject({
      code: 2,
      stderr: "statusq: table plain has no group_key column, which a job's group needs (statusq migrate --with groups adds it)",
    });
    expect((await statusq('init', '--db', db.url, '--table', 'jobs', '--with', 'groups,kinds')).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--group', 'a.test', '--kind', 'email', '--payload', '{}')).code).toBe(0);
    expect(await statusq('enqueue', '--db', db.url, '--group', 'x'.repeat(256), '--payload', '{}')).toMatchObject({ code: 2, stderr: expect.stringMatching(/enqueue: group must be text of 1 to 255 characters/) });
    const handler = file('one.mjs', 'export default async () => undefined;');
    const work = (...flags: string[]) => statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--exit-when-empty', ...flags);
    for (const [flags, message] of [
      [['--group-concurrency', '0'], /groupConcurrency must be a whole number from 1 to 100000/],
      [['--group-rate', 'fast'], /--group-rate must be a number of jobs/],
      [['--group-column', 'nope', '--group-concurrency', '1'], /has no group column "nope"/],
      [['--table', 'plain', '--group-concurrency', '1'], /group limits need a group column: table plain has none/],
      [['--kind-rate', 'email=1/s'], /kindRate paces kinds: it needs handlers by kind/],
      [['--kind-rate', 'email=fast'], /--kind-rate: email's limit must be a number of jobs/],
      [['--kind-rate', 'email'], /--kind-rate takes kind=limit pairs separated by commas \(email=50\/s,report=1\/m\)/],
    ] as const) {
      expect(await work(...flags)).toMatchObject({ code: 2, stderr: expect.stringMatching(message) });
    }
    expect(await statusq('migrate', '--db', db.url, '--table', 'plain', '--with', 'leases', '--group-column', 'id')).toMatchObject({ code: 2, stderr: expect.stringMatching(/a group column \(id\) is for migrate --with groups/) });
    expect(await stats('jobs')).toMatchObject({ pending: 1, processing: 0, done: 0 });
  });
}
