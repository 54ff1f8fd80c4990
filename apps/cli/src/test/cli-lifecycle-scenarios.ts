// How `statusq work` ends when jobs will not: a stop timeout that passes with handlers still running, and a
// job timeout whose handler ignores its abort. Part of the CLI scenarios every dialect runs.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { launchCli, logLines, until } from './cli-harness.js';
import type { CliContext, CliTarget } from './cli-target.js';

/** A handler that records each start and end in a ledger file and ignores ctx.signal for a minute. */
function stubbornHandler(ctx: CliContext, ledger: string): string {
  return ctx.file(
    'stubborn.mjs',
    `import { appendFileSync } from 'node:fs';
     export default async (job) => {
       appendFileSync(${JSON.stringify(ledger)}, 'start ' + job.id + ' ' + process.pid + '\\n');
       await new Promise((resolve) => setTimeout(resolve, 60_000)); // ignores ctx.signal on purpose
       appendFileSync(${JSON.stringify(ledger)}, 'end ' + job.id + ' ' + process.pid + '\\n');
     };`,
  );
}

function ledgerLines(path: string): string[] {
  return existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n').filter(Boolean) : [];
}

export function lifecycleScenarios(ctx: () => CliContext, target: CliTarget): void {
  for (const processes of [null, 2] as const) {
    const how = processes === null ? 'one process' : `--processes ${processes}`;
    it(`SIGTERM past --stop-timeout (${how}): handlers that ignore the abort die with the process right after their rows are handed back (exit 3)`, async () => {
      const c = ctx();
      expect((await c.statusq('init', '--db', c.db.url)).code).toBe(0);
      expect((await c.statusq('enqueue', '--db', c.db.url, '--file', c.file('rows.ndjson', '{"n":1}\n{"n":2}\n{"n":3}\n{"n":4}\n'))).code).toBe(0);
      const ledger = join(c.dir, 'ledger.txt');
      const args = ['work', '--db', c.db.url, '--table', 'jobs', '--handler', stubbornHandler(c, ledger), '--concurrency', '2', '--lease', '2s', '--stop-timeout', '1s'];
      const run = launchCli(c.dir, processes === null ? args : [...args, '--processes', String(processes)]);
      await until('four handlers to start', () => ledgerLines(ledger).length === 4 || (processes === null && ledgerLines(ledger).length === 2));
      run.child.kill('SIGTERM');
      const result = await run.ended;
      expect(result.code, result.stderr).toBe(3);
      // Logged just before process.exit(): the asynchronous log is flushed on the way out.
      expect(logLines(result.stdout).filter((line) => line.level === 'error').map((line) => line.msg)).toContainEqual(
        expect.stringMatching(/^2 jobs still running after the 1000 ms stop timeout: signalled abort, handed 2 rows back to the queue; exiting now \(code 3\)$/),
      );
      // Every row is pending again and no handler of the stopped process(es) ran on to its end.
      expect(await c.stats()).toMatchObject({ pending: 4, processing: 0, done: 0 });
      expect(ledgerLines(ledger).filter((line) => line.startsWith('end'))).toEqual([]);
    });
  }

  it('--job-timeout: a handler that honours the abort fails the attempt (retried, then failed); one that ignores it is settled failed and the process recycles (exit 4)', async () => {
    const c = ctx();
    expect((await c.statusq('init', '--db', c.db.url)).code).toBe(0);
    expect((await c.statusq('enqueue', '--db', c.db.url, '--payload', '{"kind":"polite"}')).code).toBe(0);
    const polite = c.file(
      'polite.mjs',
      `export default (job, ctx) => new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));`,
    );
    const politeRun = await c.statusq('work', '--db', c.db.url, '--table', 'jobs', '--handler', polite, '--job-timeout', '200ms', '--max-attempts', '2', '--retry-delay', '1ms', '--exit-when-empty');
    expect(politeRun.code, politeRun.stderr).toBe(0);
    expect(politeRun.stdout).toMatch(/done 0, failed 1, abuse 0, retried 1/);
    const [failed] = await c.db.query<{ attempt_count: unknown; last_error: string }>('SELECT attempt_count, last_error FROM jobs WHERE status = 0');
    expect({ attempts: Number(failed!.attempt_count), error: failed!.last_error }).toEqual({ attempts: 2, error: 'JobTimeoutError: job ran past its timeout of 200 ms' });

    await c.db.query('DELETE FROM jobs');
    expect((await c.statusq('enqueue', '--db', c.db.url, '--file', c.file('two.ndjson', '{"kind":"stuck"}\n{"kind":"quick"}\n'))).code).toBe(0);
    const ledger = join(c.dir, 'stuck-ledger.txt');
    const stuck = c.file(
      'stuck.mjs',
      `import { appendFileSync } from 'node:fs';
       export default async (job) => {
         if (job.payload.kind !== 'stuck') return 'quick';
         appendFileSync(${JSON.stringify(ledger)}, 'start ' + job.id + '\\n');
         await new Promise((resolve) => setTimeout(resolve, 60_000)); // ignores ctx.signal on purpose
         appendFileSync(${JSON.stringify(ledger)}, 'end ' + job.id + '\\n');
       };`,
    );
    const args = ['work', '--db', c.db.url, '--table', 'jobs', '--handler', stuck, '--concurrency', '2', '--job-timeout', '200ms', '--job-timeout-grace', '200ms', '--max-attempts', '1', '--exit-when-empty'];
    const stuckRun = await c.statusqProcess(...args);
    expect(stuckRun.code, stuckRun.stderr).toBe(4);
    expect(stuckRun.stdout).toMatch(/still running 200 ms after its 200 ms timeout aborted it/);
    expect(await c.stats()).toMatchObject({ pending: 0, processing: 0, done: 1, failed: 1 });
    const [row] = await c.db.query<{ last_error: string }>('SELECT last_error FROM jobs WHERE status = 0');
    expect(row!.last_error).toBe('JobTimeoutError: job ran past its timeout of 200 ms and ignored the abort');
    expect(ledgerLines(ledger)).toHaveLength(1);

    // Under the launcher the recycled child is replaced at once and the run carries on to an empty queue.
    await c.db.query('DELETE FROM jobs');
    expect((await c.statusq('enqueue', '--db', c.db.url, '--file', c.file('again.ndjson', '{"kind":"stuck"}\n{"kind":"quick"}\n{"kind":"quick"}\n'))).code).toBe(0);
    const supervised = await c.statusq(...args, '--processes', '1');
    expect(supervised.code, supervised.stderr).toBe(0);
    expect(logLines(supervised.stdout).filter((line) => line.level === 'warn').map((line) => line.msg)).toContain('restarting worker process 1 in 0 ms');
    expect(await c.stats()).toMatchObject({ pending: 0, processing: 0, done: 2, failed: 1 });
  });

  it('a result the database refuses settles the row failed with the reason; a settle no row can ever pass ends the run with exit 1', async () => {
    const c = ctx();
    // CHECK constraints are enforced by all three servers and invisible to introspection, so the refusal
    // comes from the database at settle time, as it would from a column the worker knows nothing about.
    await c.db.query(
      'CREATE TABLE picky (id INTEGER PRIMARY KEY, date INTEGER, status SMALLINT, ' +
        'result TEXT CHECK (result IS NULL OR LENGTH(result) < 40), last_error TEXT)',
    );
    await c.db.query('INSERT INTO picky (id, date) VALUES (1, 1)');
    const big = c.file('big.mjs', `export default async () => ({ text: 'x'.repeat(100) });`);
    const run = await c.statusq('work', '--db', c.db.url, '--table', 'picky', '--handler', big, '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/done 0, failed 1/);
    const [row] = await c.db.query<{ status: unknown; last_error: string }>('SELECT status, last_error FROM picky');
    expect(Number(row!.status)).toBe(0);
    expect(row!.last_error).toMatch(/^result could not be stored: /);

    // Done (1) itself is refused, whatever the result: every completion would fail, so the run must end.
    await c.db.query('CREATE TABLE never_done (id INTEGER PRIMARY KEY, date INTEGER, status SMALLINT CHECK (status IS NULL OR status <> 1))');
    await c.db.query('INSERT INTO never_done (id, date) VALUES (1, 1), (2, 2), (3, 3)');
    const ok = c.file('ok.mjs', 'export default async () => undefined;');
    const stuck = await c.statusq('work', '--db', c.db.url, '--table', 'never_done', '--handler', ok, '--concurrency', '1', '--exit-when-empty');
    expect(stuck.code, stuck.stderr).toBe(1);
    expect(logLines(stuck.stdout).filter((line) => line.level === 'error').map((line) => line.msg)).toContainEqual(expect.stringMatching(/^settle of job 3: /));
    expect(stuck.stderr.split('\n').at(-1)).toMatch(/^statusq: database error \(Unknown [^)]*\): /);
    // No further row was claimed once settling proved impossible.
    expect(await c.stats('never_done')).toMatchObject({ pending: 2, processing: 1 });
  });

  it('a handler that ends its process costs an attempt only to itself: the claims it kept from starting go back free (--processes)', async () => {
    const c = ctx();
    expect((await c.statusq('init', '--db', c.db.url)).code).toBe(0);
    // The crashing row is the newest, so it starts first in each claimed batch and its process.exit()
    // stops the other three from ever starting.
    const date = (s: number) => target.dateLiteral(`2024-01-01T00:00:0${s}.000Z`);
    await c.db.query(
      `INSERT INTO jobs (date, payload) VALUES (${date(1)}, '{"kind":"innocent"}'), (${date(2)}, '{"kind":"innocent"}'), ` +
        `(${date(3)}, '{"kind":"innocent"}'), (${date(4)}, '{"kind":"crash"}')`,
    );
    const ledger = join(c.dir, 'ledger.txt');
    const handler = c.file(
      'crash.mjs',
      `import { appendFileSync } from 'node:fs';
       export default async (job) => {
         appendFileSync(${JSON.stringify(ledger)}, job.payload.kind + ' ' + job.id + '\\n');
         if (job.payload.kind === 'crash') process.exit(7);
       };`,
    );
    const run = await c.statusq(
      'work', '--db', c.db.url, '--table', 'jobs', '--handler', handler, '--processes', '1', '--concurrency', '4',
      '--max-attempts', '2', '--lease', '1s', '--exit-when-empty',
    );
    expect(run.code, run.stderr).toBe(0);
    // Two deaths: the first charges the crashing row's first attempt, the second its last, giving it up.
    const recoveries = logLines(run.stdout).filter((line) => line.level === 'warn' && / charged an attempt/.test(line.msg)).map((line) => line.msg.replace(/^worker process \d+: /, ''));
    expect(recoveries).toEqual(['1 running job charged an attempt, 3 claimed but not started handed back', '1 running job charged an attempt (1 given up: attempts used), 3 claimed but not started handed back']);
    const rows = await c.db.query<{ status: unknown; attempt_count: unknown; last_error: string | null; payload: string }>(
      'SELECT status, attempt_count, last_error, payload FROM jobs ORDER BY date',
    );
    expect(rows.map((r) => [JSON.parse(r.payload).kind, Number(r.status), Number(r.attempt_count)])).toEqual([
      ['innocent', 1, 0],
      ['innocent', 1, 0],
      ['innocent', 1, 0],
      ['crash', 0, 2],
    ]);
    expect(rows[3]!.last_error).toMatch(/^worker process \d+ exited with code 7 while this job ran$/);
    // The innocents ran once each: only after the poison row was out of the way.
    expect(ledgerLines(ledger).filter((line) => line.startsWith('innocent'))).toHaveLength(3);
  });
}
