// `statusq work`'s log: JSON lines (the default off a terminal), levels, bounded errors, pretty lines and the
// password scrub. Part of the CLI scenarios every dialect runs.
import { expect, it } from 'vitest';
import { logLines, type LogLine } from './cli-harness.js';
import type { CliContext, CliTarget } from './cli-target.js';

/** Row 2 fails every attempt with a stack far past the log's bound; the others succeed. */
const FLAKY = `export default async (job) => {
  if (job.payload.n !== 2) return;
  const error = new Error('boom on attempt ' + job.attempt);
  error.stack = 'Error: boom on attempt ' + job.attempt + '\\n' + '    at deep (file:///handler.mjs:1:1)\\n'.repeat(1000);
  throw error;
};`;

async function enqueueThree(c: CliContext): Promise<void> {
  expect((await c.statusq('init', '--db', c.db.url)).code).toBe(0);
  expect((await c.statusq('enqueue', '--db', c.db.url, '--file', c.file('rows.ndjson', '{"n":1}\n{"n":2}\n{"n":3}\n'))).code).toBe(0);
}

export function logScenarios(ctx: () => CliContext, target: CliTarget): void {
  it('work logs JSON lines with time, level, pid and worker id; a retry warns, a failure is an error with a bounded stack', async () => {
    const c = ctx();
    await enqueueThree(c);
    const before = Date.now();
    const run = await c.statusq('work', '--db', c.db.url, '--table', 'jobs', '--handler', c.file('flaky.mjs', FLAKY), '--max-attempts', '2', '--retry-delay', '1ms', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe('');
    const lines = logLines(run.stdout);
    const pid = lines[0]!.pid;
    for (const line of lines) {
      expect(Date.parse(line.time)).toBeGreaterThanOrEqual(before - 1000);
      expect(Date.parse(line.time)).toBeLessThanOrEqual(Date.now());
      expect(line.pid).toBe(pid);
      expect(line.workerId).toMatch(new RegExp(`:${pid}:`));
    }
    // Done jobs are debug: at the default level only the start, the retry, the failure and the summary.
    expect(lines.map((line) => line.level)).toEqual(['info', 'warn', 'error', 'info']);
    const [, retry, failure, summary] = lines as [LogLine, LogLine, LogLine, LogLine];
    expect(retry).toMatchObject({ table: 'jobs', jobId: 2, attempt: 1, outcome: 'retry', delayMs: expect.any(Number), durationMs: expect.any(Number) });
    expect(retry.err).toMatchObject({ type: 'Error', message: 'boom on attempt 1' });
    expect(failure).toMatchObject({ table: 'jobs', jobId: 2, attempt: 2, outcome: 'failed', msg: 'job failed: Error: boom on attempt 2' });
    expect(failure.err).toMatchObject({ type: 'Error', message: 'boom on attempt 2' });
    expect(failure.err!.stack).toMatch(/^Error: boom on attempt 2\n {4}at deep /);
    expect(failure.err!.stack).toMatch(/… \(\d+ chars\)$/);
    expect(failure.err!.stack!.length).toBeLessThan(4096 + 30);
    expect(summary.msg).toMatch(/^worked 3 jobs in .*: done 2, failed 1, abuse 0, retried 1,/);
    expect(summary.counters).toMatchObject({ completed: 2, failed: 1, retried: 1 });
  });

  it('--log-level error hides warnings and info; --log-level debug adds a line per done job', async () => {
    const c = ctx();
    await enqueueThree(c);
    const handler = c.file('flaky.mjs', FLAKY);
    const quiet = await c.statusq('work', '--db', c.db.url, '--table', 'jobs', '--handler', handler, '--max-attempts', '2', '--retry-delay', '1ms', '--exit-when-empty', '--log-level', 'error');
    expect(quiet.code, quiet.stderr).toBe(0);
    expect(logLines(quiet.stdout).map((line) => [line.level, line.msg])).toEqual([['error', 'job failed: Error: boom on attempt 2']]);

    await c.db.query('DELETE FROM jobs');
    expect((await c.statusq('enqueue', '--db', c.db.url, '--payload', '{"n":1}')).code).toBe(0);
    const loud = await c.statusq('work', '--db', c.db.url, '--table', 'jobs', '--handler', handler, '--exit-when-empty', '--log-level', 'debug');
    expect(loud.code, loud.stderr).toBe(0);
    const done = logLines(loud.stdout).filter((line) => line.level === 'debug');
    expect(done).toEqual([expect.objectContaining({ msg: 'job done', outcome: 'done', table: 'jobs', attempt: 1, jobId: expect.anything(), durationMs: expect.any(Number) })]);

    const bad = await c.statusq('work', '--db', c.db.url, '--table', 'jobs', '--handler', handler, '--log-level', 'verbose');
    expect(bad).toMatchObject({ code: 2, stdout: '', stderr: 'statusq: --log-level must be error, warn, info or debug, got "verbose"' });
    const clash = await c.statusq('work', '--db', c.db.url, '--table', 'jobs', '--handler', handler, '--verbose', '--log-level', 'warn');
    expect(clash).toMatchObject({ code: 2, stdout: '', stderr: expect.stringMatching(/--verbose means --log-level debug/) });
  });

  it("init --with tracing; a row whose trace_context is not W3C trace context still runs, and --log-level debug says once that it was ignored", async () => {
    const c = ctx();
    expect((await c.statusq('init', '--db', c.db.url, '--with', 'tracing')).code).toBe(0);
    expect((await c.statusq('enqueue', '--db', c.db.url, '--payload', '{"n":1}')).code).toBe(0);
    await c.db.query("UPDATE jobs SET trace_context = 'not-a-traceparent'");
    const run = await c.statusq('work', '--db', c.db.url, '--table', 'jobs', '--handler', c.file('ok.mjs', 'export default async () => {};'), '--exit-when-empty', '--log-level', 'debug');
    expect(run.code, run.stderr).toBe(0);
    const debug = logLines(run.stdout).filter((line) => line.level === 'debug');
    expect(debug).toEqual([
      expect.objectContaining({ msg: expect.stringMatching(/^trace_context ignored: not a W3C traceparent/), table: 'jobs', attempt: 1, jobId: expect.anything() }),
      expect.objectContaining({ msg: 'job done', outcome: 'done' }),
    ]);
  });

  it('--log-format pretty prints readable lines, not JSON, without colour off a terminal', async () => {
    const c = ctx();
    await enqueueThree(c);
    const run = await c.statusq('work', '--db', c.db.url, '--table', 'jobs', '--handler', c.file('flaky.mjs', FLAKY), '--max-attempts', '1', '--exit-when-empty', '--log-format', 'pretty');
    expect(run.code, run.stderr).toBe(0);
    expect(() => logLines(run.stdout)).toThrow();
    const heads = run.stdout.split('\n').filter((line) => line.startsWith('['));
    expect(heads).toEqual([
      expect.stringMatching(/^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] INFO: \[\d+ \S+:\d+:\w+\] worker started on jobs$/),
      expect.stringMatching(/^\[[^\]]+\] ERROR: \[\d+ \S+\] job failed: Error: boom on attempt 1$/),
      expect.stringMatching(/^\[[^\]]+\] INFO: \[\d+ \S+\] worked 3 jobs in /),
    ]);
    expect(run.stdout).toMatch(/^ {4}jobId: 2$/m);
    // No ANSI colour escape (ESC, code 27) off a terminal.
    expect(run.stdout.includes(String.fromCharCode(27))).toBe(false);
  });

  it(`the log never shows a database password, even as JSON escapes it (${target.dialect})`, async () => {
    const c = ctx();
    await enqueueThree(c);
    // The application's own URL, with a password JSON must escape, quoted by a failing handler.
    const leaky = c.file('leaky.mjs', 'export default async () => { throw new Error(`cannot reach ${process.env.DATABASE_URL}`); };');
    const url = 'postgres://app:S3cret"Pw\\x@db.internal/app';
    for (const format of ['json', 'pretty']) {
      await c.db.query('UPDATE jobs SET status = NULL');
      const run = await c.statusqWith({ DATABASE_URL: url }, 'work', '--db', c.db.url, '--table', 'jobs', '--handler', leaky, '--max-attempts', '1', '--exit-when-empty', '--log-format', format);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/cannot reach postgres:\/\/app:\*\*\*@db\.internal\/app/);
      expect(run.stdout, format).not.toMatch(/S3cret/);
    }
  });

  it('a lease that expired is reaped and logged once, as a warning', async () => {
    const c = ctx();
    await enqueueThree(c);
    // Row 1 was claimed long ago by a worker that died.
    await c.db.query(`UPDATE jobs SET status = 9, claimed_at = ${target.dateLiteral('2020-01-01T00:00:00.000Z')} WHERE id = 1`);
    const run = await c.statusq('work', '--db', c.db.url, '--table', 'jobs', '--handler', c.file('ok.mjs', 'export default async () => {};'), '--lease', '1s', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    const reaped = logLines(run.stdout).filter((line) => line.msg.startsWith('reaped '));
    expect(reaped).toEqual([expect.objectContaining({ level: 'warn', reaped: 1, table: 'jobs', msg: 'reaped 1 row whose lease expired (their worker stopped renewing it): 1 back to pending' })]);
    expect(await c.stats()).toMatchObject({ done: 3, processing: 0 });
  });
}
