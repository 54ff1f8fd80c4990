import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, EnqueueError, SchemaError, StoreError } from '../protocol/errors.js';
import { Queue } from './queue.js';
import { parseRunAt } from './row-values.js';
import type { CallerRunner, ExecResult, Statement } from '../store/store.js';
import { SqlJsStore } from '../test/sqljs-store.js';

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

describe('delayed enqueue', () => {
  it('parseRunAt: zoned ISO 8601 naming a real day and time, or a valid Date; the instant in ms since the epoch', () => {
    expect(parseRunAt('2026-12-01T10:00:00Z')).toBe(Date.UTC(2026, 11, 1, 10));
    expect(parseRunAt('2026-12-01 10:00+01:00')).toBe(Date.UTC(2026, 11, 1, 9));
    expect(parseRunAt('2028-02-29T23:59:59.999-0130')).toBe(Date.UTC(2028, 2, 1, 1, 29, 59, 999));
    expect(parseRunAt(new Date(5))).toBe(5);
    for (const bad of ['2026-02-31T10:00:00Z', '2027-02-29T10:00:00Z', '2026-12-01T24:00:00Z', '2026-12-01T10:60:00Z', '2026-12-01T10:00:00+25:00', '2026-12-01', '2026-12-01T10:00:00', 'soon', '']) {
      expect(() => parseRunAt(bad, '--run-at'), bad).toThrow(new ConfigError(`--run-at must be a date and time with a zone, such as 2026-12-01T10:00:00Z, got ${JSON.stringify(bad)}`));
    }
    expect(() => parseRunAt('1969-12-31T23:59:59Z')).toThrow('runAt must lie between 1970 and the year 9999, got 1969-12-31T23:59:59.000Z');
  });

  it('writes next_attempt_at from the database clock (nowPlusMs), or the instant runAt names (atEpochMs), in the caller transaction too', async () => {
    const store = (open = await SqlJsStore.open(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, date INTEGER NOT NULL DEFAULT 0, status INTEGER, payload TEXT, next_attempt_at INTEGER)`));
    const queue = await Queue.open(store, { table: 'jobs' });
    const seen: Statement[] = [];
    store.beforeRun = (statements) => seen.push(...statements);
    await queue.enqueue([{ n: 1 }], { delayMs: 30_000 });
    expect(seen[0]!.sql).toMatch(/^INSERT INTO "jobs" \("payload", "next_attempt_at"\) VALUES \(\?, \(CAST\(\(julianday\('now'\).*\+ \?\)\)/);
    expect(seen[0]!.params).toEqual(['{"n":1}', 30_000]);
    await queue.enqueue([{ n: 2 }], { runAt: '2030-01-02T03:04:05.678+01:00' });
    expect(seen[1]!.sql).toContain('"next_attempt_at") VALUES (?, CAST(? AS INTEGER))');
    expect(seen[1]!.params).toEqual(['{"n":2}', Date.UTC(2030, 0, 2, 2, 4, 5, 678)]);
    const [at] = store.rows('SELECT next_attempt_at AS at FROM jobs WHERE id = 2').map((r) => Number(r.at));
    expect(at).toBe(Date.UTC(2030, 0, 2, 2, 4, 5, 678));

    const inserts: Statement[] = [];
    Object.assign(store, {
      runnerFor: (): CallerRunner => ({
        execute: async (statement) => {
          inserts.push(statement);
          return { rows: [{ id: 9 }], affected: 1 };
        },
      }),
    });
    await queue.enqueue([{ n: 3 }], { transaction: {}, delayMs: 5 });
    expect(inserts[0]!.sql).toContain('"next_attempt_at"');
    expect(inserts[0]!.params).toEqual(['{"n":3}', 5]);
  });

  it('on a table without next_attempt_at: a SchemaError naming the group that adds it, before anything is written', async () => {
    const { store, queue } = await jobs(true);
    await expect(queue.enqueue([{ n: 1 }], { delayMs: 1000 })).rejects.toThrow(new SchemaError('table jobs has no next_attempt_at column, which a delayed job needs (statusq migrate --with delays adds it)'));
    expect(ids(store)).toEqual([]);
  });

  it('refuses items that are not an array, and options that are not an object', async () => {
    const { queue } = await jobs(true);
    await expect(queue.enqueue({ n: 1 } as unknown as unknown[])).rejects.toThrow(new ConfigError('enqueue takes an array of items, got object'));
    await expect(queue.enqueue([{ n: 1 }], null as unknown as undefined)).rejects.toThrow(new ConfigError('enqueue options must be an object'));
  });
});

describe('enqueue payloads JSON cannot write', () => {
  it('refuses a payload nested past JSON.stringify\'s stack, a cycle and a BigInt with a ConfigError naming the item, inserting nothing', async () => {
    const { store, queue } = await jobs(true);
    // What JSON.parse accepts from one line of an NDJSON file, and JSON.stringify cannot write back.
    const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`) as unknown;
    const cyclic: Record<string, unknown> = { n: 1 };
    cyclic.self = cyclic;
    await expect(queue.enqueue([{ n: 1 }, deep])).rejects.toThrow(new ConfigError('item 2: the payload is nested too deeply to store as JSON'));
    await expect(queue.enqueue([cyclic])).rejects.toThrow(/^item 1: the payload is not JSON-serialisable: Converting circular structure to JSON/);
    await expect(queue.enqueue([{ n: 10n }])).rejects.toBeInstanceOf(ConfigError);
    expect(ids(store)).toEqual([]);
  });

  it('refuses a column value nested too deeply the same way on a table without a payload column', async () => {
    const { store } = await jobs(true);
    const plain = await Queue.open(store, { table: 'plain' });
    const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`) as unknown;
    await expect(plain.enqueue([{ n: deep }])).rejects.toThrow(new ConfigError('item 1: column n is nested too deeply to store as JSON'));
    expect(ids(store, 'plain')).toEqual([]);
  });
});

describe('enqueue deduplication keys', () => {
  it('counts a key in characters as the databases do: 255 emoji fit, 256 do not', async () => {
    const store = (open = await SqlJsStore.open('CREATE TABLE keyed (id INTEGER PRIMARY KEY, date INTEGER NOT NULL DEFAULT 0, status INTEGER, payload TEXT, dedupe_key TEXT)'));
    const queue = await Queue.open(store, { table: 'keyed' });
    const emoji = '\u{1F600}';
    expect(emoji.length).toBe(2);
    expect(await queue.enqueue([{ n: 1 }], { key: emoji.repeat(255) })).toHaveLength(1);
    await expect(queue.enqueue([{ n: 2 }], { key: emoji.repeat(256) })).rejects.toThrow(/^enqueue: the key option: a deduplication key is 1 to 255 characters without surrounding whitespace/);
    // A key function's bad key names its item.
    await expect(queue.enqueue([{ n: 3 }, { n: 4 }], { key: (item) => ((item as { n: number }).n === 4 ? ' k' : 'k3'), describeKey: '--key' })).rejects.toThrow(/^item 2: --key: a deduplication key is 1 to 255/);
    expect(store.rows('SELECT COUNT(*) AS n FROM keyed')[0]!.n).toBe(1);
  });
});
