import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, SchemaError, initTable, migrateTable, type Order, type Store } from '@statusq/core';
import { priorityIndexName, type ClaimStrategy } from '@statusq/core/adapter';
import { Params, TransitionSql } from '@statusq/core/adapter';
import { generateTableARows } from '@statusq/test-fixtures';
import { countsOf, readRows, type TestEnv } from '../harness.js';
import { raceToEmpty } from '../racing-workers.js';
import { skipFor } from '../skips.js';
import { createTableA, insertJobsAt, timeValue } from '../tables.js';

const MINUTE = 60_000;

/** A managed table with a priority column and its index, built for `order`. */
async function priorityJobs(store: Store, order: Order = 'newest', table = 'jobs'): Promise<Queue> {
  await initTable(store, table, { with: ['priority'], order });
  return Queue.open(store, { table, order });
}

/** Rows `id`, dated `agoMs` before now, with `priority`. */
async function insertRanked(queue: Queue, rows: ReadonlyArray<{ id: number; agoMs: number; priority: number }>): Promise<void> {
  const now = Date.now();
  await insertJobsAt(queue, rows.map((r) => ({ id: r.id, date: new Date(now - r.agoMs), payload: { id: r.id } })));
  const q = (n: string) => queue.store.dialect.quoteIdentifier(n);
  const ph = (i: number) => queue.store.dialect.placeholder(i);
  await queue.store.executeBatch(rows.map((r) => ({ sql: `UPDATE ${q(queue.table.table)} SET ${q('priority')} = ${ph(1)} WHERE ${q('id')} = ${ph(2)}`, params: [r.priority, r.id] })));
}

/** Ids in the order claims of `limit` rows at a time hand them out, until none is left. */
async function claimOrder(queue: Queue, strategy: ClaimStrategy, limit: number, agingMs?: number): Promise<number[]> {
  const order: number[] = [];
  for (let round = 0; round < 100; round++) {
    const { rows } = await queue.claim({ limit, token: `t${round}`, ...(agingMs !== undefined && { agingMs }) }, strategy);
    if (rows.length === 0) return order;
    order.push(...rows.map((r) => Number(r.id)));
  }
  throw new Error('claims did not drain the table in 100 rounds');
}

