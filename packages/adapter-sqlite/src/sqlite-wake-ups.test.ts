// Idle workers on SQLite are woken by a watch on the database file (SqliteWakeUps), not only by polling:
// another connection's or another process's commit ends their wait at once.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, expect, it } from 'vitest';
import { Queue, Worker, initTable } from '@statusq/core';
import { deferred, waitFor, withDeadline } from '@statusq/conformance';
import { SqliteStore } from './index.js';
import { MIN_WAIT_MS } from './sqlite-wake-ups.js';

const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..');
const never = new AbortController().signal;

let dir: string | null = null;
const stores: SqliteStore[] = [];
const workers: Worker[] = [];

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop(5_000)));
  await Promise.all(stores.splice(0).map((s) => s.close()));
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = null;
});

function open(filename?: string): SqliteStore {
  dir ??= mkdtempSync(join(tmpdir(), 'statusq-sqlite-wake-'));
  const store = new SqliteStore({ filename: filename ?? join(dir, 'q.db') });
  stores.push(store);
  return store;
}

/** How long `waiting` took to settle, in ms. */
async function timed(waiting: () => Promise<void>): Promise<number> {
  const started = performance.now();
  await waiting();
  return performance.now() - started;
}

it('waitForWork wakes on another connection\'s INSERT, no sooner than MIN_WAIT_MS, and not again until the file changes', async () => {
  const writer = open();
  await initTable(writer, 'jobs');
  const writerQueue = await Queue.open(writer, { table: 'jobs' });
  const waiter = open();
  expect(waiter.capabilities.listenNotify).toBe(true);

  // The first wait starts the watch and returns early: a row may have come in before it was up.
  expect(await timed(() => withDeadline(waiter.waitForWork(60_000, never), 10_000, 'the first wait'))).toBeGreaterThanOrEqual(MIN_WAIT_MS - 1);
  expect(waiter.watchingForWork).toBe(true);

  const woken = waiter.waitForWork(60_000, never);
  await writerQueue.enqueue([{ n: 1 }]);
  await withDeadline(woken, 10_000, 'waitForWork to wake on an INSERT (polling would take 60 s)');

  // Nothing changed since: a short wait runs to its timeout.
  expect(await timed(() => waiter.waitForWork(300, never))).toBeGreaterThanOrEqual(290);
});

it('an idle worker polling every 30 s picks up a row another process inserts, at once', async () => {
  const writer = open();
  await initTable(writer, 'jobs');
  const store = open();
  const handled = deferred<unknown>();
  const worker = await Worker.create({ store, table: { table: 'jobs' }, concurrency: 1, pollMinMs: 30_000, pollMaxMs: 30_000, handler: (job) => handled.resolve(job.payload) });
  workers.push(worker);
  const running = worker.run();
  await waitFor('the worker to watch the database file', () => store.watchingForWork);

  // A separate OS process, as a web process enqueueing beside a worker would be.
  const insert = `import Database from 'better-sqlite3'; const db = new Database(${JSON.stringify(join(dir!, 'q.db'))}); db.prepare('INSERT INTO jobs (payload) VALUES (?)').run('{"n":7}'); db.close();`;
  await promisify(execFile)(process.execPath, ['--input-type=module', '-e', insert], { cwd: PACKAGE_DIR, timeout: 10_000 });
  expect(await withDeadline(handled.promise, 10_000, 'the worker to be woken by the file watch (polling would take 30 s)')).toEqual({ n: 7 });
  await worker.stop(5_000);
  await running;
});

it('close ends a wait at once; a :memory: database has no wake-ups and is polled', async () => {
  const store = open();
  const waiting = store.waitForWork(60_000, never);
  await store.close();
  await withDeadline(waiting, 2_000, 'close to end the wait');

  const memory = open(':memory:');
  expect(memory.capabilities.listenNotify).toBe(false);
  expect(memory.waitForWork).toBeUndefined();
});
