import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, SchemaError, StoreError, initTable, loadHandler, migrateTable, type Store, type WorkerOptions } from '@statusq/core';
import { ensureSideTable, groupIndexName } from '@statusq/core/adapter';
import { generateTableARows } from '@statusq/test-fixtures';
import { FAST, countsOf, withDeadline, type StartedWorker, type TestEnv } from '../harness.js';
import { delegatingStore, withLatency } from '../latency.js';
import { childScript } from '../child-handle.js';
import type { ChildWorkerArgs, ChildWorkerResult } from '../child-worker.js';
import { createTableA } from '../tables.js';
import { mostAtOnce, paceViolations, runLedgerModule, type LedgerRun } from '../run-times.js';

/**
 * The seed's table_a with a group column, its rows (ids 1..n, one second apart, so the queue order is the id
 * order) put into groups by `groupOf` (null: no group).
 */
async function groupedTableA(env: TestEnv, store: Store, count: number, groupOf: (id: number) => string | null): Promise<void> {
  await createTableA(env.fixtures, store, generateTableARows(count, { poisonEvery: 0, abuseEvery: 0 }), { migrate: ['leases'] });
  await migrateTable(store, { table: 'table_a', with: ['groups'] });
  const q = (name: string) => store.dialect.quoteIdentifier(name);
  for (let id = 1; id <= count; id++) {
    const group = groupOf(id);
    if (group !== null) await store.execute({ sql: `UPDATE ${q('table_a')} SET ${q('group_key')} = ${store.dialect.placeholder(1)} WHERE ${q('id')} = ${store.dialect.placeholder(2)}`, params: [group, id] });
  }
}

/**
 * Runs every row of table_a through `processes` worker processes of 8 slots and 4 workers in this process, all
 * with `limits`, each run lasting `runMs`; returns every run from the ledger the handler module writes.
 */
async function runFleet(env: TestEnv, setup: Store, limits: Pick<WorkerOptions, 'groupConcurrency' | 'groupRate'>, runMs: number, processes = 4): Promise<LedgerRun[]> {
  const ledger = runLedgerModule(env.tempDir(), { label: "job.row.group_key ?? '-'", runMs });
  const handlerPath = ledger.handlerPath;
  // Made here: the latency wrappers of this process's workers carry no schema support.
  await ensureSideTable(setup, 'table_a', 'statusq_kind_limits');
  if (limits.groupRate !== undefined) await ensureSideTable(setup, 'table_a', 'statusq_group_rates');
  const table = { table: 'table_a', order: 'oldest' as const };
  const worker = { ...FAST, ...limits, exitWhenEmpty: true };
  const children = Array.from({ length: processes }, (_, i) =>
    env.spawnChild(childScript('child-worker.js'), { adapterModule: env.adapterModulePath, url: env.url, table, handlerPath, concurrency: 8, worker } satisfies ChildWorkerArgs, {}, `group worker process ${i + 1}`),
  );
  const { handler } = await loadHandler(handlerPath);
  const local: StartedWorker[] = [];
  for (let i = 0; i < 4; i++) local.push(await env.startWorker({ store: withLatency(await env.store(`worker store ${i + 1}`)), table, handler, concurrency: 4, ...worker }));
  await Promise.all(children.map((child) => child.result<ChildWorkerResult>(100_000)));
  await withDeadline(Promise.all(local.map((w) => w.done)), 100_000, 'the workers in this process');
  // A server with row locks may roll back one claim of two that deadlock; the worker reports it and claims again.
  expect(local.flatMap((w) => w.errors).filter((e) => !(e.error instanceof StoreError && e.error.kind === 'WriteConflict'))).toEqual([]);
  expect(await countsOf(setup, 'table_a')).toMatchObject({ pending: 0, processing: 0 });
  return ledger.read();
}

/**
 * The same store, except that its first `failures` writes of the group lock (the UPDATE of statusq_kind_limits in
 * a claim's transaction) reject with ConnectionLost: the limit cannot be read, as when the database is away.
 */
function refusingGroupLock(inner: Store, failures: number): Store & { refused(): number; refusing(): boolean } {
  let refused = 0;
  const store: Store & { refused(): number; refusing(): boolean } = {
    ...delegatingStore(inner),
    refused: () => refused,
    refusing: () => refused < failures,
  };
  store.transaction = (body) =>
    inner.transaction!((tx) =>
      body({
        execute: async (s) => {
          if (refused < failures && /^UPDATE\b.*statusq_kind_limits/s.test(s.sql)) {
            refused++;
            throw new StoreError('ConnectionLost', 'connection lost (simulated outage of the group limit)', 'TEST');
          }
          return tx.execute(s);
        },
      }),
    );
  return store;
}

function expectEachRowOnce(runs: readonly LedgerRun[], count: number): void {
  const ids = runs.map((run) => run.id).sort((a, b) => a - b);
  expect(ids).toEqual(Array.from({ length: count }, (_, i) => i + 1));
}

