// `statusq work --metrics-port`: Prometheus counters that match the table, the probes, and a server that
// closes with the worker. Part of the CLI scenarios every dialect runs.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { childPids, launchCli, logLines, until, type LaunchedCli } from './cli-harness.js';
import type { CliContext } from './cli-target.js';

/**
 * Row 4 fails every attempt, row 5 is abuse, row 6 runs until the test creates the file `release` (bounded,
 * so a broken test cannot leave it running), the others succeed.
 */
const handler = (release: string) => `import { existsSync } from 'node:fs';
export default async (job, ctx) => {
  if (job.payload.n === 4) throw new Error('always fails');
  if (job.payload.n === 5) return ctx.abuse('rule');
  if (job.payload.n !== 6) return;
  for (let i = 0; i < 1500 && !existsSync(${JSON.stringify(release)}); i++) await new Promise((r) => setTimeout(r, 20));
};`;

/** The samples of one Prometheus text exposition, `name{labels}` → value. */
function samples(text: string): Map<string, number> {
  const map = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    map.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return map;
}

/** Everything the command has written to stdout so far (its JSON log). */
function collectStdout(run: LaunchedCli): { text: string } {
  const out = { text: '' };
  run.child.stdout!.on('data', (chunk: Buffer) => (out.text += chunk.toString()));
  return out;
}

/** Waits for the `metrics on` log line (port 0: the server picked its port) and returns a GET on that port. */
async function metricsEndpoint(run: LaunchedCli, stdout: { text: string }) {
  let port = 0;
  await until('the metrics line', () => {
    const line = stdout.text.split('\n').find((l) => l.includes('"metricsPort"'));
    if (line) port = (JSON.parse(line) as { metricsPort: number }).metricsPort;
    return port > 0 || run.child.exitCode !== null;
  });
  expect(port, run.stderr()).toBeGreaterThan(0);
  const get = async (path: string) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: response.status, text: await response.text(), type: response.headers.get('content-type') };
  };
  return { port, get };
}

