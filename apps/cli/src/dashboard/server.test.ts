// What the dashboard serves besides the API, in process over a real SQLite table: the page and its hashed
// assets from the assets folder, nothing else of that folder (the server's own modules live there too), and
// a clear 500 when the package was built without its page.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { Queue, initTable, type Store } from '@statusq/core';
import { secretScrubber, urlSecrets } from '@statusq/core/tools';
import { openStore } from '../adapters.js';
import { createLogger } from '../log.js';
import { ThroughputSampler } from './sampler.js';
import { dashboardApp } from './server.js';

let dir: string;
let store: Store;
let sampler: ThroughputSampler;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'statusq-dashboard-'));
  store = await openStore(`sqlite:${join(dir, 'q.db')}`, { create: true }, undefined);
  await initTable(store, 'jobs');
});

afterEach(async () => {
  await sampler?.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

async function app(assetsDir: string, redact: (text: string) => string = (text) => text) {
  const queue = await Queue.open(store, { table: 'jobs' });
  const log = await createLogger({ level: 'info', format: 'json' }, { write: () => undefined, isTTY: false }, {});
  sampler = new ThroughputSampler(() => queue.counts());
  const served = dashboardApp({
    queue,
    oldestFirst: await Queue.open(store, { table: 'jobs', order: 'oldest' }),
    readOnly: false,
    leaseMs: undefined,
    guards: { token: null, loopback: true, port: () => 4300 },
    assetsDir,
    sampler,
    log,
    redact,
  });
  return (path: string) => served.request(path, { headers: { host: 'localhost:4300' } });
}

it('without index.html, / is a 500 that says the package was built without its page; the API still answers', async () => {
  const get = await app(join(dir, 'empty'));
  const page = await get('/');
  expect(page.status).toBe(500);
  expect(await page.text()).toMatch(/^statusq was built without its dashboard page \(.*empty\/index\.html is missing\)/);
  expect((await get('/api/stats')).status).toBe(200);
});

it('serves index.html at / and assets/ (cached for good: their names are content hashes), and nothing else of the folder', async () => {
  const assets = join(dir, 'dist-dashboard');
  mkdirSync(join(assets, 'assets'), { recursive: true });
  writeFileSync(join(assets, 'index.html'), '<!doctype html><title>statusq</title><script type="module" src="./assets/index-abc123.js"></script>');
  writeFileSync(join(assets, 'assets', 'index-abc123.js'), 'console.log(1);');
  writeFileSync(join(assets, 'server.js'), 'export const secret = 1;');
  const get = await app(assets);

  const page = await get('/');
  expect(page.status).toBe(200);
  expect(page.headers.get('content-type')).toMatch(/^text\/html/);
  expect(page.headers.get('cache-control')).toBe('no-cache');
  expect(page.headers.get('x-frame-options')).toBe('DENY');
  expect(await page.text()).toContain('<title>statusq</title>');

  const script = await get('/assets/index-abc123.js');
  expect(script.status).toBe(200);
  expect(script.headers.get('content-type')).toMatch(/javascript/);
  expect(script.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
  expect(await script.text()).toBe('console.log(1);');

  for (const path of ['/server.js', '/index.html', '/assets/../server.js', '/assets/%2e%2e/server.js', '/assets/missing.js']) {
    const answer = await get(path);
    expect(answer.status, path).toBe(404);
    expect(await answer.text(), path).not.toContain('secret');
  }
});

it('hides the database password in every row it serves, as inspect and the logs do, and keeps the JSON whole', async () => {
  // The probe's case: a driver's error quoting the password became a row's failure reason, which the
  // dashboard's API (and so its page) showed in clear.
  const password = 'pa"ss\\w0rd';
  const redact = secretScrubber(urlSecrets(`mysql://app:${encodeURIComponent(password)}@db.internal/shop`));
  const queue = await Queue.open(store, { table: 'jobs' });
  const [id] = await queue.enqueue([{ note: `connect with ${password}` }]);
  await store.execute({ sql: `UPDATE jobs SET status = 0, last_error = ? WHERE id = ?`, params: [`Access denied for user 'app' (using password: ${password})`, id!] });
  const get = await app(join(dir, 'empty'), redact);

  // The row itself (with its payload), and the lists of failed rows and of every row.
  for (const path of [`/api/rows/${String(id)}`, '/api/rows?status=failed', '/api/rows']) {
    const answer = await get(path);
    expect(answer.status, path).toBe(200);
    const text = await answer.text();
    expect(text, path).not.toContain('pa\\"ss');
    expect(text, path).not.toContain('w0rd');
    const body = JSON.parse(text) as { row?: Record<string, unknown>; rows?: Array<Record<string, unknown>> };
    const row = body.row ?? body.rows![0]!;
    expect(row.last_error, path).toBe("Access denied for user 'app' (using password: ***)");
    if (path.includes(String(id))) expect(JSON.stringify(row.payload), path).toContain('connect with ***');
  }
});