export function groupCases(env: () => TestEnv): void {
  describe('groups (migrate --with groups, fleet-wide limits per group)', () => {
    it('serial groups hold under 4 worker processes of 8 slots and 4 workers here: one row of a group at a time, in queue order, and a busy group at the head of the queue starves no other', { timeout: 120_000 }, async () => {
      const setup = await env().store('setup store');
      // 80 rows of one host first, then 8 hosts of 8 rows each, then 8 rows without a group.
      const count = 80 + 64 + 8;
      const groupOf = (id: number) => (id <= 80 ? 'busy.example' : id <= 144 ? `host${(id - 81) % 8}.example` : null);
      await groupedTableA(env(), setup, count, groupOf);
      const runs = await runFleet(env(), setup, { groupConcurrency: 1 }, 10);

      expectEachRowOnce(runs, count);
      const groups = [...new Set(runs.map((run) => run.label))].filter((group) => group !== '-');
      expect(groups).toHaveLength(9);
      for (const group of groups) {
        expect({ group, most: mostAtOnce(runs.filter((run) => run.label === group)) }).toEqual({ group, most: 1 });
        // Serial and in queue order: each group's rows started in id order.
        const started = runs.filter((run) => run.label === group).sort((a, b) => a.start - b.start).map((run) => run.id);
        expect(started).toEqual([...started].sort((a, b) => a - b));
      }
      // Not starved: every other row ended before the busy group's last row started.
      const lastBusyStart = Math.max(...runs.filter((run) => run.label === 'busy.example').map((run) => run.start));
      expect(runs.filter((run) => run.label !== 'busy.example' && run.end > lastBusyStart)).toEqual([]);
      await env().closeStores();
    });

    it('a cap of 3 per group holds under 4 worker processes and 4 workers here, and the groups run beside each other up to it', { timeout: 120_000 }, async () => {
      const setup = await env().store('setup store');
      const count = 90;
      await groupedTableA(env(), setup, count, (id) => `tenant-${id % 3}`);
      const runs = await runFleet(env(), setup, { groupConcurrency: 3 }, 15);

      expectEachRowOnce(runs, count);
      const most = ['tenant-0', 'tenant-1', 'tenant-2'].map((group) => mostAtOnce(runs.filter((run) => run.label === group)));
      expect(Math.max(...most)).toBeLessThanOrEqual(3);
      // The limit is what held them: 44 slots would otherwise run a group's 30 rows far wider than 3.
      expect(Math.max(...most)).toBeGreaterThanOrEqual(2);
      await env().closeStores();
    });

    it('a pace per group holds fleet-wide: starts of one group at most 20 a second across 2 worker processes and 4 workers here, while the groups run beside each other', { timeout: 120_000 }, async () => {
      const setup = await env().store('setup store');
      const perGroup = 12;
      await groupedTableA(env(), setup, 3 * perGroup, (id) => `host${id % 3}`);
      const runs = await runFleet(env(), setup, { groupRate: '20/s' }, 2, 2);

      expectEachRowOnce(runs, 3 * perGroup);
      // At 20/s a start every 50 ms, and up to 2 at once after an idle spell (a tenth of a second's worth).
      const intervalMs = 50;
      for (const group of ['host0', 'host1', 'host2']) {
        expect({ group, violations: paceViolations(runs.filter((run) => run.label === group).map((run) => run.start), intervalMs, 2, 150) }).toEqual({ group, violations: [] });
      }
      // The three groups are paced apart, not one after another: their runs overlap in time.
      const spans = ['host0', 'host1', 'host2'].map((group) => runs.filter((run) => run.label === group)).map((own) => [Math.min(...own.map((r) => r.start)), Math.max(...own.map((r) => r.end))] as const);
      expect(Math.max(...spans.map(([first]) => first))).toBeLessThan(Math.min(...spans.map(([, last]) => last)));
      await env().closeStores();
    });

    it('migrate --with groups adds group_key and its index once; an application\'s own integer column can hold the groups, and a serial group holds on it', async () => {
      const store = await env().store();
      await initTable(store, 'plain');
      const first = await migrateTable(store, { table: 'plain', with: ['groups'] });
      expect(first.addedColumns).toEqual(['group_key']);
      expect(first.createdGroupIndex).toBe(store.schema?.createGroupIndex ? groupIndexName('plain') : null);
      const second = await migrateTable(store, { table: 'plain', with: ['groups'] });
      expect([second.addedColumns, second.createdGroupIndex]).toEqual([[], null]);
      expect((await Queue.open(store, { table: 'plain' })).table.features.groups).toBe(true);

      const q = (name: string) => store.dialect.quoteIdentifier(name);
      await initTable(store, 'tenanted');
      await store.execute({ sql: `ALTER TABLE ${q('tenanted')} ADD ${q('tenant_id')} INTEGER`, params: [] });
      const own = await migrateTable(store, { table: 'tenanted', with: ['groups'], groupColumn: 'tenant_id' });
      expect(own.addedColumns).toEqual([]);
      const config = { table: 'tenanted', columns: { group: 'tenant_id' } };
      const queue = await Queue.open(store, config);
      await queue.enqueue(Array.from({ length: 6 }, (_, n) => ({ n })), { group: 7 });
      await queue.enqueue(Array.from({ length: 6 }, (_, n) => ({ n })), { group: 8 });
      await queue.enqueue(Array.from({ length: 4 }, (_, n) => ({ n })));
      const running = new Map<string, number>();
      let most = new Map<string, number>();
      const worker = await env().startWorker({
        store,
        table: config,
        concurrency: 6,
        groupConcurrency: 1,
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job) => {
          const group = String(job.row.tenant_id ?? '-');
          running.set(group, (running.get(group) ?? 0) + 1);
          most = new Map([...most, [group, Math.max(most.get(group) ?? 0, running.get(group)!)]]);
          await new Promise((resolve) => setTimeout(resolve, 5));
          running.set(group, running.get(group)! - 1);
        },
      });
      await withDeadline(worker.done, 30_000, 'the tenant worker');
      expect([most.get('7'), most.get('8')]).toEqual([1, 1]);
      expect(await countsOf(store, 'tenanted')).toMatchObject({ pending: 0, processing: 0, done: 16 });
      await expect(migrateTable(store, { table: 'plain', with: ['groups'], groupColumn: 'nope' })).rejects.toThrow(SchemaError);
      await expect(migrateTable(store, { table: 'plain', with: ['leases'], groupColumn: 'tenant_id' })).rejects.toThrow(ConfigError);
      await env().closeStores();
    });

    it('while the group limit cannot be read (the database refuses its lock) nothing is claimed: the worker reports it, waits, and runs every row once when it can', async () => {
      const store = await env().store();
      await initTable(store, 'jobs', { with: ['groups'] });
      const queue = await Queue.open(store, { table: 'jobs' });
      await queue.enqueue(Array.from({ length: 12 }, (_, n) => ({ n })), { group: 'a.test' });
      await queue.enqueue(Array.from({ length: 12 }, (_, n) => ({ n })), { group: 'b.test' });
      // Made here: the wrapper carries no schema support.
      await ensureSideTable(store, 'jobs', 'statusq_kind_limits');
      // More refusals than one claim's retries (10): the loop backs off, as after any failed claim, and tries again.
      const refusingLock = refusingGroupLock(store, 12);
      const ran: number[] = [];
      let ranWhileRefused = 0;
      const worker = await env().startWorker({
        store: refusingLock,
        table: { table: 'jobs' },
        concurrency: 4,
        groupConcurrency: 2,
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job) => {
          if (refusingLock.refusing()) ranWhileRefused++;
          ran.push(Number(job.payload && (job.payload as { n: number }).n));
        },
      });
      await withDeadline(worker.done, 60_000, 'the worker to ride out the refused lock');
      expect(refusingLock.refused()).toBe(12);
      expect(ranWhileRefused).toBe(0);
      expect(ran).toHaveLength(24);
      expect(worker.errors.length).toBeGreaterThan(0);
      expect(worker.errors.every((e) => e.error instanceof StoreError && e.error.kind === 'ConnectionLost')).toBe(true);
      expect(await countsOf(store, 'jobs')).toMatchObject({ pending: 0, processing: 0, done: 24 });
      await env().closeStores();
    });

    it('refuses bad input before touching a row: a malformed group or limit, group limits or a group on a table without the column, a group column that is not there', async () => {
      const store = await env().store();
      await initTable(store, 'jobs', { with: ['groups'] });
      const queue = await Queue.open(store, { table: 'jobs' });
      for (const group of ['', 'x'.repeat(256), 1.5, {}, true]) {
        await expect(queue.enqueue([{ n: 1 }], { group: group as string })).rejects.toThrow(ConfigError);
      }
      await initTable(store, 'plain');
      const plain = await Queue.open(store, { table: 'plain' });
      await expect(plain.enqueue([{ n: 1 }], { group: 'a' })).rejects.toThrow(/has no group_key column, which a job's group needs \(statusq migrate --with groups adds it\)/);
      const base = { store, table: { table: 'jobs' }, handler: async () => undefined, ...FAST };
      for (const groupConcurrency of [0, -1, 1.5, 100_001]) await expect(env().startWorker({ ...base, groupConcurrency })).rejects.toThrow(ConfigError);
      for (const groupRate of ['fast', '0/s', '5/d']) await expect(env().startWorker({ ...base, groupRate })).rejects.toThrow(ConfigError);
      await expect(env().startWorker({ ...base, table: { table: 'plain' }, groupConcurrency: 1 })).rejects.toThrow(/group limits need a group column/);
      await expect(Queue.open(store, { table: 'jobs', columns: { group: 'host' } })).rejects.toThrow(SchemaError);
      expect(await countsOf(store, 'jobs')).toMatchObject({ pending: 0, processing: 0 });
      await env().closeStores();
    });
  });
}
