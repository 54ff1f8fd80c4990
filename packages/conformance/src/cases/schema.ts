import { skipFor } from '../skips.js';
import { describe, expect, it } from 'vitest';
import { Queue, initTable, migrateTable, type Store } from '@statusq/core';
import { pendingIndexName } from '@statusq/core/adapter';
import { Params, TransitionSql, type Statement } from '@statusq/core/adapter';
import { generateTableARows } from '@statusq/test-fixtures';
import { FAST, readRow, readRows, statusOf, withDeadline, type TestEnv } from '../harness.js';
import type { QueryPlans } from '../fixtures.js';
import { createTableA, createJobs, enqueueJobs } from '../tables.js';

const ALL_GROUPS = ['leases', 'retries', 'results'] as const;
const OPTIONAL = ['claimed_at', 'worker_id', 'attempt_count', 'next_attempt_at', 'last_error', 'result', 'finished_at'];

/** The candidate SELECTs a claim runs: newest first, oldest first, and aged, for ids and for whole rows. */
function candidateSelects(queue: Queue, store: Store): Array<Statement & { label: string }> {
  const out: Array<Statement & { label: string }> = [];
  for (const order of ['newest', 'oldest'] as const) {
    const table = { ...queue.table, direction: order };
    const sql = new TransitionSql(table, store.dialect);
    for (const columns of ['id', 'row'] as const) {
      const p = new Params(store.dialect);
      out.push({ label: `${order} ${columns}`, sql: sql.candidates(p, { limit: 50, columns }), params: p.values });
    }
    const p = new Params(store.dialect);
    out.push({ label: `${order} aged`, sql: sql.candidates(p, { limit: 50, columns: 'id', agedMs: 3_600_000 }), params: p.values });
  }
  return out;
}

/**
 * Marks all but the first `pending` rows of `table` done and refreshes the planner's statistics, so that
 * the pending rows are a few among many finished ones, as an application table keeps them.
 */
async function finishAllBut(plans: QueryPlans, store: Store, table: string, pending: number): Promise<void> {
  const q = (n: string) => store.dialect.quoteIdentifier(n);
  await store.execute({ sql: `UPDATE ${q(table)} SET ${q('status')} = 1 WHERE ${q('id')} > ${store.dialect.placeholder(1)}`, params: [pending] });
  await plans.analyze(store, table);
}

/** Every candidate SELECT on `queue` reads the table through `index`, bounded by the status column, and needs no sort afterwards. */
async function expectServedBy(plans: QueryPlans, store: Store, queue: Queue, index: string, what: string): Promise<void> {
  for (const statement of candidateSelects(queue, store)) {
    const plan = await plans.explain(store, statement, { statusColumn: queue.table.status });
    const label = `${what}, ${statement.label}: ${plan.text}`;
    expect(plan.index, label).toBe(index);
    // An index walked whole (an order-column index) would read every finished row: `statusq doctor` fails that.
    expect(plan.bounded, label).toBe(true);
    expect(plan.sorts, label).toBe(false);
  }
}

