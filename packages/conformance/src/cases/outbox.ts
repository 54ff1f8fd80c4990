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

/** Enqueues an order's two jobs on `handle` and checks that no other connection sees them yet; their ids. */
type EnqueueInside = (queue: Queue, handle: unknown) => Promise<Array<JobId | null>>;

/**
 * The outbox promise on one way of holding a transaction. `transact(orderId, end, enqueue)` opens one of the
 * application's transactions, writes order `orderId` in it, calls `enqueue` with its handle, ends it with
 * `end` and returns the ids. After ROLLBACK neither the order nor its jobs are there; after COMMIT both are.
 * Uses the two order ids after `lastOrderId` and returns the last one used.
 */
async function expectCommitsTogether(
  store: Store,
  label: string,
  lastOrderId: number,
  transact: (orderId: number, end: 'COMMIT' | 'ROLLBACK', enqueue: EnqueueInside) => Promise<Array<JobId | null>>,
): Promise<number> {
  const attempt = (orderId: number, end: 'COMMIT' | 'ROLLBACK') =>
    transact(orderId, end, async (queue, handle) => {
      const ids = await queue.enqueue([{ order: orderId }, { order: orderId, step: 2 }], { transaction: handle });
      expect(ids, label).toHaveLength(2);
      expect(ids.every((id) => id !== null), `${label}: ids`).toBe(true);
      // Inside the application's transaction: no other connection sees the jobs before it ends.
      expect([...(await payloadsById(store)).keys()], `${label}: jobs seen before ${end}`).not.toContain(String(ids[0]));
      return ids;
    });
  const before = await payloadsById(store);
  const rolledBack = lastOrderId + 1;
  expect(await attempt(rolledBack, 'ROLLBACK'), `${label}: ids of the rolled-back jobs`).toHaveLength(2);
  expect([...(await payloadsById(store)).keys()], `${label}: jobs after ROLLBACK`).toEqual([...before.keys()]);
  expect(await orderIds(store), `${label}: orders after ROLLBACK`).not.toContain(rolledBack);

  const committed = lastOrderId + 2;
  const ids = await attempt(committed, 'COMMIT');
  const after = await payloadsById(store);
  expect(ids.map((id) => after.get(String(id))), `${label}: jobs after COMMIT`).toEqual([{ order: committed }, { order: committed, step: 2 }]);
  expect(after.size, `${label}: jobs after COMMIT`).toBe(before.size + 2);
  expect(await orderIds(store), `${label}: orders after COMMIT`).toContain(committed);
  return committed;
}

/** A table_a row an application enqueues, with its own id. */
function tableARow(id: number): Record<string, unknown> {
  return { id, date: '2024-01-01 00:00:00.000', url: `https://example.com/${id}`, kind: 'ok' };
}

/** knex opened with the adapter's configuration; destroyed after `body`. */
export async function withKnex<T>(config: Record<string, unknown>, body: (db: KnexLike) => Promise<T>): Promise<T> {
  const { default: knex } = await import('knex');
  const db = knex(config) as unknown as KnexLike;
  try {
    return await body(db);
  } finally {
    await db.destroy();
  }
}

/** The little of knex these cases use (the suite takes its configuration as plain data). */
export interface KnexLike {
  transaction<T>(body: (trx: KnexTrx) => Promise<T>): Promise<T>;
  destroy(): Promise<void>;
}
export interface KnexTrx {
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
      // An integer id given as text is the number the claim reads back.
      expect(await own.enqueue([{ ...tableARow(23), id: '23' }])).toEqual([23]);

      // The database fills the id (an auto-increment key) of an application table: the ids it chose.
      await createCheckedTable(env().fixtures, store, 'bounded', 'bounded');
      const bounded = await Queue.open(store, { table: 'bounded' });
      const filled = await bounded.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }]);
      const boundedRows = await readRows(store, 'bounded');
      expect(filled.map(String)).toEqual(boundedRows.map((row) => String(row.id)));
      expect(boundedRows.map((row) => JSON.parse(String(row.payload)) as unknown)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
      await env().closeStores();
    });

    it('an id the database fills from a default is that row\'s id, never the key of another column it numbers; null only where the database cannot say', async () => {
      const store = await env().store();
      await createCheckedTable(env().fixtures, store, 'defaultId', 'filled');
      const queue = await Queue.open(store, { table: 'filled' });
      const payloads = [{ n: 1 }, { n: 2 }, { n: 3 }];
      const plain = await queue.enqueue(payloads);
      const inTransaction: Array<JobId | null> = [];
      const [kind] = options.callerConnections?.(env().url) ?? [];
      if (kind) {
        const conn = await kind.open();
        try {
          await conn.run('BEGIN');
          inTransaction.push(...(await queue.enqueue([{ n: 4 }], { transaction: conn.handle })));
          await conn.run('COMMIT');
        } finally {
          await conn.close();
        }
      }
      const idOf = new Map((await readRows(store, 'filled')).map((row) => [JSON.stringify(JSON.parse(String(row.payload))), String(row.id)]));
      [...plain, ...inTransaction].forEach((id, i) => {
        const label = `item ${i + 1}: ${String(id)}`;
        // RETURNING says; a store without insertReturning reports only an auto-increment key, here seq's, which is no
        // id of these rows.
        if (store.capabilities.insertReturning) expect(String(id), label).toBe(idOf.get(JSON.stringify({ n: i + 1 })));
        else expect(id, label).toBeNull();
      });
      await env().closeStores();
    });

    it('[needs callerConnections] a driver connection outside a transaction is a ConfigError before anything is written, as is one whose transaction ended', async (ctx) => {
      if (!options.callerConnections) skipFor(ctx, 'callerConnections');
      const store = await env().store();
      const queue = await createJobs(store);
      for (const kind of options.callerConnections!(env().url)) {
        const conn = await kind.open();
        try {
          const refused = async (when: string) => {
            const error = await rejection(queue.enqueue([{ n: 1 }, { n: 2 }], { transaction: conn.handle }));
            expect(error, `${kind.label} ${when}`).toBeInstanceOf(ConfigError);
            expect((error as Error).message, `${kind.label} ${when}`).toMatch(/^enqueue: .*no open transaction.*BEGIN/);
          };
          await refused('before BEGIN');
          await conn.run('BEGIN');
          await conn.run('COMMIT');
          await refused('after COMMIT');
        } finally {
          await conn.close();
        }
      }
      expect(await readRows(store, 'jobs')).toEqual([]);
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
          orderId = await expectCommitsTogether(store, kind.label, orderId, async (id, end, enqueue) => {
            await conn.run('BEGIN');
            await conn.run(insertOrderSql(store), [id, kind.label]);
            const ids = await enqueue(queue, conn.handle);
            await conn.run(end);
            return ids;
          });
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
        const givingUp = new Error('the application gives up');
        await expectCommitsTogether(store, 'knex', 0, async (id, end, enqueue) => {
          let ids: Array<JobId | null> = [];
          const failed = await rejection(
            db.transaction(async (trx) => {
              await trx(ORDERS).insert({ id, note: 'knex' });
              ids = await enqueue(queue, trx);
              if (end === 'ROLLBACK') throw givingUp;
            }),
          );
          expect(failed, 'knex').toBe(end === 'ROLLBACK' ? givingUp : undefined);
          return ids;
        });
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