export function priorityCases(env: () => TestEnv): void {
  describe('priority (migrate --with priority, enqueue priority)', () => {
    // Ids 1-6: priorities and ages chosen so priority order, newest-first and oldest-first all differ.
    const ROWS = [
      { id: 1, agoMs: 5 * MINUTE, priority: 0 },
      { id: 2, agoMs: 4 * MINUTE, priority: 5 },
      { id: 3, agoMs: 3 * MINUTE, priority: 0 },
      { id: 4, agoMs: 2 * MINUTE, priority: 5 },
      { id: 5, agoMs: 1 * MINUTE, priority: -3 },
      { id: 6, agoMs: 6 * MINUTE, priority: 10 },
    ];

    for (const strategy of ['native', 'conditional-update'] as ClaimStrategy[]) {
      it(`${strategy}: higher priority first, then the queue order (newest or oldest first), in single claims and in batches`, async () => {
        const store = await env().store();
        const newest = await priorityJobs(store, 'newest', 'jobs_newest');
        await insertRanked(newest, ROWS);
        expect(await claimOrder(newest, strategy, 1)).toEqual([6, 4, 2, 3, 1, 5]);
        const oldest = await priorityJobs(store, 'oldest', 'jobs_oldest');
        await insertRanked(oldest, ROWS);
        expect(await claimOrder(oldest, strategy, 4)).toEqual([6, 2, 4, 1, 3, 5]);
        await env().closeStores();
      });
    }

    it('aging bounds a low priority\'s wait: a row older than agingMs is claimed before fresher rows of any priority, oldest first', async () => {
      const store = await env().store();
      for (const order of ['newest', 'oldest'] as const) {
        const queue = await priorityJobs(store, order, `aged_${order}`);
        await insertRanked(queue, [
          { id: 1, agoMs: 90 * MINUTE, priority: 0 },
          { id: 2, agoMs: 1 * MINUTE, priority: 9 },
          { id: 3, agoMs: 2 * MINUTE, priority: 9 },
          { id: 4, agoMs: 120 * MINUTE, priority: -1 },
        ]);
        // Without aging the old low-priority rows wait for every higher one.
        expect(await claimOrder(queue, 'native', 1), `${order}, no aging`).toEqual(order === 'newest' ? [2, 3, 1, 4] : [3, 2, 1, 4]);
        await store.execute({ sql: `UPDATE ${store.dialect.quoteIdentifier(`aged_${order}`)} SET ${store.dialect.quoteIdentifier('status')} = NULL`, params: [] });
        expect(await claimOrder(queue, 'native', 1, 60 * MINUTE), `${order}, agingMs 1h`).toEqual(order === 'newest' ? [4, 1, 2, 3] : [4, 1, 3, 2]);
      }
      await env().closeStores();
    });

    it('racing workers run every row exactly once, and higher priorities run first on the whole', { timeout: 60_000 }, async () => {
      const setup = await env().store('setup store');
      const queue = await priorityJobs(setup);
      const byPriority = new Map<string, number>();
      for (const priority of [0, 5, 10]) {
        const ids = await queue.enqueue(Array.from({ length: 150 }, (_, n) => ({ n, priority })), { priority });
        for (const id of ids) byPriority.set(String(id), priority);
      }
      const { ledger, workers } = await raceToEmpty(env(), { workers: 4, concurrency: 4, deadlineMs: 45_000, what: 'the workers to run every row' });
      expect(ledger.notExactlyOnce(byPriority.keys())).toEqual([]);
      expect(await countsOf(setup, 'jobs')).toMatchObject({ pending: 0, processing: 0, done: 450 });
      const meanPosition = (priority: number) => {
        const positions = ledger.order.flatMap((entry, index) => (byPriority.get(entry.id) === priority ? [index] : []));
        return positions.reduce((a, b) => a + b, 0) / positions.length;
      };
      expect(meanPosition(10)).toBeLessThan(meanPosition(5));
      expect(meanPosition(5)).toBeLessThan(meanPosition(0));
      // Claims hand rows out by priority: the last row of priority 10 ran before the last quarter of the run.
      const lastTen = Math.max(...ledger.order.flatMap((entry, index) => (byPriority.get(entry.id) === 10 ? [index] : [])));
      expect(lastTen).toBeLessThan(ledger.order.length * 0.75);
      for (const w of workers) expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('migrate --with priority on table_a: the column (default 0) and its index; enqueue sets it; bad priorities and a table without the column write nothing', async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, generateTableARows(3));
      const plain = await Queue.open(store, { table: 'table_a' });
      const row = (id: number) => ({ id, date: timeValue(plain, new Date()), url: `https://example.com/${id}`, kind: 'x' });
      await expect(plain.enqueue([row(100)], { priority: 3 })).rejects.toThrow(new SchemaError('table table_a has no priority column, which a job\'s priority needs (statusq migrate --with priority adds it)'));
      const report = await migrateTable(store, { table: 'table_a', with: ['priority'] });
      expect(report.addedColumns).toEqual(['priority']);
      expect(report.createdPriorityIndex).toBe(priorityIndexName('table_a'));
      expect((await migrateTable(store, { table: 'table_a', with: ['priority'] })).createdPriorityIndex).toBeNull();
      const queue = await Queue.open(store, { table: 'table_a' });
      expect(queue.table.features.priority).toBe(true);
      for (const [bad, message] of [
        [1.5, /priority must be an integer from -2147483648 to 2147483647, got 1.5/],
        [2 ** 31, /got 2147483648/],
        ['3', /got "3"/],
      ] as Array<[unknown, RegExp]>) {
        await expect(queue.enqueue([row(100)], { priority: bad as number })).rejects.toThrow(ConfigError);
        await expect(queue.enqueue([row(100)], { priority: bad as number })).rejects.toThrow(message);
      }
      await expect(queue.enqueue([{ ...row(100), priority: 1 }], { priority: 2 })).rejects.toThrow(/sets priority itself, and enqueue's options set it too/);
      expect((await readRows(store, 'table_a')).map((r) => [Number(r.id), Number(r.priority)])).toEqual([[1, 0], [2, 0], [3, 0]]);
      await queue.enqueue([row(100)], { priority: 7 });
      await queue.enqueue([{ ...row(101), priority: -2 }]);
      expect((await readRows(store, 'table_a')).map((r) => [Number(r.id), Number(r.priority)])).toEqual([[1, 0], [2, 0], [3, 0], [100, 7], [101, -2]]);
      expect((await queue.claim({ limit: 1, token: null })).rows.map((r) => Number(r.id))).toEqual([100]);

      // An application's own `priority` that is text is not statusq's: ignored by workers, refused by migrate --with priority.
      const q = (n: string) => store.dialect.quoteIdentifier(n);
      await store.execute({ sql: `CREATE TABLE ${q('texty')} (${q('id')} INTEGER PRIMARY KEY, ${q('date')} VARCHAR(32) NOT NULL, ${q('status')} INTEGER, ${q('priority')} VARCHAR(10))`, params: [] });
      expect((await Queue.open(store, { table: 'texty' })).table.features.priority).toBe(false);
      await expect(migrateTable(store, { table: 'texty', with: ['priority'] })).rejects.toThrow(/has a column "priority" of type .*; a priority column holds integers/);
      await env().closeStores();
    });

    it('[needs queryPlans] with many finished rows and mixed priorities the claim reads the priority index, bounded by the status, without a sort, in the order it was built for', async (ctx) => {
      const plans = env().options.queryPlans;
      if (!plans) return skipFor(ctx, 'queryPlans');
      const store = await env().store();
      for (const order of ['newest', 'oldest'] as const) {
        const table = `ranked_${order}`;
        const queue = await priorityJobs(store, order, table);
        // In chunks: one call of 5,000 INSERTs shares one queryTimeout, which one adapter's server ran past on a loaded CI machine.
        const ids = await queue.enqueue(Array.from({ length: 5000 }, (_, n) => ({ n })), { chunk: 500 });
        const q = (n: string) => store.dialect.quoteIdentifier(n);
        await store.execute({ sql: `UPDATE ${q(table)} SET ${q('priority')} = ${q('id')} % 10, ${q('status')} = CASE WHEN ${q('id')} > 40 THEN 1 ELSE NULL END`, params: [] });
        expect(ids).toHaveLength(5000);
        await plans.analyze(store, table);
        const sql = new TransitionSql(queue.table, store.dialect);
        for (const columns of ['id', 'row'] as const) {
          const p = new Params(store.dialect);
          const plan = await plans.explain(store, { sql: sql.candidates(p, { limit: 50, columns }), params: p.values }, { statusColumn: queue.table.status, asIfLarge: true });
          const label = `${order} ${columns}: ${plan.text}`;
          expect(plan.index, label).toBe(priorityIndexName(table));
          expect(plan.bounded, label).toBe(true);
          expect(plan.sorts, label).toBe(false);
        }
      }
      await env().closeStores();
    });
  });
}
