// SqliteStore.transaction on its single connection: the gate keeps the store's other calls out of an open
// transaction, which the conformance suite (whose aging claims run one worker at a time) does not reach.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { StoreError, Worker, migrateTable } from '@statusq/core';
import Database from 'better-sqlite3';
import { SqliteStore } from './index.js';
import { toStoreError } from './sqlite-errors.js';

let dir: string | null = null;
let store: SqliteStore | null = null;

afterEach(async () => {
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  store = null;
  dir = null;
});

async function withRows(): Promise<SqliteStore> {
  dir = mkdtempSync(join(tmpdir(), 'statusq-sqlite-tx-'));
  store = new SqliteStore({ filename: join(dir, 'q.db') });
  await store.execute({ sql: 'CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER)', params: [] });
  await store.executeBatch([1, 2, 3].map((id) => ({ sql: 'INSERT INTO t (id, v) VALUES (?, 0)', params: [id] })));
  return store;
}

const values = async (s: SqliteStore) => (await s.execute({ sql: 'SELECT v FROM t ORDER BY id', params: [] })).rows.map((r) => r.v);

it('calls made while a transaction awaits between its statements wait for it, so its rollback does not take them along', async () => {
  const s = await withRows();
  let inside!: () => void;
  const begun = new Promise<void>((resolve) => (inside = resolve));
  const failing = s.transaction(async (tx) => {
    await tx.execute({ sql: 'UPDATE t SET v = 1 WHERE id = 1', params: [] });
    inside();
    await new Promise((resolve) => setTimeout(resolve, 20));
    throw new StoreError('WriteConflict', 'simulated');
  });
  await begun;
  const single = s.execute({ sql: 'UPDATE t SET v = 2 WHERE id = 2', params: [] });
  const batch = s.executeBatch([{ sql: 'UPDATE t SET v = 3 WHERE id = 3', params: [] }]);
  await expect(failing).rejects.toMatchObject({ kind: 'WriteConflict' });
  expect((await single).affected).toBe(1);
  expect((await batch)[0]!.affected).toBe(1);
  expect(await values(s)).toEqual([0, 2, 3]);
});

it('transactions take turns: each commits whole, one after the other', async () => {
  const s = await withRows();
  const order: string[] = [];
  const bump = (name: string) =>
    s.transaction(async (tx) => {
      order.push(`${name} begins`);
      const { rows } = await tx.execute({ sql: 'SELECT v FROM t WHERE id = 1', params: [] });
      await new Promise((resolve) => setTimeout(resolve, 5));
      await tx.execute({ sql: 'UPDATE t SET v = ? WHERE id = 1', params: [Number(rows[0]!.v) + 1] });
      order.push(`${name} ends`);
    });
  await Promise.all([bump('a'), bump('b'), bump('c')]);
  expect(order).toEqual(['a begins', 'a ends', 'b begins', 'b ends', 'c begins', 'c ends']);
  expect(await values(s)).toEqual([3, 0, 0]);
});

it('a write refused by a read-only database is StoreError ReadOnly (what the worker waits out), with the native code kept', async () => {
  const s = await withRows();
  await s.close();
  store = null;
  // A connection that may not write: what a file without write permission, or one opened read-only, gives.
  const db = new Database(join(dir!, 'q.db'), { readonly: true });
  try {
    let native: unknown = null;
    try {
      db.prepare('UPDATE t SET v = 1 WHERE id = 1').run();
    } catch (error) {
      native = error;
    }
    expect((native as { code?: string }).code).toMatch(/^SQLITE_READONLY/);
    const mapped = toStoreError(native);
    expect(mapped).toBeInstanceOf(StoreError);
    expect(mapped).toMatchObject({ kind: 'ReadOnly', nativeCode: (native as { code: string }).code });
    expect((mapped as StoreError).message).toMatch(/SQLite database is read-only/);
    expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 3 });
  } finally {
    db.close();
  }
});

