import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, EnqueueError, StoreError } from './errors.js';
import { Queue } from './queue.js';
import type { CallerRunner, ExecResult, Statement } from './store.js';
import { SqlJsStore } from './test/sqljs-store.js';

// Core's part of enqueue, on the in-memory sql.js store: where ids come from, what the caller's transaction
// changes (no retry, no chunks) and what an error carries. Each adapter's own part runs against its real
// database in the conformance suite (cases/outbox.ts).

let open: SqlJsStore | null = null;
afterEach(async () => {
  await open?.close();
  open = null;
});

async function jobs(insertReturning: boolean): Promise<{ store: SqlJsStore; queue: Queue }> {
  const store = (open = await SqlJsStore.open(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, date INTEGER NOT NULL DEFAULT 0, status INTEGER, payload TEXT); CREATE TABLE plain (id INTEGER PRIMARY KEY, date INTEGER NOT NULL DEFAULT 0, status INTEGER, n INTEGER UNIQUE)`));
  Object.assign(store, { capabilities: { ...store.capabilities, insertReturning } });
  return { store, queue: await Queue.open(store, { table: 'jobs' }) };
}

const ids = (store: SqlJsStore, table = 'jobs') => store.rows(`SELECT id FROM ${table} ORDER BY id`).map((r) => r.id);

describe('enqueue ids', () => {
  it('with insertReturning, the ids RETURNING gave, in item order', async () => {
    const { store, queue } = await jobs(true);
    const seen: string[] = [];
    store.beforeRun = (statements) => seen.push(...statements.map((s) => s.sql));
    expect(await queue.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }])).toEqual([1, 2, 3]);
    expect(seen.every((sql) => sql.endsWith('RETURNING "id" AS id'))).toBe(true);
    expect(ids(store)).toEqual([1, 2, 3]);
  });

  it('without it: the id the item set, else the insertId the store reported, else null', async () => {
    const { store } = await jobs(false);
    const plain = await Queue.open(store, { table: 'plain' });
    expect(await plain.enqueue([{ id: 40, n: 1 }, { id: 7, n: 2 }])).toEqual([40, 7]);
    // A store that reports generated keys (as MySQL's does) for every INSERT after the first.
    const executeBatch = store.executeBatch.bind(store);
    store.executeBatch = async (statements: readonly Statement[]): Promise<ExecResult[]> => {
      const results = await executeBatch(statements);
      return results.map((r, i) => (i === 0 ? r : { ...r, insertId: Number(store.rows('SELECT last_insert_rowid() AS id')[0]!.id) }));
    };
    expect(await plain.enqueue([{ n: 3 }, { n: 4 }])).toEqual([null, 42]);
    expect(ids(store, 'plain')).toEqual([7, 40, 41, 42]);
    // An integer id the item gives as text or a bigint is the number a claim reads.
    expect(await plain.enqueue([{ id: '43', n: 5 }, { id: 44n, n: 6 }])).toEqual([43, 44]);
  });

  it('without it: a reported key is not the id when the id column is not the one the database numbers (it is another column\'s)', async () => {
    const { store } = await jobs(false);
    store.db.run(`CREATE TABLE keyed (id TEXT PRIMARY KEY DEFAULT (lower(hex(randomblob(8)))), date INTEGER NOT NULL DEFAULT 0, status INTEGER, n INTEGER)`);
    const keyed = await Queue.open(store, { table: 'keyed' });
    expect(keyed.idColumn.autoIncrement).toBe(false);
    const executeBatch = store.executeBatch.bind(store);
    // The rowid SQLite numbered, reported as MySQL reports its AUTO_INCREMENT key.
    store.executeBatch = async (statements: readonly Statement[]): Promise<ExecResult[]> =>
      (await executeBatch(statements)).map((r) => ({ ...r, insertId: Number(store.rows('SELECT last_insert_rowid() AS id')[0]!.id) }));
    expect(await keyed.enqueue([{ n: 1 }, { n: 2 }])).toEqual([null, null]);
    expect(await keyed.enqueue([{ id: 'mine', n: 3 }])).toEqual(['mine']);
  });

  it('a rejected chunk: the EnqueueError carries the ids of the chunks committed before it', async () => {
    const { store } = await jobs(true);
    const plain = await Queue.open(store, { table: 'plain' });
    const error = await plain.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 1 }], { chunk: 2 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnqueueError);
    expect({ committed: (error as EnqueueError).committed, ids: (error as EnqueueError).ids }).toEqual({ committed: 2, ids: [1, 2] });
  });
});

describe('enqueue in the caller transaction', () => {
  /** A runner on the store's own database, as an adapter's runnerFor would give for `handle`. */
  function withRunner(store: SqlJsStore, runner: (statement: Statement) => ExecResult, placeholder?: () => string): unknown[] {
    const handles: unknown[] = [];
    Object.assign(store, {
      runnerFor(handle: unknown): CallerRunner {
        handles.push(handle);
        return { placeholder, execute: async (statement) => runner(statement) };
      },
    });
    return handles;
  }

  it('runs the INSERTs on the runner for the handle, with its placeholder, never the store', async () => {
    const { store, queue } = await jobs(true);
    const sent: Statement[] = [];
    const handle = { mine: true };
    const handles = withRunner(
      store,
      (statement) => {
        sent.push(statement);
        return { rows: [{ id: 100 + sent.length }], affected: 1 };
      },
      () => ':p',
    );
    store.beforeRun = () => {
      throw new Error('the store must not run anything');
    };
    expect(await queue.enqueue([{ n: 1 }, { n: 2 }], { transaction: handle })).toEqual([101, 102]);
    expect(handles).toEqual([handle]);
    expect(sent.map((s) => s.sql)).toEqual(['INSERT INTO "jobs" ("payload") VALUES (:p) RETURNING "id" AS id', 'INSERT INTO "jobs" ("payload") VALUES (:p) RETURNING "id" AS id']);
  });

  it('a failure is not retried: an EnqueueError naming the item, nothing committed by statusq', async () => {
    const { store, queue } = await jobs(true);
    let calls = 0;
    withRunner(store, () => {
      calls++;
      if (calls === 2) throw new StoreError('Busy', 'locked', 'SQLITE_BUSY');
      return { rows: [{ id: calls }], affected: 1 };
    });
    const error = await queue.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }], { transaction: {} }).catch((e: unknown) => e);
    expect(calls).toBe(2);
    expect(error).toBeInstanceOf(EnqueueError);
    const e = error as EnqueueError;
    expect({ kind: e.kind, item: e.item, committed: e.committed, ids: e.ids }).toEqual({ kind: 'Busy', item: 1, committed: 0, ids: [] });
    expect(e.message).toBe('item 2 was rejected by the database; statusq committed nothing, roll the transaction back: locked');
  });

  it('a runner that finds no open transaction: its ConfigError before any INSERT, after every item is checked', async () => {
    const { store, queue } = await jobs(true);
    const steps: string[] = [];
    Object.assign(store, {
      runnerFor: (): CallerRunner => ({
        execute: async () => {
          steps.push('insert');
          return { rows: [{ id: 1 }], affected: 1 };
        },
        assertInTransaction: async () => {
          steps.push('check');
          throw new ConfigError('enqueue: no open transaction');
        },
      }),
    });
    await expect(queue.enqueue([{ n: 1 }], { transaction: {} })).rejects.toThrow(new ConfigError('enqueue: no open transaction'));
    expect(steps).toEqual(['check']);
    // A bad item is reported first: nothing about the connection is asked for a batch that cannot go in.
    await expect(queue.enqueue([{ n: 1 }, undefined], { transaction: {} })).rejects.toThrow(/item 2: payload is not JSON-serialisable/);
    expect(steps).toEqual(['check']);
  });

  it('is a ConfigError with chunk, and on a store without runnerFor', async () => {
    const { store, queue } = await jobs(true);
    await expect(queue.enqueue([{ n: 1 }], { transaction: {} })).rejects.toThrow(new ConfigError("enqueue: this sql.js store cannot run in the caller's transaction (its adapter has no runnerFor)"));
    withRunner(store, () => ({ rows: [], affected: 1 }));
    await expect(queue.enqueue([{ n: 1 }], { transaction: {}, chunk: 5 })).rejects.toBeInstanceOf(ConfigError);
    expect(ids(store)).toEqual([]);
  });
});
