import { skipFor } from '../skips.js';
import { describe, expect, it } from 'vitest';
import { ConfigError, EnqueueError, Queue, type JobId, type Store } from '@statusq/core';
import { placeholders, readRows, type TestEnv } from '../harness.js';
import type { ConformanceOptions, OpenCallerConnection } from '../options.js';
import { createCheckedTable, createJobs, createTableA } from '../tables.js';

/** The application's own table, written in the same transaction as the jobs. */
const ORDERS = 'orders';

async function createOrders(store: Store): Promise<void> {
  const q = (n: string) => store.dialect.quoteIdentifier(n);
  await store.execute({ sql: `CREATE TABLE ${q(ORDERS)} (${q('id')} INTEGER PRIMARY KEY, ${q('note')} VARCHAR(50) NOT NULL)`, params: [] });
}

function insertOrderSql(store: Store): string {
  const q = (n: string) => store.dialect.quoteIdentifier(n);
  return `INSERT INTO ${q(ORDERS)} (${q('id')}, ${q('note')}) VALUES (${placeholders(store, 2).join(', ')})`;
}

/** The payload of each row of `jobs`, by id key. */
async function payloadsById(store: Store): Promise<Map<string, unknown>> {
  return new Map((await readRows(store, 'jobs')).map((row) => [String(row.id), JSON.parse(String(row.payload)) as unknown]));
}

async function orderIds(store: Store): Promise<number[]> {
  return (await readRows(store, ORDERS)).map((row) => Number(row.id));
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  return undefined;
}

/** A table_a row an application enqueues, with its own id. */
function tableARow(id: number): Record<string, unknown> {
  return { id, date: '2024-01-01 00:00:00.000', url: `https://example.com/${id}`, kind: 'ok' };
}

/** knex opened with the adapter's configuration; destroyed after `body`. */
async function withKnex<T>(config: Record<string, unknown>, body: (db: KnexLike) => Promise<T>): Promise<T> {
  const { default: knex } = await import('knex');
  const db = knex(config) as unknown as KnexLike;
  try {
    return await body(db);
  } finally {
    await db.destroy();
  }
}

/** The little of knex these cases use (the suite takes its configuration as plain data). */
interface KnexLike {
  transaction<T>(body: (trx: KnexTrx) => Promise<T>): Promise<T>;
  destroy(): Promise<void>;
}
interface KnexTrx {
  (table: string): { insert(row: Record<string, unknown>): Promise<unknown> };
}

/**
 * Enqueue returns the ids of the rows it inserted, and writes them in the application's own transaction
 * when given one (the outbox pattern): with the adapter's raw driver and with knex, the jobs commit with
 * the application's write or not at all.
 */
