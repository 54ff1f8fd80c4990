// `statusq dashboard` as an operator runs it, on every dialect: one dashboard process over a table holding
// every status answers the JSON API as `stats` and `inspect` would, and its requeue actions move exactly the
// rows they should (checked in the database); one with a token and --read-only refuses what it must; bad
// flags exit 2 without listening. Part of the CLI scenarios (cli-scenarios.ts).
import { existsSync, readFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { expect, it } from 'vitest';
import { TcpProxy, type CallDeadlines } from '@statusq/conformance';
import { generateTableARows, handlerPath } from '@statusq/test-fixtures';
import { cliBin, launchCli, logLines, until, type CliRun, type LaunchedCli, type StatusCounts } from './cli-harness.js';
import type { CliContext, CliTarget } from './cli-target.js';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const TOKEN = 't0ken-S3cret';
/** Short enough that a frozen database fails a request within the test, long enough for a loaded machine. */
const PROXY_DEADLINES: CallDeadlines = { connectTimeoutMs: 1500, queryTimeoutMs: 1500 };
/** The built page, when the package was built with it (vite, beside the server's modules). */
const INDEX_HTML = new URL('dashboard/index.html', pathToFileURL(cliBin));

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** One HTTP request with any headers (Host and Origin included, which fetch will not set), JSON parsed when it is. */
function http(port: number, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        let json: unknown = undefined;
        if (String(res.headers['content-type']).startsWith('application/json')) json = JSON.parse(text);
        resolve({ status: res.statusCode!, headers: res.headers, text, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A dashboard process started on port 0, once its log line says where it listens. */
async function startDashboard(c: CliContext, args: string[], env: NodeJS.ProcessEnv = {}, url = c.db.url, table = 'jobs') {
  const run = launchCli(c.dir, ['dashboard', '--db', url, '--table', table, '--port', '0', ...args], 90_000, env);
  const stdout = { text: '' };
  run.child.stdout!.on('data', (chunk: Buffer) => (stdout.text += chunk.toString()));
  let port = 0;
  await until('the dashboard to listen', () => {
    const line = stdout.text.split('\n').find((l) => l.includes('"url"'));
    if (line) port = Number(new URL((JSON.parse(line) as { url: string }).url).port);
    return port > 0 || run.child.exitCode !== null;
  });
  expect(port, run.stderr()).toBeGreaterThan(0);
  const api = (method: string, path: string, headers: Record<string, string> = {}, body?: unknown) =>
    http(port, method, path, body === undefined ? headers : { 'content-type': 'application/json', ...headers }, body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body));
  return { run, port, api, stop: () => stopDashboard(run) };
}

async function stopDashboard(run: LaunchedCli): Promise<CliRun> {
  if (run.child.exitCode === null) run.child.kill('SIGTERM');
  return run.ended;
}

/**
 * jobs: 1, 2 done; 3, 4 failed (3 finished first); 5 abuse; 6 processing, claimed in 2020 by a worker long
 * gone (lease expired); 7 processing, claimed now (lease live); 8 pending since 2024 (the oldest), 9 pending.
 */
async function everyStatus(c: CliContext, target: CliTarget): Promise<void> {
  const { db } = c;
  expect((await c.statusq('init', '--db', db.url)).code).toBe(0);
  const rows = Array.from({ length: 9 }, (_, i) => `{"n":${i + 1}}`).join('\n');
  expect((await c.statusq('enqueue', '--db', db.url, '--file', c.file('rows.ndjson', rows))).code).toBe(0);
  const at = (iso: string) => target.dateLiteral(iso);
  await db.query('UPDATE jobs SET status = 1 WHERE id IN (1, 2)');
  await db.query(`UPDATE jobs SET status = 0, attempt_count = 3, last_error = 'Error: boom 3', finished_at = ${at('2025-01-01T00:00:00.000Z')} WHERE id = 3`);
  await db.query(`UPDATE jobs SET status = 0, attempt_count = 3, last_error = 'Error: boom 4', finished_at = ${at('2025-01-02T00:00:00.000Z')} WHERE id = 4`);
  await db.query(`UPDATE jobs SET status = 2, last_error = 'spam' WHERE id = 5`);
  await db.query(`UPDATE jobs SET status = 9, claimed_at = ${at('2020-01-01T00:00:00.000Z')}, worker_id = 'gone:1:a:1' WHERE id = 6`);
  await db.query(`UPDATE jobs SET status = 9, claimed_at = ${target.now}, worker_id = 'live:2:b:1' WHERE id = 7`);
  await db.query(`UPDATE jobs SET date = ${at('2024-01-01T00:00:00.000Z')} WHERE id = 8`);
  expect(await c.stats()).toEqual({ pending: 2, processing: 2, done: 2, abuse: 1, failed: 2, other: 0 });
}

async function statusOf(c: CliContext, id: number): Promise<number | null> {
  const [row] = await c.db.query<{ status: unknown }>(`SELECT status FROM jobs WHERE id = ${id}`);
  return row!.status === null ? null : Number(row!.status);
}

export function dashboardScenarios(ctx: () => CliContext, target: CliTarget): void {
  it('dashboard on a table whose ids the application assigns (no default, no AUTO_INCREMENT): rows list and open by id, and a failed row requeues', async () => {
    const c = ctx();
    const ddl = target.fixtures.checked.assignedId;
    if (!ddl) throw new Error('every dialect has an assignedId fixture');
    for (const sql of ddl('assigned')) await c.db.query(sql);
    const at = target.dateLiteral('2026-01-01T00:00:00.000Z');
    await c.db.query(`INSERT INTO assigned (id, date, status) VALUES (41, ${at}, 0), (42, ${at}, 1), (43, ${at}, NULL)`);
    const { api, stop } = await startDashboard(c, [], {}, c.db.url, 'assigned');
    try {
      expect((await api('GET', '/api/stats')).json).toEqual({ pending: 1, processing: 0, done: 1, abuse: 0, failed: 1, other: 0 });
      expect((await api('GET', '/api/rows?status=failed')).json.rows.map((r: { id: unknown }) => Number(r.id))).toEqual([41]);
      expect(await api('GET', '/api/rows/42')).toMatchObject({ status: 200, json: { row: { status: 1 } } });
      expect(await api('POST', '/api/requeue', {}, { status: 'failed', ids: [41] })).toMatchObject({ status: 200, json: { requeued: 1, notRequeued: [] } });
      expect(await c.stats('assigned')).toMatchObject({ pending: 2, failed: 0 });
    } finally {
      expect((await stop()).code).toBe(0);
    }
  });


  it('dashboard cancel action: refused as requeue is (content type, Origin, Host) with the table unchanged; named pending and processing rows end failed with "cancelled: <reason>" (who asked, without one), a done row and an unknown id are listed, a bad body is 400; each cancel logs who asked', async () => {
    const c = ctx();
    expect((await c.statusq('init', '--db', c.db.url)).code).toBe(0);
    for (const n of [1, 2, 3, 4]) expect((await c.statusq('enqueue', '--db', c.db.url, '--payload', `{"n":${n}}`)).code).toBe(0);
    await c.db.query('UPDATE jobs SET status = 9 WHERE id = 2');
    await c.db.query('UPDATE jobs SET status = 1 WHERE id = 3');
    const { api, port, stop } = await startDashboard(c, []);
    let stopped: CliRun;
    try {
      const body = JSON.stringify({ ids: [1, 2] });
      for (const [what, headers, status, kind] of [
        ['text/plain', { 'content-type': 'text/plain' }, 415, 'UnsupportedMediaType'],
        ['no content type', {}, 415, 'UnsupportedMediaType'],
        ['another Origin', { 'content-type': 'application/json', origin: 'http://evil.example' }, 403, 'Forbidden'],
        ['a rebound Host', { 'content-type': 'application/json', host: `evil.example:${port}` }, 403, 'Forbidden'],
      ] as Array<[string, Record<string, string>, number, string]>) {
        expect(await http(port, 'POST', '/api/cancel', headers, body), what).toMatchObject({ status, json: { error: { kind, message: expect.any(String) } } });
      }
      expect(await http(port, 'POST', '/api/cancel', { 'content-type': 'application/json' }, JSON.stringify({ ids: [1], reason: 'x'.repeat(70 * 1024) }))).toMatchObject({ status: 413 });
      for (const bad of [{ ids: [] }, { ids: [1], all: true }, { ids: [1], reason: '' }, { ids: [{}] }, { status: 'pending', all: true }]) {
        expect(await api('POST', '/api/cancel', {}, bad), JSON.stringify(bad)).toMatchObject({ status: 400, json: { error: { kind: 'BadRequest' } } });
      }
      expect(await c.stats()).toMatchObject({ pending: 2, processing: 1, done: 1, failed: 0 });
      expect(await api('POST', '/api/cancel', { origin: `http://127.0.0.1:${port}` }, { ids: [1, 2, 3, 999], reason: 'wrong customer' })).toMatchObject({
        status: 200,
        json: { cancelled: 2, notCancelled: [{ id: 3, reason: 'status done' }, { id: 999, reason: 'not found' }] },
      });
      expect(await api('POST', '/api/cancel', {}, { ids: ['4'] })).toMatchObject({ status: 200, json: { cancelled: 1, notCancelled: [] } });
      // Already failed by the first cancel: a second click (a stale page) changes nothing and says why.
      expect(await api('POST', '/api/cancel', {}, { ids: [1] })).toMatchObject({ status: 200, json: { cancelled: 0, notCancelled: [{ id: 1, reason: 'status failed' }] } });
      expect(await c.stats()).toMatchObject({ pending: 0, processing: 0, done: 1, failed: 3 });
      expect((await c.db.query<{ last_error: unknown }>('SELECT last_error FROM jobs WHERE id <> 3 ORDER BY id')).map((r) => r.last_error)).toEqual([
        'cancelled: wrong customer',
        'cancelled: wrong customer',
        'cancelled: by anonymous@127.0.0.1 (dashboard)',
      ]);
    } finally {
      stopped = await stop();
    }
    expect(stopped.code, stopped.stderr).toBe(0);
    const cancels = logLines(stopped.stdout).filter((line) => line.action === 'cancel');
    expect(cancels.map((line) => [line.level, line.who, line.ids, line.reason, line.cancelled, line.notCancelled])).toEqual([
      ['info', 'anonymous@127.0.0.1', ['1', '2', '3', '999'], 'wrong customer', 2, 2],
      ['info', 'anonymous@127.0.0.1', ['4'], null, 1, 0],
      ['info', 'anonymous@127.0.0.1', ['1'], null, 0, 1],
    ]);
    expect(cancels[0]!.msg).toBe('cancel 1,2,3,999 by anonymous@127.0.0.1: cancelled 2, 2 not cancelled');
  });

  it('dashboard on a table with kinds: /api/stats and /api/overview count by kind as stats --json does, /api/rows?kind=K lists one kind, a bad kind is 400', async () => {
    const c = ctx();
    expect((await c.statusq('init', '--db', c.db.url, '--with', 'kinds')).code).toBe(0);
    for (const kind of ['email', 'email', 'archive']) expect((await c.statusq('enqueue', '--db', c.db.url, '--kind', kind, '--payload', '{}')).code).toBe(0);
    expect((await c.statusq('enqueue', '--db', c.db.url, '--payload', '{}')).code).toBe(0);
    await c.db.query('UPDATE jobs SET status = 1 WHERE id = 1');
    const { api, stop } = await startDashboard(c, []);
    try {
      const stats = (await api('GET', '/api/stats')).json;
      expect(stats).toEqual(JSON.parse((await c.statusq('stats', '--db', c.db.url, '--table', 'jobs', '--json')).stdout));
      const kinds = {
        '': { pending: 1, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 },
        archive: { pending: 1, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 },
        email: { pending: 1, processing: 0, done: 1, abuse: 0, failed: 0, other: 0 },
      };
      expect(stats.kinds).toEqual(kinds);
      expect((await api('GET', '/api/overview')).json).toMatchObject({ counts: { pending: 3, done: 1 }, kinds, columns: { kind: 'kind' } });
      const archive = await api('GET', '/api/rows?status=pending&kind=archive');
      expect(archive.json).toMatchObject({ status: 'pending', kind: 'archive', columns: expect.arrayContaining(['kind']) });
      expect(archive.json.rows.map((r: { id: unknown; kind: unknown }) => [Number(r.id), r.kind])).toEqual([[3, 'archive']]);
      expect(await api('GET', `/api/rows?status=pending&kind=${encodeURIComponent("x' OR 1=1")}`)).toMatchObject({ status: 400, json: { error: { kind: 'BadRequest', message: expect.stringMatching(/^inspect: kind must be 1 to 100 letters/) } } });
    } finally {
      expect((await stop()).code).toBe(0);
    }
  });

  it('dashboard on a table whose claim state is beside it (migrate --beside): a row shows its claims-table columns, failed rows list newest finished first with their reasons, and a requeue starts their attempts over', async () => {
    const c = ctx();
    for (const sql of target.fixtures.tableA('table_a')) await c.db.query(sql);
    await c.db.insertTableA(generateTableARows(20, { poisonEvery: 5, abuseEvery: 0 }));
    expect((await c.statusq('migrate', '--db', c.db.url, '--table', 'table_a', '--beside')).code).toBe(0);
    const run = await c.statusq('work', '--db', c.db.url, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--retry-delay', '1ms', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    const { api, stop } = await startDashboard(c, [], {}, c.db.url, 'table_a');
    try {
      // table_a's text column `kind` (ok, poison) is its kind column: /api/stats counts by it, as stats --json does.
      const stats = (await api('GET', '/api/stats')).json;
      expect(stats).toMatchObject({ pending: 0, processing: 0, done: 16, abuse: 0, failed: 4, other: 0, kinds: { ok: { done: 16 }, poison: { failed: 4 } } });
      expect(stats).toEqual(JSON.parse((await c.statusq('stats', '--db', c.db.url, '--table', 'table_a', '--json')).stdout));
      const failed = (await api('GET', '/api/rows?status=failed')).json as { columns: string[]; rows: Array<Record<string, unknown>> };
      expect(failed.columns).toEqual(expect.arrayContaining(['attempt_count', 'last_error', 'finished_at']));
      expect(failed.rows.map((r) => [Number(r.attempt_count), /unreachable host/.test(String(r.last_error))])).toEqual(Array.from({ length: 4 }, () => [3, true]));
      const one = (await api('GET', '/api/rows/5')).json as { row: Record<string, unknown> };
      expect(one.row).toMatchObject({ id: 5, status: 0, attempt_count: 3 });
      expect(await api('POST', '/api/requeue', {}, { status: 'failed', ids: [5] })).toMatchObject({ status: 200, json: { requeued: 1, notRequeued: [] } });
      expect(((await api('GET', '/api/rows/5')).json as { row: Record<string, unknown> }).row).toMatchObject({ status: null, attempt_count: 0 });
    } finally {
      expect((await stop()).code).toBe(0);
    }
  });

  it('dashboard: the API answers as stats and inspect do, requeue actions move exactly their rows (live leases stay), bad requests change nothing, SIGTERM exits 0', async () => {
    const c = ctx();
    await everyStatus(c, target);
    // Server dialects run it through a proxy, to take the database away and bring it back at the end.
    const route = target.throughProxy?.(c.db.url, PROXY_DEADLINES);
    const proxy = route ? await TcpProxy.start(route.upstream) : null;
    const dashboard = await startDashboard(c, [], {}, route && proxy ? route.via(proxy) : c.db.url);
    const { api, port } = dashboard;
    try {
      const initial: StatusCounts = await c.stats();
      const stats = await api('GET', '/api/stats');
      expect(stats.status).toBe(200);
      expect(stats.json).toEqual(initial);
      // Nothing grants a cross-site page the answers: no CORS header at all.
      expect(Object.keys(stats.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
      expect(stats.headers['x-frame-options']).toBe('DENY');

      const overview = (await api('GET', '/api/overview')).json;
      expect(overview).toMatchObject({
        table: 'jobs',
        readOnly: false,
        features: { leases: true, retries: true, results: true },
        columns: { id: 'id', status: 'status', order: 'date', claimedAt: 'claimed_at', lastError: 'last_error' },
        counts: initial,
        dispatched: null,
        oldestPending: { id: 8, order: '2024-01-01T00:00:00.000Z' },
        leaseMs: 300_000,
      });
      expect(overview.clock).toMatch(ISO);
      // A table without a kind column: no counts by kind.
      expect(overview).not.toHaveProperty('kinds');
      expect(overview.oldestPending.ageMs).toBe(Date.parse(overview.clock) - Date.parse('2024-01-01T00:00:00.000Z'));

      const failed = await api('GET', '/api/rows?status=failed');
      expect(failed.status).toBe(200);
      expect(failed.json).toMatchObject({ status: 'failed', limit: 20, columns: expect.arrayContaining(['id', 'status', 'last_error', 'finished_at']) });
      expect(failed.json.clock).toMatch(ISO);
      expect(failed.json.rows.map((r: { id: unknown; last_error: unknown }) => [Number(r.id), r.last_error])).toEqual([
        [4, 'Error: boom 4'],
        [3, 'Error: boom 3'],
      ]);
      const processing = (await api('GET', '/api/rows?status=processing&limit=5')).json;
      expect(processing.rows.map((r: { id: unknown; worker_id: unknown }) => [Number(r.id), r.worker_id])).toEqual([
        [6, 'gone:1:a:1'],
        [7, 'live:2:b:1'],
      ]);
      expect(processing.rows[0].claimed_at).toBe('2020-01-01T00:00:00.000Z');
      expect((await api('GET', '/api/rows?status=pending&limit=1')).json.rows).toHaveLength(1);
      const row = await api('GET', '/api/rows/5');
      expect(row.status).toBe(200);
      expect(row.json.row).toMatchObject({ payload: '{"n":5}', status: 2, last_error: 'spam' });
      expect(await api('GET', '/api/rows/999')).toMatchObject({ status: 404, json: { error: { kind: 'NotFound', message: 'no row of jobs has id 999' } } });
      // Beyond the id column's integers: no row's, on every dialect (PostgreSQL's refusal was a 503).
      expect(await api('GET', '/api/rows/99999999999999999999999')).toMatchObject({ status: 404, json: { error: { kind: 'NotFound', message: 'no row of jobs has id 99999999999999999999999' } } });
      for (const path of ['/api/rows/abc', '/api/rows?status=done', '/api/rows?limit=0', '/api/rows?limit=ten']) {
        expect(await api('GET', path), path).toMatchObject({ status: 400, json: { error: { kind: 'BadRequest' } } });
      }
      expect((await api('GET', '/api/nope')).status).toBe(404);
      expect((await api('GET', '/assets/none.js')).status).toBe(404);
      const page = await api('GET', '/');
      if (existsSync(INDEX_HTML)) expect(page).toMatchObject({ status: 200, text: readFileSync(INDEX_HTML, 'utf8') });
      else expect(page).toMatchObject({ status: 500, text: expect.stringContaining('statusq was built without its dashboard page') });

      // The sampler counts on its own timer once asked; its samples are the table's counts.
      let samples: Array<Record<string, number>> = [];
      await until('a throughput sample', async () => {
        const throughput = (await api('GET', '/api/throughput')).json as { intervalMs: number; samples: Array<Record<string, number>> };
        expect(throughput.intervalMs).toBeGreaterThanOrEqual(2000);
        samples = throughput.samples;
        return samples.length > 0;
      });
      const { done, failed: failedCount, abuse, pending, processing: processingCount } = initial;
      expect(samples[0]).toEqual({ t: expect.any(Number), done, failed: failedCount, abuse, pending, processing: processingCount });

      // Refused before anything runs: each leaves the table as it was.
      const origin = { origin: `http://127.0.0.1:${port}` };
      for (const [what, headers, body, status, kind] of [
        ['text/plain', { 'content-type': 'text/plain' }, '{"status":"failed","all":true}', 415, 'UnsupportedMediaType'],
        ['a form', { 'content-type': 'application/x-www-form-urlencoded' }, 'status=failed&all=true', 415, 'UnsupportedMediaType'],
        ['no content type', {}, '{"status":"failed","all":true}', 415, 'UnsupportedMediaType'],
        ['another Origin', { 'content-type': 'application/json', origin: 'http://evil.example' }, '{"status":"failed","all":true}', 403, 'Forbidden'],
        ['Origin null', { 'content-type': 'application/json', origin: 'null' }, '{"status":"failed","all":true}', 403, 'Forbidden'],
        ['a rebound Host', { 'content-type': 'application/json', host: `evil.example:${port}` }, '{"status":"failed","all":true}', 403, 'Forbidden'],
        ['a loopback Host with another port', { 'content-type': 'application/json', host: `localhost:${port + 1}` }, '{"status":"failed","all":true}', 403, 'Forbidden'],
        ['not JSON', { 'content-type': 'application/json' }, '{status', 400, 'BadRequest'],
        ['neither ids nor all', { 'content-type': 'application/json' }, '{"status":"failed"}', 400, 'BadRequest'],
        ['both ids and all', { 'content-type': 'application/json' }, '{"status":"failed","ids":[3],"all":true}', 400, 'BadRequest'],
        ['an empty id list', { 'content-type': 'application/json' }, '{"status":"failed","ids":[]}', 400, 'BadRequest'],
        ['all: false', { 'content-type': 'application/json' }, '{"status":"failed","all":false}', 400, 'BadRequest'],
        ['status done', { 'content-type': 'application/json' }, '{"status":"done","all":true}', 400, 'BadRequest'],
        ['an id that is no integer', { 'content-type': 'application/json' }, '{"status":"failed","ids":["x"]}', 400, 'BadRequest'],
        ['an unknown field', { 'content-type': 'application/json' }, '{"status":"failed","all":true,"force":true}', 400, 'BadRequest'],
      ] as Array<[string, Record<string, string>, string, number, string]>) {
        expect(await http(port, 'POST', '/api/requeue', headers, body), what).toMatchObject({ status, json: { error: { kind, message: expect.any(String) } } });
      }
      expect(await api('GET', '/api/stats', { host: 'attacker.example' })).toMatchObject({ status: 403, json: { error: { kind: 'Forbidden' } } });
      expect(await c.stats()).toEqual(initial);

      // By id, from the page's own origin: the failed row goes back to pending, the others are reported.
      expect(await api('POST', '/api/requeue', origin, { status: 'failed', ids: [3, 1, 999] })).toMatchObject({
        status: 200,
        json: { requeued: 1, live: 0, leaseMs: null, notRequeued: [{ id: 1, reason: 'status done' }, { id: 999, reason: 'not found' }] },
      });
      expect(await statusOf(c, 3)).toBeNull();
      expect(await statusOf(c, 4)).toBe(0);
      expect(await api('POST', '/api/requeue', { host: `localhost:${port}` }, { status: 'abuse', ids: ['5'] })).toMatchObject({ status: 200, json: { requeued: 1, notRequeued: [] } });
      expect(await statusOf(c, 5)).toBeNull();
      expect(await api('POST', '/api/requeue', {}, { status: 'failed', all: true })).toMatchObject({ status: 200, json: { requeued: 1, live: 0, leaseMs: null, notRequeued: [] } });
      expect(await statusOf(c, 4)).toBeNull();
      // Processing: only the claim whose lease expired; the live one is counted and left.
      expect(await api('POST', '/api/requeue', {}, { status: 'processing', all: true })).toMatchObject({ status: 200, json: { requeued: 1, live: 1, leaseMs: 300_000, notRequeued: [] } });
      expect(await api('POST', '/api/requeue', {}, { status: 'processing', ids: [7] })).toMatchObject({ status: 200, json: { requeued: 0, live: 1, notRequeued: [{ id: 7, reason: 'lease live' }] } });
      expect(await statusOf(c, 6)).toBeNull();
      expect(await statusOf(c, 7)).toBe(9);
      const after = { pending: 6, processing: 1, done: 2, abuse: 0, failed: 0, other: 0 };
      expect(await c.stats()).toEqual(after);
      expect((await api('GET', '/api/stats')).json).toEqual(after);

      if (proxy) {
        // The database goes away: the API says so (503, the store's error kind) and the process stays up.
        proxy.freeze();
        await until('a 503 while the database is frozen', async () => (await api('GET', '/api/stats')).status === 503, 30_000);
        const down = await api('GET', '/api/overview');
        expect(down).toMatchObject({ status: 503, json: { error: { kind: 'Database', message: expect.stringMatching(/^(ConnectionLost|Busy|Unknown)\b/) } } });
        proxy.thaw();
        proxy.dropAll();
        await until('the API to answer again once the database is back', async () => (await api('GET', '/api/stats')).status === 200, 30_000);
        expect((await api('GET', '/api/stats')).json).toEqual(after);
      }
    } finally {
      const run = await dashboard.stop();
      await proxy?.close();
      expect(run.code, run.stderr).toBe(0);
      const lines = logLines(run.stdout);
      expect(lines[0]).toMatchObject({ level: 'info', table: 'jobs', url: `http://127.0.0.1:${port}/`, msg: `dashboard on http://127.0.0.1:${port}/ (table jobs)` });
      const actions = lines.filter((line) => line.action === 'requeue');
      expect(actions.map((line) => [line.status, line.ids, line.requeued, line.who])).toEqual([
        ['failed', ['3', '1', '999'], 1, 'anonymous@127.0.0.1'],
        ['abuse', ['5'], 1, 'anonymous@127.0.0.1'],
        ['failed', 'all', 1, 'anonymous@127.0.0.1'],
        ['processing', 'all', 1, 'anonymous@127.0.0.1'],
        ['processing', ['7'], 0, 'anonymous@127.0.0.1'],
      ]);
      if (proxy) expect(lines.filter((line) => /^the database (does not answer|answers again)/.test(line.msg)).map((line) => line.level)).toEqual(['warn', 'info']);
      expect(lines.at(-1)).toMatchObject({ level: 'info', signal: 'SIGTERM', msg: 'SIGTERM: dashboard stopped' });
    }
  }, 120_000);

  it('dashboard with a token (STATUSQ_DASHBOARD_TOKEN) and --read-only: 401 without the token, 200 with Bearer or Basic, every POST 403 and the table unchanged', async () => {
    const c = ctx();
    await everyStatus(c, target);
    const initial = await c.stats();
    const { api, stop } = await startDashboard(c, ['--read-only'], { STATUSQ_DASHBOARD_TOKEN: TOKEN });
    const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });
    try {
      for (const [what, headers] of [
        ['no Authorization', {}],
        ['a wrong Bearer token', { authorization: 'Bearer nope' }],
        ['a Bearer token with one more character', { authorization: `Bearer ${TOKEN}x` }],
        ['a wrong Basic password', basic('ops', 'nope')],
        ['the token as the Basic user name', basic(TOKEN, '')],
        ['another scheme', { authorization: `Token ${TOKEN}` }],
      ] as Array<[string, Record<string, string>]>) {
        const answer = await api('GET', '/api/stats', headers);
        expect(answer, what).toMatchObject({ status: 401, json: { error: { kind: 'Unauthorized' } } });
        expect(answer.headers['www-authenticate'], what).toBe('Basic realm="statusq"');
      }
      // The page and its assets need the token too.
      expect((await api('GET', '/')).status).toBe(401);
      expect(await api('GET', '/api/stats', { authorization: `Bearer ${TOKEN}` })).toMatchObject({ status: 200, json: initial });
      expect(await api('GET', '/api/stats', basic('anyone', TOKEN))).toMatchObject({ status: 200, json: initial });
      expect(await api('GET', '/api/overview', { authorization: `Bearer ${TOKEN}` })).toMatchObject({ status: 200, json: { readOnly: true } });

      expect(await api('POST', '/api/requeue', {}, { status: 'failed', all: true })).toMatchObject({ status: 401 });
      expect(await api('POST', '/api/cancel', {}, { ids: [8] })).toMatchObject({ status: 401 });
      for (const body of [{ status: 'failed', all: true }, { status: 'abuse', ids: [5] }, { status: 'processing', all: true }]) {
        expect(await api('POST', '/api/requeue', { authorization: `Bearer ${TOKEN}` }, body)).toMatchObject({ status: 403, json: { error: { kind: 'ReadOnly' } } });
      }
      expect(await api('POST', '/api/cancel', basic('ops', TOKEN), { ids: [7, 8, 9], reason: 'no' })).toMatchObject({ status: 403, json: { error: { kind: 'ReadOnly' } } });
      expect(await c.stats()).toEqual(initial);
    } finally {
      const run = await stop();
      expect(run.code, run.stderr).toBe(0);
      expect(logLines(run.stdout)[0]!.msg).toMatch(/^dashboard on http:\/\/127\.0\.0\.1:\d+\/ \(table jobs, read-only, token required\)$/);
      expect(run.stdout).not.toContain(TOKEN);
    }
  });

  it('dashboard refuses bad flags, a non-loopback --host without a token and a port in use: exit 2, one line, never listening', async () => {
    const c = ctx();
    expect((await c.statusq('init', '--db', c.db.url)).code).toBe(0);
    const cases: Array<[string[], RegExp]> = [
      [['--host', '0.0.0.0'], /^statusq: dashboard: --host 0\.0\.0\.0 is not a loopback address, so anyone who reaches it could requeue or cancel rows; set STATUSQ_DASHBOARD_TOKEN \(or --token\)/],
      [['--host', '192.0.2.1', '--read-only'], /^statusq: dashboard: --host 192\.0\.2\.1 is not a loopback address/],
      [['--port', '70000'], /^statusq: dashboard: --port must be 1 to 65535 \(or 0 for any free port\), got 70000$/],
      [['--port', 'http'], /^statusq: --port must be a whole number, got "http"$/],
      [['--token', ''], /^statusq: dashboard: --token is empty$/],
      [['--token', 'hunter2'], /^statusq: dashboard: the token \(--token\) must be at least 12 characters; make one with: openssl rand -hex 24$/],
      [['--lease', '5'], /^statusq: .*--lease/],
      [['--status', 'failed'], /^statusq: dashboard: Unknown option '--status'/],
      [['--table', 'nope'], /^statusq: table "nope" does not exist$/],
    ];
    // A port another process holds.
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const takenPort = (taken.address() as AddressInfo).port;
    cases.push([['--port', String(takenPort)], new RegExp(`^statusq: dashboard: cannot listen on 127\\.0\\.0\\.1:${takenPort}: EADDRINUSE$`)]);
    const runs = await Promise.all(cases.map(([args]) => c.statusq('dashboard', '--db', c.db.url, '--table', 'jobs', '--port', '0', ...args))).finally(
      () => new Promise((resolve) => taken.close(resolve)),
    );
    runs.forEach((run, i) => {
      const what = cases[i]![0].join(' ');
      expect(run.code, `${what}: ${run.stderr}`).toBe(2);
      expect(run.stderr, what).toMatch(cases[i]![1]);
      expect(run.stderr.split('\n'), what).toHaveLength(1);
      expect(run.stdout, what).toBe('');
    });
  });
}