export function schemaCases(env: () => TestEnv): void {
  describe('schema helpers', () => {
    it('migrateTable on table_a adds the optional columns and the pending index, leaves data untouched, and reports nothing the second time', async () => {
      const store = await env().store();
      const rows = generateTableARows(30);
      await createTableA(env().fixtures, store, rows);
      const q = (n: string) => store.dialect.quoteIdentifier(n);
      await store.execute({ sql: `UPDATE ${q('table_a')} SET ${q('status')} = 1 WHERE ${q('id')} <= 10`, params: [] });
      const before = await readRows(store, 'table_a');

      const first = await migrateTable(store, { table: 'table_a', with: [...ALL_GROUPS] });
      expect(first.addedStatus).toBe(false);
      expect([...first.addedColumns].sort()).toEqual([...OPTIONAL].sort());
      expect(first.createdIndex).toBe(pendingIndexName('table_a'));
      const columns = (await store.describeTable('table_a'))!.map((c) => c.name);
      for (const c of OPTIONAL) expect(columns).toContain(c);

      const after = await readRows(store, 'table_a');
      expect(after).toHaveLength(before.length);
      after.forEach((row, i) => {
        const old = before[i]!;
        for (const key of Object.keys(old)) expect(row[key], `${key} of row ${String(old.id)}`).toEqual(old[key]);
        for (const c of OPTIONAL) {
          if (c === 'attempt_count') expect(Number(row[c])).toBe(0);
          else expect(row[c]).toBeNull();
        }
      });

      const second = await migrateTable(store, { table: 'table_a', with: [...ALL_GROUPS] });
      expect(second).toEqual({ table: 'table_a', addedColumns: [], createdIndex: null, createdPriorityIndex: null, createdKeyIndex: null, createdDispatchIndex: null, createdKindIndex: null, createdGroupIndex: null, addedStatus: false, beside: null });
      const queue = await Queue.open(store, { table: 'table_a' });
      // The fixtures' table_a has a text column `kind` of its own (ok, poison, ...): by its name, the kind column.
      expect(queue.table.features).toEqual({ leases: true, fencing: true, retries: true, backoff: true, errorHistory: true, priority: false, dedupe: false, progress: false, dispatch: false, kinds: true, groups: false, tracing: false });
      await env().closeStores();
    });

    it('migrateTable adds a missing status column: every existing row becomes pending', async () => {
      const store = await env().store();
      const q = (n: string) => store.dialect.quoteIdentifier(n);
      await store.execute({ sql: `CREATE TABLE ${q('legacy')} (${q('id')} INTEGER PRIMARY KEY, ${q('date')} VARCHAR(32) NOT NULL)`, params: [] });
      const ph = (i: number) => store.dialect.placeholder(i);
      await store.executeBatch(
        [1, 2, 3].map((id) => ({ sql: `INSERT INTO ${q('legacy')} (${q('id')}, ${q('date')}) VALUES (${ph(1)}, ${ph(2)})`, params: [id, `2024-01-0${id} 00:00:00.000`] })),
      );
      const report = await migrateTable(store, { table: 'legacy' });
      expect(report.addedStatus).toBe(true);
      expect(report.addedColumns).toEqual(['status']);
      const rows = await readRows(store, 'legacy');
      expect(rows.map((r) => statusOf(r))).toEqual([null, null, null]);
      expect((await Queue.open(store, { table: 'legacy' })).table.features.leases).toBe(false);
      await env().closeStores();
    });

    it('initTable creates a managed table with every optional column; a second run is a no-op', async () => {
      const store = await env().store();
      const first = await initTable(store, 'jobs');
      expect(first).toEqual({ table: 'jobs', created: true, migrated: null });
      const columns = (await store.describeTable('jobs'))!.map((c) => c.name);
      for (const c of ['id', 'date', 'status', 'payload', ...OPTIONAL]) expect(columns).toContain(c);
      const second = await initTable(store, 'jobs');
      expect(second.created).toBe(false);
      expect(second.migrated).toEqual({ table: 'jobs', addedColumns: [], createdIndex: null, createdPriorityIndex: null, createdKeyIndex: null, createdDispatchIndex: null, createdKindIndex: null, createdGroupIndex: null, addedStatus: false, beside: null });
      expect((await store.describeTable('jobs'))!.map((c) => c.name)).toEqual(columns);
      await env().closeStores();
    });

    it('a managed table holds a 100 KB payload and a 100 KB result (a long text type, not one of 64 KB)', async () => {
      const store = await env().store();
      const jobs = await createJobs(store);
      // Two UTF-8 bytes a character: 120,000 bytes of text each way.
      const big = 'ü'.repeat(60_000);
      const [id] = await enqueueJobs(jobs, [{ big }]);
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job) => ({ echo: (job.payload as { big: string }).big }),
      });
      await withDeadline(w.done, 30_000, 'the worker to finish the big job');
      const row = await readRow(store, 'jobs', id);
      expect(statusOf(row)).toBe(1);
      expect(JSON.parse(String(row.result))).toEqual({ echo: big });
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('[needs queryPlans] with many finished rows every candidate SELECT (both orders, aged, ids and whole rows) reads the pending index and needs no sort, on a managed table and on table_a once migrated', async (ctx) => {
      const plans = env().options.queryPlans;
      if (!plans) return skipFor(ctx, 'queryPlans');
      const store = await env().store();
      const jobs = await createJobs(store);
      await jobs.enqueue(Array.from({ length: 5000 }, (_, n) => ({ n })));
      await finishAllBut(plans, store, 'jobs', 20);
      await expectServedBy(plans, store, jobs, pendingIndexName('jobs'), 'managed table');

      // table_a without the fixture's own pending index, so only migrate's index can serve: before it, the
      // database reads the whole table or sorts, which is what the index is for.
      await createTableA(env().fixtures, store, generateTableARows(5000), { ownIndex: false });
      await finishAllBut(plans, store, 'table_a', 20);
      const [plain] = candidateSelects(await Queue.open(store, { table: 'table_a' }), store);
      const before = await plans.explain(store, plain!);
      expect(before.index === null || before.sorts, `table_a before migrate: ${before.text}`).toBe(true);
      await migrateTable(store, { table: 'table_a', with: [...ALL_GROUPS] });
      await plans.analyze(store, 'table_a');
      await expectServedBy(plans, store, await Queue.open(store, { table: 'table_a' }), pendingIndexName('table_a'), 'table_a');
      await env().closeStores();
    });
  });
}