it('rows read in raw mode are the objects the driver would build: same keys in order, same values, also with columns named constructor or like code; a __proto__ column is an own property the driver drops', async () => {
  const s = await withRows();
  await s.execute({ sql: 'CREATE TABLE odd (id INTEGER PRIMARY KEY, "__proto__" TEXT, "constructor" TEXT, n INTEGER, b BLOB, r REAL)', params: [] });
  await s.execute({ sql: "INSERT INTO odd VALUES (1, ?, ?, ?, X'0102', ?)", params: ['p', 'c', 2 ** 40, 1.5] });
  // Row objects are built by a function generated from the column names (sqlite-statements.ts rowBuilder).
  await s.execute({ sql: 'CREATE TABLE code (id INTEGER PRIMARY KEY, "a""b" TEXT, "x\\y" TEXT, "}; throw 1; //" TEXT, "line\nbreak" TEXT, "\u2028" TEXT, "7" TEXT, "" TEXT)', params: [] });
  await s.execute({ sql: 'INSERT INTO code VALUES (1, ?, ?, ?, ?, ?, ?, ?)', params: ['q', 'b', 'c', 'n', 's', 'i', 'e'] });
  const db = new Database(join(dir!, 'q.db'), { readonly: true });
  try {
    for (const sql of ['SELECT * FROM t ORDER BY id', 'SELECT v, id, v AS again FROM t ORDER BY id', 'SELECT id, "constructor", n, b, r FROM odd', 'SELECT id, n, b, r FROM odd', 'SELECT * FROM code', 'UPDATE t SET v = v + 1 RETURNING *']) {
      const ours = (await s.execute({ sql, params: [] })).rows;
      const theirs = sql.startsWith('UPDATE') ? ours.map((r) => ({ ...r })) : (db.prepare(sql).all() as Record<string, unknown>[]);
      expect(ours, sql).toEqual(theirs);
      expect(ours.map((r) => Object.keys(r)), sql).toEqual(theirs.map((r) => Object.keys(r)));
    }
    // better-sqlite3's own row loses the column (its "__proto__" key sets the prototype, to nothing as the
    // value is a string); statusq's keeps it as an own property, the prototype untouched.
    const [odd] = (await s.execute({ sql: 'SELECT * FROM odd', params: [] })).rows;
    expect(Object.getPrototypeOf(odd)).toBe(Object.prototype);
    expect(Object.keys(odd!)).toEqual(['id', '__proto__', 'constructor', 'n', 'b', 'r']);
    expect(Object.getOwnPropertyDescriptor(odd, '__proto__')?.value).toBe('p');
    expect(odd).toMatchObject({ id: 1, constructor: 'c', n: 2 ** 40, r: 1.5 });
    const [code] = (await s.execute({ sql: 'SELECT * FROM code', params: [] })).rows;
    expect(code).toEqual({ id: 1, 'a"b': 'q', 'x\\y': 'b', '}; throw 1; //': 'c', 'line\nbreak': 'n', '\u2028': 's', '7': 'i', '': 'e' });
  } finally {
    db.close();
  }
  expect((await s.execute({ sql: 'SELECT v FROM t ORDER BY id', params: [] })).rows).toEqual([{ v: 1 }, { v: 1 }, { v: 1 }]);
});

it('a cached SELECT * follows the table through ALTER TABLE: added, renamed and dropped columns, also when another connection changed it', async () => {
  const s = await withRows();
  const read = async () => (await s.execute({ sql: 'SELECT * FROM t ORDER BY id LIMIT 1', params: [] })).rows[0];
  expect(await read()).toEqual({ id: 1, v: 0 });
  await s.execute({ sql: 'ALTER TABLE t ADD COLUMN extra TEXT', params: [] });
  expect(await read()).toEqual({ id: 1, v: 0, extra: null });
  await s.execute({ sql: 'ALTER TABLE t RENAME COLUMN extra TO other', params: [] });
  expect(await read()).toEqual({ id: 1, v: 0, other: null });
  const db = new Database(join(dir!, 'q.db'));
  try {
    db.exec('ALTER TABLE t RENAME COLUMN other TO third');
    expect(await read()).toEqual({ id: 1, v: 0, third: null });
    db.exec('ALTER TABLE t DROP COLUMN third');
  } finally {
    db.close();
  }
  expect(await read()).toEqual({ id: 1, v: 0 });
  await s.execute({ sql: 'ALTER TABLE t ADD COLUMN "__proto__" TEXT', params: [] });
  const withProto = await read();
  expect(Object.getPrototypeOf(withProto)).toBe(Object.prototype);
  expect(Object.keys(withProto!)).toEqual(['id', 'v', '__proto__']);
});

it('a generated column is one of the table\'s columns (a group column computed from a URL), and a serial group holds on it', async () => {
  dir = mkdtempSync(join(tmpdir(), 'statusq-sqlite-generated-'));
  store = new SqliteStore({ filename: join(dir, 'q.db') });
  await store.execute({ sql: "CREATE TABLE pages (id INTEGER PRIMARY KEY, date TEXT NOT NULL, url TEXT NOT NULL, status INTEGER, host TEXT GENERATED ALWAYS AS (substr(url, 9, instr(substr(url, 9), '/') - 1)) STORED)", params: [] });
  expect((await store.describeTable('pages'))?.map((column) => column.name)).toEqual(['id', 'date', 'url', 'status', 'host']);
  await migrateTable(store, { table: 'pages', with: ['groups'], groupColumn: 'host' });
  for (const [id, url] of [[1, 'https://a.test/1'], [2, 'https://a.test/2'], [3, 'https://b.test/1']] as const) {
    await store.execute({ sql: 'INSERT INTO pages (id, date, url) VALUES (?, ?, ?)', params: [id, `2026-01-01 00:00:0${id}`, url] });
  }
  const worker = await Worker.create({ store, table: { table: 'pages', order: 'oldest', columns: { group: 'host' } }, concurrency: 3, groupConcurrency: 1, exitWhenEmpty: true, pollMaxMs: 20, handler: async () => undefined });
  const claimed: string[] = [];
  worker.on('claimed', ({ jobs }) => claimed.push(jobs.map((job) => String(job.id)).join(',')));
  await worker.run();
  // The first claim takes one row of each host; a.test's second waits for its first to finish.
  expect(claimed[0]).toBe('1,3');
  expect((await store.execute({ sql: 'SELECT COUNT(*) AS n FROM pages WHERE status = 1', params: [] })).rows[0]?.n).toBe(3);
});
