import { describe, expect, it } from 'vitest';
import { Queue, initTable, migrateTable, pendingIndexName, type Store } from '@statusq/core';
import { Params, TransitionSql } from '@statusq/core/adapter';
import { generateTableARows } from '@statusq/test-fixtures';
import { FAST, readRow, readRows, statusOf, withDeadline, type TestEnv } from '../harness.js';
import { createTableA, createJobs, enqueueJobs } from '../tables.js';

const ALL_GROUPS = ['leases', 'retries', 'results'] as const;
const OPTIONAL = ['claimed_at', 'worker_id', 'attempt_count', 'next_attempt_at', 'last_error', 'result', 'finished_at'];

/** The candidate SELECTs a claim runs: newest first, oldest first, and aged, for ids and for whole rows. */
function candidateSelects(queue: Queue, store: Store): Array<{ label: string; sql: string; params: Params['values'] }> {
  const out: Array<{ label: string; sql: string; params: Params['values'] }> = [];
  for (const order of ['newest', 'oldest'] as const) {
    const table = { ...queue.table, direction: order };
    const sql = new TransitionSql(table, store.dialect);
    for (const columns of ['id', '*'] as const) {
      const p = new Params(store.dialect);
      out.push({ label: `${order} ${columns}`, sql: sql.candidates(p, { limit: 50, columns }), params: p.values });
    }
    const p = new Params(store.dialect);
    out.push({ label: `${order} aged`, sql: sql.candidates(p, { limit: 50, columns: 'id', agedMs: 3_600_000 }), params: p.values });
  }
  return out;
}

async function sqlitePlan(store: Store, sql: string, params: Params['values']): Promise<string[]> {
  const { rows } = await store.execute({ sql: `EXPLAIN QUERY PLAN ${sql}`, params });
  return rows.map((r) => String(r.detail));
}

export function schemaCases(env: () => TestEnv): void {
  describe('schema helpers', () => {
    it('migrateTable on table_a adds the optional columns and the pending index, leaves data untouched, and reports nothing the second time', async () => {
      const store = await env().store();
      const rows = generateTableARows(30);
      await createTableA(store, rows);
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
      expect(second).toEqual({ table: 'table_a', addedColumns: [], createdIndex: null, addedStatus: false });
      const queue = await Queue.open(store, { table: 'table_a' });
      expect(queue.table.features).toEqual({ leases: true, fencing: true, retries: true, backoff: true, errorHistory: true });
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
      expect(second.migrated).toEqual({ table: 'jobs', addedColumns: [], createdIndex: null, addedStatus: false });
      expect((await store.describeTable('jobs'))!.map((c) => c.name)).toEqual(columns);
      await env().closeStores();
    });

    it('a managed table holds a 100 KB payload and a 100 KB result (MySQL: LONGTEXT, not 64 KB TEXT)', async () => {
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

    it('[needs sqlite] EXPLAIN QUERY PLAN: every candidate SELECT is served by the pending index with no temp B-tree for ORDER BY', async (ctx) => {
      if ((await env().dialect()) !== 'sqlite') ctx.skip();
      const store = await env().store();
      const jobs = await createJobs(store);
      // Many finished rows beside a few pending ones, as an application table keeps them.
      await jobs.enqueue(Array.from({ length: 2000 }, (_, n) => ({ n })));
      const q = (n: string) => store.dialect.quoteIdentifier(n);
      await store.execute({ sql: `UPDATE ${q('jobs')} SET ${q('status')} = 1 WHERE ${q('id')} > 20`, params: [] });
      await store.execute({ sql: 'ANALYZE', params: [] });
      const index = pendingIndexName('jobs');
      for (const { label, sql, params } of candidateSelects(jobs, store)) {
        const plan = await sqlitePlan(store, sql, params);
        expect(plan.join(' | '), `managed table, ${label}`).toMatch(new RegExp(`USING (COVERING )?INDEX ${index}\\b`));
        expect(plan.join(' | '), `managed table, ${label}`).not.toMatch(/TEMP B-TREE/);
      }

      // table_a: the fixture's own (status, date) index is dropped, so only migrate's index can serve.
      await createTableA(store, generateTableARows(500));
      await store.execute({ sql: `DROP INDEX ${q('table_a_status_date')}`, params: [] });
      const [plain] = candidateSelects(await Queue.open(store, { table: 'table_a' }), store);
      const before = await sqlitePlan(store, plain!.sql, plain!.params);
      expect(before.join(' | ')).toMatch(/TEMP B-TREE|SCAN/);
      await migrateTable(store, { table: 'table_a', with: [...ALL_GROUPS] });
      const tableA = await Queue.open(store, { table: 'table_a' });
      for (const { label, sql, params } of candidateSelects(tableA, store)) {
        const plan = await sqlitePlan(store, sql, params);
        expect(plan.join(' | '), `table_a, ${label}`).toMatch(new RegExp(`USING (COVERING )?INDEX ${pendingIndexName('table_a')}\\b`));
        expect(plan.join(' | '), `table_a, ${label}`).not.toMatch(/TEMP B-TREE/);
      }
      await env().closeStores();
    });
  });
}
