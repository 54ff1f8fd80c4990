// Kinds from the command line on every dialect: init/migrate --with kinds, enqueue --kind, work --handlers (a
// directory of <kind>.mjs) and --handler (an object of kinds), stats by kind, and their bad input. Part of the
// CLI scenarios (cli-scenarios.ts).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { CliContext } from './cli-target.js';

export function kindScenarios(ctx: () => CliContext): void {
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
}
