// `statusq work --processes P` as a user runs it: the launcher and its children are real OS processes
// over one SQLite file.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { launchCli, logLines, parseStats, runCli, until, writeFixture } from './test/cli-harness.js';
import { samples } from './test/cli-metrics-scenarios.js';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

let dir: string;
let db: string;
const launched: ChildProcess[] = [];

const statusq = (...args: string[]) => runCli(dir, args);
const stats = () => parseStats(statusq('stats', '--db', db, '--table', 'jobs', '--json'));

/** Starts the launcher in the background; resolves with its exit code and output when it ends. */
function launch(...args: string[]) {
  const run = launchCli(dir, args);
  launched.push(run.child);
  return run;
}

function childPids(launcherPid: number): number[] {
  const ps = spawnSync('ps', ['-o', 'pid=', '--ppid', String(launcherPid)], { encoding: 'utf8' });
  return ps.stdout.split('\n').map((s) => Number(s.trim())).filter((n) => n > 0);
}

const file = (name: string, text: string) => writeFixture(dir, name, text);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'statusq-processes-'));
  db = `sqlite:${join(dir, 'q.db')}`;
  expect(statusq('init', '--db', db).code).toBe(0);
  const rows = Array.from({ length: 1500 }, (_, i) => JSON.stringify({ n: i })).join('\n');
  expect(statusq('enqueue', '--db', db, '--file', file('rows.ndjson', rows)).code).toBe(0);
});