export function outboxCases(env: () => TestEnv, options: ConformanceOptions): void {
  describe('enqueue ids and the caller transaction', () => {
    it('enqueue returns the new rows ids in item order, typed as claimed rows carry them; an item that sets the id gets that id', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const payloads = Array.from({ length: 6 }, (_, n) => ({ n }));
      const ids = await queue.enqueue(payloads);
      expect(ids).toHaveLength(6);
      const stored = await payloadsById(store);
      expect(stored.size).toBe(6);
      ids.forEach((id, i) => expect(stored.get(String(id)), `item ${i + 1}, id ${String(id)}`).toEqual(payloads[i]));
      const { rows } = await queue.claim({ limit: 6, token: 'ids' });
      // Same value and same JavaScript type as the claim reads the id column (number, bigint or string).
      expect([...rows.map((row) => row.id)].sort(byId)).toEqual([...ids].sort(byId));

      await createTableA(env().fixtures, store, []);
      const own = await Queue.open(store, { table: 'table_a' });
      expect(await own.enqueue([tableARow(17), tableARow(5)])).toEqual([17, 5]);

      // The database fills the id (an auto-increment key) of an application table: the ids it chose.
      await createCheckedTable(env().fixtures, store, 'bounded', 'bounded');
      const bounded = await Queue.open(store, { table: 'bounded' });
      const filled = await bounded.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }]);
      const boundedRows = await readRows(store, 'bounded');
      expect(filled.map(String)).toEqual(boundedRows.map((row) => String(row.id)));
      expect(boundedRows.map((row) => JSON.parse(String(row.payload)) as unknown)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
      await env().closeStores();
    });

    it('[needs callerConnections] with the raw driver: the jobs and the application write commit together, or roll back together', async (ctx) => {
      if (!options.callerConnections) skipFor(ctx, 'callerConnections');
      const store = await env().store();
      const queue = await createJobs(store);
      await createOrders(store);
      let orderId = 0;
      for (const kind of options.callerConnections!(env().url)) {
        const conn = await kind.open();
        try {
          const attempt = async (end: 'COMMIT' | 'ROLLBACK'): Promise<Array<JobId | null>> => {
            orderId++;
            await conn.run('BEGIN');
            await conn.run(insertOrderSql(store), [orderId, kind.label]);
            const ids = await queue.enqueue([{ order: orderId }, { order: orderId, step: 2 }], { transaction: conn.handle });
            expect(ids, kind.label).toHaveLength(2);
            // Inside the application's transaction: no other connection sees the jobs before it commits.
            expect([...(await payloadsById(store)).keys()], `${kind.label}: jobs seen before ${end}`).not.toContain(String(ids[0]));
            await conn.run(end);
            return ids;
          };
          const before = await payloadsById(store);
          const rolledBack = await attempt('ROLLBACK');
          expect([...(await payloadsById(store)).keys()], `${kind.label}: jobs after ROLLBACK`).toEqual([...before.keys()]);
          expect(await orderIds(store), `${kind.label}: orders after ROLLBACK`).not.toContain(orderId);
          expect(rolledBack.every((id) => id !== null)).toBe(true);

          const committed = await attempt('COMMIT');
          const after = await payloadsById(store);
          expect(committed.map((id) => after.get(String(id))), `${kind.label}: jobs after COMMIT`).toEqual([{ order: orderId }, { order: orderId, step: 2 }]);
          expect(await orderIds(store), `${kind.label}: orders after COMMIT`).toContain(orderId);
        } finally {
          await conn.close();
        }
      }
      await env().closeStores();
    });

    it('[needs knex] in a knex transaction: the jobs and the application write commit together, or roll back together', async (ctx) => {
      if (!options.knexConfig) skipFor(ctx, 'knex');
      const store = await env().store();
      const queue = await createJobs(store);
      await createOrders(store);
      await withKnex(options.knexConfig!(env().url), async (db) => {
        const failed = await rejection(
          db.transaction(async (trx) => {
            await trx(ORDERS).insert({ id: 1, note: 'rolled back' });
            expect(await queue.enqueue([{ order: 1 }], { transaction: trx })).toHaveLength(1);
            throw new Error('the application gives up');
          }),
        );
        expect((failed as Error).message).toBe('the application gives up');
        expect(await readRows(store, 'jobs')).toEqual([]);
        expect(await orderIds(store)).toEqual([]);

        const ids = await db.transaction(async (trx) => {
          await trx(ORDERS).insert({ id: 2, note: 'committed' });
          return queue.enqueue([{ order: 2 }, { order: 2, step: 2 }], { transaction: trx });
        });
        const stored = await payloadsById(store);
        expect(ids.map((id) => stored.get(String(id)))).toEqual([{ order: 2 }, { order: 2, step: 2 }]);
        expect(stored.size).toBe(2);
        expect(await orderIds(store)).toEqual([2]);
      });
      await env().closeStores();
    });

    it('[needs callerConnections] a row the database rejects inside the caller transaction is an EnqueueError naming it; the rollback leaves nothing', async (ctx) => {
      if (!options.callerConnections) skipFor(ctx, 'callerConnections');
      const store = await env().store();
      await createTableA(env().fixtures, store, []);
      await createOrders(store);
      const queue = await Queue.open(store, { table: 'table_a' });
      await queue.enqueue([tableARow(1)]);
      const expectRejected = (error: unknown, label: string) => {
        expect(error, label).toBeInstanceOf(EnqueueError);
        const e = error as EnqueueError;
        expect({ kind: e.kind, item: e.item, committed: e.committed, ids: e.ids }, label).toEqual({ kind: 'UniqueViolation', item: 1, committed: 0, ids: [] });
        expect(e.message, label).toMatch(/^item 2 was rejected by the database; statusq committed nothing, roll the transaction back: /);
      };
      const [kind] = options.callerConnections?.(env().url) ?? [];
      if (kind) {
        const conn: OpenCallerConnection = await kind.open();
        try {
          await conn.run('BEGIN');
          await conn.run(insertOrderSql(store), [1, kind.label]);
          expectRejected(await rejection(queue.enqueue([tableARow(2), tableARow(1)], { transaction: conn.handle })), kind.label);
          await conn.run('ROLLBACK');
        } finally {
          await conn.close();
        }
      }
      if (options.knexConfig) {
        await withKnex(options.knexConfig(env().url), async (db) => {
          const error = await rejection(
            db.transaction(async (trx) => {
              await trx(ORDERS).insert({ id: 1, note: 'knex' });
              await queue.enqueue([tableARow(2), tableARow(1)], { transaction: trx });
            }),
          );
          expectRejected(error, 'knex');
        });
      }
      expect((await readRows(store, 'table_a')).map((row) => Number(row.id))).toEqual([1]);
      expect(await orderIds(store)).toEqual([]);
      await env().closeStores();
    });

    it('the transaction option refuses what it cannot run in (not a transaction of this database, or with chunk) before writing anything', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      for (const handle of [{}, 'trx', null, () => undefined]) {
        const error = await rejection(queue.enqueue([{ n: 1 }], { transaction: handle }));
        expect(error, String(handle)).toBeInstanceOf(ConfigError);
        expect((error as Error).message).toMatch(/^enqueue: /);
      }
      expect(await rejection(queue.enqueue([{ n: 1 }], { transaction: {}, chunk: 10 }))).toBeInstanceOf(ConfigError);
      if (options.knexConfig) {
        // knex itself, not a transaction: each row would commit on its own.
        await withKnex(options.knexConfig(env().url), async (db) => {
          const error = await rejection(queue.enqueue([{ n: 1 }], { transaction: db }));
          expect(error).toBeInstanceOf(ConfigError);
          expect((error as Error).message).toMatch(/not a transaction/);
        });
      }
      expect(await readRows(store, 'jobs')).toEqual([]);
      await env().closeStores();
    });
  });
}

function byId(a: unknown, b: unknown): number {
  return String(a).localeCompare(String(b), 'en', { numeric: true });
}
