// `statusq enqueue --wait` on every dialect: the outcome of the one row it inserted, printed, and as the exit
// code (0 done, 1 failed or abuse, 124 on --timeout), and its bad input. Part of the CLI scenarios (cli-scenarios.ts).
import { expect, it } from 'vitest';
import { launchCli, until } from './cli-harness.js';
import type { CliContext } from './cli-target.js';

export function awaitScenarios(ctx: () => CliContext): void {
  it('enqueue --wait prints the row\'s outcome once a worker ran it: done with its result (exit 0), failed with its last_error (exit 1)', async () => {
    const { statusq, db, file, dir } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const handler = file(
      'handler.mjs',
      `export default async (job) => {
         if (job.payload.poison) throw new Error('boom');
         return { doubled: job.payload.n * 2 };
       };`,
    );
    for (const [payload, code, outcome] of [
      ['{"n":21}', 0, 'done: row 1 {"doubled":42}'],
      ['{"n":1,"poison":true}', 1, 'failed: row 2 Error: boom'],
    ] as const) {
      // A process of its own, as a script runs it: the row is pending when it starts waiting, so only the
      // worker's settle can end its wait (its --timeout is far off).
      const waiting = launchCli(dir, ['enqueue', '--db', db.url, '--payload', payload, '--wait', '--timeout', '60s']);
      await until('enqueue --wait to insert its row', () => waiting.stdout().includes('enqueued 1 row into jobs'));
      const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--exit-when-empty', '--max-attempts', '1', '--poll-max', '50ms');
      expect(run.code, run.stderr).toBe(0);
      const ended = await waiting.ended;
      expect(ended, ended.stderr).toMatchObject({ code, stdout: `enqueued 1 row into jobs\n${outcome}` });
    }
  });

  it('enqueue --wait --timeout 200ms with no worker exits 124 and leaves the row pending; several rows, or --timeout without --wait, are refused before anything is written', async () => {
    const { statusq, db, file, stats } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const started = Date.now();
    expect(await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}', '--wait', '--timeout', '200ms')).toMatchObject({ code: 124, stdout: 'enqueued 1 row into jobs\ntimeout: row 1 had not finished after 200 ms' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(200);
    expect(await stats()).toMatchObject({ pending: 1, done: 0 });
    const rows = file('two.ndjson', '{"n":2}\n{"n":3}\n');
    const several = await statusq('enqueue', '--db', db.url, '--file', rows, '--wait');
    expect(several.code).toBe(2);
    expect(several.stderr).toContain('--wait waits for one row');
    const noWait = await statusq('enqueue', '--db', db.url, '--payload', '{"n":4}', '--timeout', '1s');
    expect(noWait.code).toBe(2);
    expect(noWait.stderr).toContain('--timeout applies only with --wait');
    expect(await stats()).toMatchObject({ pending: 1 });
  });
}