afterEach(() => {
  for (const child of launched.splice(0)) {
    if (child.exitCode === null && child.pid) for (const pid of [...childPids(child.pid), child.pid]) process.kill(pid, 'SIGKILL');
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('statusq work --processes', () => {
  it('runs P worker processes that drain the queue together and exit 0', async () => {
    const handler = file('slow.mjs', 'export default async () => { await new Promise((r) => setTimeout(r, 1)); };');
    const run = await launch('work', '--db', db, '--table', 'jobs', '--handler', handler, '--processes', '3', '--concurrency', '4', '--exit-when-empty').ended;
    expect(run.code, run.stderr).toBe(0);
    const summaries = logLines(run.stdout).filter((line) => line.msg.startsWith('worked '));
    expect(summaries).toHaveLength(3);
    expect(new Set(summaries.map((line) => line.pid)).size).toBe(3);
    const handled = summaries.map((line) => Number(/done (\d+)/.exec(line.msg)![1]));
    expect(handled.reduce((a, b) => a + b, 0)).toBe(1500);
    expect(stats()).toEqual({ pending: 0, processing: 0, done: 1500, abuse: 0, failed: 0, other: 0 });
  });

  it('restarts a child killed with SIGKILL; its claims come back by lease and every row ends done', async () => {
    const handler = file('slow.mjs', 'export default async () => { await new Promise((r) => setTimeout(r, 10)); };');
    const run = launch('work', '--db', db, '--table', 'jobs', '--handler', handler, '--processes', '2', '--concurrency', '4', '--lease', '1s', '--exit-when-empty');
    await until('two worker processes', () => childPids(run.child.pid!).length === 2);
    await until('some rows done', () => stats().done > 100);
    const [victim] = childPids(run.child.pid!);
    process.kill(victim!, 'SIGKILL');
    const result = await run.ended;
    expect(result.code, result.stderr).toBe(0);
    const warnings = logLines(result.stdout).filter((line) => line.level === 'warn').map((line) => line.msg);
    expect(warnings).toContain(`worker process ${victim} killed by SIGKILL`);
    expect(warnings.filter((msg) => /^restarting worker process \d in \d+ ms$/.test(msg))).toHaveLength(1);
    expect(stats()).toEqual({ pending: 0, processing: 0, done: 1500, abuse: 0, failed: 0, other: 0 });
  });

  it('drains on SIGTERM: running jobs finish, no row is left processing, exit 0', async () => {
    const handler = file('slower.mjs', 'export default async () => { await new Promise((r) => setTimeout(r, 100)); };');
    const run = launch('work', '--db', db, '--table', 'jobs', '--handler', handler, '--processes', '2', '--concurrency', '4');
    await until('some rows done', () => stats().done >= 20);
    run.child.kill('SIGTERM');
    const result = await run.ended;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('SIGTERM: draining 2 worker processes');
    const after = stats();
    expect(after.processing).toBe(0);
    expect(after.pending + after.done).toBe(1500);
    expect(after.pending).toBeGreaterThan(0);
  });

  it('stops with a clear error when children keep crashing at start-up', async () => {
    // Crashes only in the children: the launcher itself loads the handler once to validate it.
    const handler = file('crash.mjs', "if (process.env.STATUSQ_SUPERVISED === '1') process.exit(3);\nexport default async () => {};");
    const run = await launch('work', '--db', db, '--table', 'jobs', '--handler', handler, '--processes', '2').ended;
    expect(run.code).toBe(1);
    expect(logLines(run.stdout).filter((line) => line.level === 'error').map((line) => line.msg)).toEqual([
      expect.stringMatching(/crashed at start-up 5 times in a row \(last: exit code 3\); giving up/),
    ]);
    expect(stats()).toEqual({ pending: 1500, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
  });

  it('--metrics-port: the launcher serves its children\'s merged totals, equal to the table, and keeps a killed child\'s counts', async () => {
    // Every 50th row fails both attempts, the next one is abuse. Each job leaves its process's pid in `pids`
    // and waits (bounded) until both children have taken a job, so the child killed below has counts to lose.
    const pids = join(dir, 'pids');
    const handler = file('outcomes.mjs', `import { appendFileSync, readFileSync } from 'node:fs';
export default async (job, ctx) => {
  appendFileSync(${JSON.stringify(pids)}, process.pid + '\\n');
  for (let i = 0; i < 1000 && new Set(readFileSync(${JSON.stringify(pids)}, 'utf8').split('\\n').filter(Boolean)).size < 2; i++) await new Promise((r) => setTimeout(r, 10));
  if (job.payload.n % 50 === 0) throw new Error('always fails');
  if (job.payload.n % 50 === 1) return ctx.abuse('rule');
};`);
    const run = launch('work', '--db', db, '--table', 'jobs', '--handler', handler, '--processes', '2', '--concurrency', '4', '--max-attempts', '2', '--retry-delay', '1ms', '--metrics-port', '0');
    let stdout = '';
    run.child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    let port = 0;
    await until('the metrics line', () => {
      const line = stdout.split('\n').find((l) => l.includes('"metricsPort"'));
      if (line) port = (JSON.parse(line) as { metricsPort: number }).metricsPort;
      return port > 0 || run.child.exitCode !== null;
    });
    expect(port, run.stderr()).toBeGreaterThan(0);
    const get = async (path: string) => {
      const response = await fetch(`http://127.0.0.1:${port}${path}`);
      return { status: response.status, text: await response.text() };
    };
    const totals = async () => {
      const m = samples((await get('/metrics')).text);
      const jobs = (outcome: string) => m.get(`statusq_jobs_total{table="jobs",outcome="${outcome}"}`);
      return { done: jobs('done'), failed: jobs('failed'), abuse: jobs('abuse'), retried: jobs('retried'), lost: jobs('lost'), restarts: m.get('statusq_worker_restarts_total'), m };
    };
    expect((await get('/healthz')).status).toBe(200);

    const final = { done: 1440, failed: 30, abuse: 30, retried: 30, lost: 0 };
    await until('the merged totals to equal the final table', async () => {
      const { m: _m, restarts: _r, ...jobs } = await totals();
      return JSON.stringify(jobs) === JSON.stringify(final);
    });
    expect(stats()).toEqual({ pending: 0, processing: 0, done: 1440, abuse: 30, failed: 30, other: 0 });
    const before = await totals();
    expect(before.restarts).toBe(0);
    // The launcher read the table once for all its children: 1500 rows, not 1500 per child.
    const queued = ['pending', 'processing', 'done', 'abuse', 'failed', 'other'].map((s) => before.m.get(`statusq_queue_rows{table="jobs",status="${s}"}`) ?? NaN);
    expect(queued.reduce((a, b) => a + b, 0)).toBe(1500);
    expect(before.m.get('statusq_claim_duration_seconds_count{table="jobs"}')).toBe(before.m.get('statusq_claim_rows_count{table="jobs"}'));
    expect(await get('/readyz')).toMatchObject({ status: 200, text: 'ok\n' });

    // Both children worked; the one killed takes its share of the counts with it unless the launcher keeps them.
    const [victim, survivor] = childPids(run.child.pid!);
    const handledBy = (pid: number) => readFileSync(pids, 'utf8').split('\n').filter((line) => line === String(pid)).length;
    expect(handledBy(victim!)).toBeGreaterThan(0);
    expect(handledBy(survivor!)).toBeGreaterThan(0);
    process.kill(victim!, 'SIGKILL');
    await until('the restart counted and the new child reporting', async () => {
      const now = await totals();
      // A counter never goes backwards, not even between the death and the restart.
      expect(now.done).toBe(final.done);
      const children = childPids(run.child.pid!);
      return now.restarts === 1 && children.length === 2 && !children.includes(victim!) && (await get('/readyz')).status === 200;
    });
    const after = await totals();
    expect({ done: after.done, failed: after.failed, abuse: after.abuse, retried: after.retried, lost: after.lost }).toEqual(final);
    expect(after.m.get('statusq_job_duration_seconds_count{table="jobs",outcome="done"}')).toBe(1440);

    run.child.kill('SIGTERM');
    const result = await run.ended;
    expect(result.code, result.stderr).toBe(0);
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });

  it('rejects bad input in the launcher before any child starts', () => {
    const run = statusq('work', '--db', db, '--table', 'jobs', '--handler', join(dir, 'missing.mjs'), '--processes', '2');
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(`statusq: handler file not found: ${join(dir, 'missing.mjs')}`);
    expect(statusq('work', '--db', db, '--table', 'jobs', '--handler', file('ok.mjs', 'export default async () => {};'), '--processes', '0').code).toBe(2);
  });
});