export function metricsScenarios(ctx: () => CliContext): void {
  it('work --metrics-port serves counters equal to the table, /healthz, and /readyz until it drains; the server closes with the worker', async () => {
    const c = ctx();
    expect((await c.statusq('init', '--db', c.db.url)).code).toBe(0);
    expect((await c.statusq('enqueue', '--db', c.db.url, '--file', c.file('rows.ndjson', [1, 2, 3, 4, 5, 6].map((n) => `{"n":${n}}`).join('\n')))).code).toBe(0);
    const release = join(c.dir, 'release');
    const run = launchCli(c.dir, ['work', '--db', c.db.url, '--table', 'jobs', '--handler', c.file('h.mjs', handler(release)), '--concurrency', '6', '--max-attempts', '2', '--retry-delay', '1ms', '--metrics-port', '0']);
    const stdout = collectStdout(run);
    try {
      const { port, get } = await metricsEndpoint(run, stdout);
      const metric = async () => samples((await get('/metrics')).text);
      const jobs = (m: Map<string, number>, outcome: string) => m.get(`statusq_jobs_total{table="jobs",outcome="${outcome}"}`);

      expect(await get('/healthz')).toMatchObject({ status: 200 });
      expect((await get('/nope')).status).toBe(404);
      await until('five rows settled and row 6 running', async () => {
        const m = await metric();
        return jobs(m, 'done') === 3 && jobs(m, 'failed') === 1 && jobs(m, 'abuse') === 1 && m.get('statusq_jobs_in_flight{table="jobs"}') === 1;
      });
      const during = await get('/metrics');
      expect(during.type).toMatch(/^text\/plain; version=0\.0\.4/);
      const m = samples(during.text);
      // Every settled outcome the counters saw is the table's.
      const table = await c.stats();
      expect(table).toMatchObject({ done: 3, failed: 1, abuse: 1, processing: 1, pending: 0 });
      expect({ done: jobs(m, 'done'), failed: jobs(m, 'failed'), abuse: jobs(m, 'abuse'), retried: jobs(m, 'retried'), lost: jobs(m, 'lost') }).toEqual({ done: table.done, failed: table.failed, abuse: table.abuse, retried: 1, lost: 0 });
      expect(m.get('statusq_job_duration_seconds_count{table="jobs",outcome="done"}')).toBe(3);
      expect(m.get('statusq_job_duration_seconds_count{table="jobs",outcome="retried"}')).toBe(1);
      // Rows 1-6 and the retry of row 4, each claimed once: the rows per claim add up to 7.
      expect(m.get('statusq_claim_rows_sum{table="jobs"}')).toBe(7);
      expect(m.get('statusq_claim_duration_seconds_count{table="jobs"}')).toBe(m.get('statusq_claim_rows_count{table="jobs"}'));
      // Whenever the gauge was read, the table held its six rows.
      const queued = ['pending', 'processing', 'done', 'abuse', 'failed', 'other'].map((s) => m.get(`statusq_queue_rows{table="jobs",status="${s}"}`) ?? NaN);
      expect(queued.reduce((a, b) => a + b, 0)).toBe(6);
      // A table without a kind column has no gauge by kind, not even its HELP line.
      expect(during.text).not.toContain('statusq_queue_kind_rows');
      expect(m.get('statusq_lease_reaped_total{table="jobs"}')).toBe(0);
      expect(m.has('process_cpu_user_seconds_total')).toBe(true);
      expect(m.has('nodejs_eventloop_lag_seconds')).toBe(true);
      expect(await get('/readyz')).toMatchObject({ status: 200, text: 'ok\n' });

      // Draining: row 6 still runs, so the process (and its server) lives on, but is no longer ready.
      run.child.kill('SIGTERM');
      await until('readyz to say draining', async () => (await get('/readyz')).status === 503);
      expect(await get('/readyz')).toMatchObject({ status: 503, text: 'draining\n' });
      expect((await get('/healthz')).status).toBe(200);
      writeFileSync(release, '');
      const result = await run.ended;
      // Exiting at all shows the server let go of the event loop.
      expect(result.code, result.stderr).toBe(0);
      expect(await c.stats()).toMatchObject({ done: 4, failed: 1, abuse: 1, processing: 0, pending: 0 });
      await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
      expect(logLines(result.stdout).some((line) => line.msg.startsWith(`metrics on http://127.0.0.1:${port}/metrics`))).toBe(true);
    } finally {
      if (run.child.exitCode === null) run.child.kill('SIGKILL');
      await run.ended;
    }
  });

  // Under --processes the launcher reads the gauge once for its children, on its own connection.
  it.each([['one process', []], ['--processes 2', ['--processes', '2']]] as const)('on a table with kinds (%s), statusq_queue_kind_rows counts the pending and processing rows of each kind, a kind no worker handles and rows without a kind included', async (_, processes) => {
    const c = ctx();
    expect((await c.statusq('init', '--db', c.db.url, '--with', 'kinds')).code).toBe(0);
    for (const kind of ['email', 'email', 'archive']) expect((await c.statusq('enqueue', '--db', c.db.url, '--kind', kind, '--payload', '{"n":0}')).code).toBe(0);
    expect((await c.statusq('enqueue', '--db', c.db.url, '--payload', '{"n":0}')).code).toBe(0);
    const release = join(c.dir, 'release');
    const handlers = join(c.dir, 'handlers');
    mkdirSync(handlers);
    // Emails run until the test creates `release` (bounded), so no row finishes while the gauge is read.
    writeFileSync(join(handlers, 'email.mjs'), handler(release).replace('job.payload.n !== 6', 'false'));
    const run = launchCli(c.dir, ['work', '--db', c.db.url, '--table', 'jobs', '--handlers', handlers, '--metrics-port', '0', ...processes]);
    const stdout = collectStdout(run);
    try {
      const { get } = await metricsEndpoint(run, stdout);
      const kindRows = (m: Map<string, number>, kind: string, status: string) => m.get(`statusq_queue_kind_rows{table="jobs",kind="${kind}",status="${status}"}`);
      let m = new Map<string, number>();
      await until('the kind gauge', async () => {
        m = samples((await get('/metrics')).text);
        return kindRows(m, 'archive', 'pending') !== undefined;
      });
      expect([kindRows(m, 'archive', 'pending'), kindRows(m, 'archive', 'processing'), kindRows(m, '', 'pending'), kindRows(m, '', 'processing')]).toEqual([1, 0, 1, 0]);
      // Read at start-up, as the worker began claiming: each email is pending or already processing, none done.
      expect(kindRows(m, 'email', 'pending')! + kindRows(m, 'email', 'processing')!).toBe(2);
      expect([...m.keys()].filter((key) => key.startsWith('statusq_queue_kind_rows')).sort()).toEqual(
        ['archive', 'email', ''].flatMap((kind) => ['pending', 'processing'].map((status) => `statusq_queue_kind_rows{table="jobs",kind="${kind}",status="${status}"}`)).sort(),
      );
      // The per-status gauge keeps its labels.
      expect(m.get('statusq_queue_rows{table="jobs",status="pending"}')! + m.get('statusq_queue_rows{table="jobs",status="processing"}')!).toBe(4);
      writeFileSync(release, '');
      run.child.kill('SIGTERM');
      const result = await run.ended;
      expect(result.code, result.stderr).toBe(0);
    } finally {
      if (run.child.exitCode === null) run.child.kill('SIGKILL');
      await run.ended;
    }
  });

  it('work --processes 2 --metrics-port: the launcher serves its children\'s merged totals, equal to the table, and keeps a killed child\'s counts', async () => {
    const c = ctx();
    expect((await c.statusq('init', '--db', c.db.url)).code).toBe(0);
    const rows = Array.from({ length: 1500 }, (_, i) => JSON.stringify({ n: i })).join('\n');
    expect((await c.statusq('enqueue', '--db', c.db.url, '--file', c.file('rows.ndjson', rows))).code).toBe(0);
    // Every 50th row fails both attempts, the next one is abuse. Each job leaves its process's pid in `pids`
    // and waits (bounded) until both children have taken a job, so the child killed below has counts to lose.
    const pids = join(c.dir, 'pids');
    const handler = c.file('outcomes.mjs', `import { appendFileSync, readFileSync } from 'node:fs';
export default async (job, ctx) => {
  appendFileSync(${JSON.stringify(pids)}, process.pid + '\\n');
  for (let i = 0; i < 1000 && new Set(readFileSync(${JSON.stringify(pids)}, 'utf8').split('\\n').filter(Boolean)).size < 2; i++) await new Promise((r) => setTimeout(r, 10));
  if (job.payload.n % 50 === 0) throw new Error('always fails');
  if (job.payload.n % 50 === 1) return ctx.abuse('rule');
};`);
    const run = launchCli(c.dir, ['work', '--db', c.db.url, '--table', 'jobs', '--handler', handler, '--processes', '2', '--concurrency', '4', '--max-attempts', '2', '--retry-delay', '1ms', '--metrics-port', '0']);
    try {
      const stdout = collectStdout(run);
      const { port, get } = await metricsEndpoint(run, stdout);
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
      expect(await c.stats()).toEqual({ pending: 0, processing: 0, done: 1440, abuse: 30, failed: 30, other: 0 });
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
    } finally {
      if (run.child.exitCode === null) for (const pid of [...childPids(run.child.pid!), run.child.pid!]) process.kill(pid, 'SIGKILL');
      await run.ended;
    }
  });

  it('work --processes 2 --metrics-port --exit-when-empty: a run shorter than a snapshot interval still ends with every job in the launcher\'s merged totals', async () => {
    const c = ctx();
    expect((await c.statusq('init', '--db', c.db.url)).code).toBe(0);
    expect((await c.statusq('enqueue', '--db', c.db.url, '--file', c.file('rows.ndjson', [1, 2, 3, 4, 5, 6].map((n) => `{"n":${n}}`).join('\n')))).code).toBe(0);
    // No job waits: both children drain the six rows and exit within a fraction of the 1 s snapshot
    // interval, so their counts reach the launcher only through the snapshot each sends as it exits.
    const handler = c.file('quick.mjs', `export default async (job, ctx) => {
  if (job.payload.n === 4) throw new Error('always fails');
  if (job.payload.n === 5) return ctx.abuse('rule');
};`);
    const result = await c.statusq('work', '--db', c.db.url, '--table', 'jobs', '--handler', handler, '--processes', '2', '--concurrency', '4', '--max-attempts', '2', '--retry-delay', '1ms', '--metrics-port', '0', '--exit-when-empty');
    expect(result.code, result.stderr).toBe(0);
    const table = await c.stats();
    expect(table).toEqual({ pending: 0, processing: 0, done: 4, abuse: 1, failed: 1, other: 0 });
    // The launcher exits as its children do, so no scrape can be relied on to come after their last
    // snapshots: what it served last is the merged statusq_jobs_total it logs as it closes the endpoint.
    const lines = logLines(result.stdout);
    const last = lines.filter((line) => line.jobs !== undefined);
    expect(last, result.stdout).toHaveLength(1);
    expect(last[0]!.pid).toBe(lines.find((line) => String(line.msg).startsWith('worker processes ended'))?.pid);
    expect(last[0]!.jobs).toEqual({ done: table.done, failed: table.failed, abuse: table.abuse, retried: 1, lost: 0 });
  });

  it('work refuses a bad --metrics-port and --metrics-host alone, before touching the table', async () => {
    const c = ctx();
    const base = ['work', '--db', c.db.url, '--table', 'jobs', '--handler', c.file('ok.mjs', 'export default async () => {};')];
    expect(await c.statusq(...base, '--metrics-port', '70000')).toMatchObject({ code: 2, stderr: 'statusq: --metrics-port must be 1 to 65535 (or 0 for any free port), got 70000' });
    expect(await c.statusq(...base, '--metrics-port', 'http')).toMatchObject({ code: 2, stderr: 'statusq: --metrics-port must be a whole number, got "http"' });
    expect(await c.statusq(...base, '--metrics-host', '0.0.0.0')).toMatchObject({ code: 2, stderr: 'statusq: --metrics-host needs --metrics-port' });
  });
}
