import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, SchemaError, StatusqError, Worker, initTable, migrateTable, type Store, type TableConfig, type WorkerOptions } from '@statusq/core';
import { generateTableARows } from '@statusq/test-fixtures';
import { FAST, Ledger, countsOf, readRow, readRows, statusOf, withDeadline, type TestEnv } from '../harness.js';
import { createCheckedTable, createJobs, createTableA, enqueueJobs } from '../tables.js';

/** A store that records every call that could reach the database. */
function spyStore(inner: Store): { store: Store; calls: string[] } {
  const calls: string[] = [];
  const store: Store = {
    dialect: inner.dialect,
    capabilities: inner.capabilities,
    statementLimit: inner.statementLimit,
    execute: (s) => {
      calls.push(`execute: ${s.sql}`);
      return inner.execute(s);
    },
    executeBatch: (s) => {
      calls.push(`executeBatch: ${s.map((x) => x.sql).join('; ')}`);
      return inner.executeBatch(s);
    },
    describeTable: (t) => {
      calls.push(`describeTable: ${t}`);
      return inner.describeTable(t);
    },
    orderTimeEncoding: (c) => inner.orderTimeEncoding(c),
    nativeClaim: inner.nativeClaim,
    close: () => inner.close(),
  };
  if (inner.transaction) {
    store.transaction = (body) => {
      calls.push('transaction');
      return inner.transaction!(body);
    };
  }
  return { store, calls };
}

async function rejection(promise: Promise<unknown> | (() => unknown)): Promise<unknown> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (error) {
    return error;
  }
  return undefined;
}

const BAD_NAMES = ['jobs; DROP TABLE x', '1abc', 'a-b', 'a'.repeat(64), '', ' jobs', 'jobs--'];
/** Invalid names that Queue.open sends to describeTable before validating them (see the known-bug test). */
const BAD_NAMES_REACHING_SQL = ['a"b', 'a.b.c', 'x"."y'];
const noop = async () => undefined;

export function configCases(env: () => TestEnv): void {
  describe('bad configuration and identifiers', () => {
    it('invalid table and column names are ConfigError from Worker.create, Queue.open, initTable and migrateTable; the schema helpers send no SQL', async () => {
      const inner = await env().store();
      await createJobs(inner);
      const { store, calls } = spyStore(inner);
      const problems: string[] = [];
      const expectConfigError = async (label: string, attempt: () => Promise<unknown>) => {
        const error = await rejection(attempt);
        if (!(error instanceof ConfigError)) problems.push(`${label}: expected ConfigError, got ${String(error)}`);
        else if (error.code !== 'CONFIG') problems.push(`${label}: code ${error.code}`);
      };
      for (const bad of BAD_NAMES) {
        const name = JSON.stringify(bad);
        await expectConfigError(`Worker.create table ${name}`, () => Worker.create({ store, table: { table: bad }, handler: noop }));
        await expectConfigError(`Queue.open table ${name}`, () => Queue.open(store, { table: bad }));
        for (const column of ['idColumn', 'statusColumn', 'orderColumn'] as const) {
          await expectConfigError(`Queue.open ${column} ${name}`, () => Queue.open(store, { table: 'jobs', [column]: bad }));
        }
        await expectConfigError(`Queue.open claimedAt column ${name}`, () => Queue.open(store, { table: 'jobs', columns: { claimedAt: bad } }));
      }
      for (const bad of [...BAD_NAMES, ...BAD_NAMES_REACHING_SQL]) {
        const name = JSON.stringify(bad);
        calls.length = 0;
        await expectConfigError(`initTable ${name}`, () => initTable(store, bad));
        await expectConfigError(`migrateTable ${name}`, () => migrateTable(store, { table: bad }));
        await expectConfigError(`migrateTable orderColumn ${name}`, () => migrateTable(store, { table: 'jobs', orderColumn: bad }));
        if (calls.length > 0) problems.push(`schema helpers sent SQL for ${name}: ${calls.join(' | ')}`);
      }
      expect(problems).toEqual([]);
      // 63 characters is the longest valid name: no ConfigError, just a missing table.
      expect(await rejection(Queue.open(store, { table: 'a'.repeat(63) }))).toBeInstanceOf(SchemaError);
      // Still there, untouched.
      expect((await inner.describeTable('jobs'))?.length).toBeGreaterThan(0);
      await env().closeStores();
    });

    // Names are validated before any of them reaches SQL, even the read-only introspection.
    it('Queue.open and Worker.create validate names before any SQL (a name with a quote or two dots is a ConfigError)', async () => {
      const inner = await env().store();
      try {
        await createJobs(inner);
        const { store, calls } = spyStore(inner);
        for (const bad of BAD_NAMES_REACHING_SQL) {
          expect(await rejection(Queue.open(store, { table: bad })), `Queue.open ${JSON.stringify(bad)}`).toBeInstanceOf(ConfigError);
          expect(await rejection(Worker.create({ store, table: { table: bad }, handler: noop })), `Worker.create ${JSON.stringify(bad)}`).toBeInstanceOf(ConfigError);
        }
        for (const bad of [...BAD_NAMES, ...BAD_NAMES_REACHING_SQL]) {
          calls.length = 0;
          await rejection(Queue.open(store, { table: bad }));
          await rejection(Worker.create({ store, table: { table: bad }, handler: noop }));
          expect(calls, `SQL sent for ${JSON.stringify(bad)}`).toEqual([]);
        }
      } finally {
        await env().closeStores();
      }
    });

    it('a missing table or column is a SchemaError from Worker.create and Queue.open, naming what is missing', async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, generateTableARows(3));
      const cases: Array<[TableConfig, RegExp]> = [
        [{ table: 'no_such_table' }, /no_such_table/],
        [{ table: 'table_a', orderColumn: 'created_at' }, /created_at/],
        [{ table: 'table_a', statusColumn: 'state' }, /state/],
        [{ table: 'table_a', idColumn: 'uuid' }, /uuid/],
        [{ table: 'table_a', columns: { claimedAt: 'lease_started_at' } }, /lease_started_at/],
      ];
      for (const [table, message] of cases) {
        for (const [label, attempt] of [
          ['Queue.open', () => Queue.open(store, table)],
          ['Worker.create', () => Worker.create({ store, table, handler: noop })],
        ] as const) {
          const error = await rejection(attempt);
          expect(error, `${label} ${JSON.stringify(table)}`).toBeInstanceOf(SchemaError);
          expect((error as SchemaError).message).toMatch(message);
        }
      }
      expect((await countsOf(store, 'table_a')).pending).toBe(3);
      await env().closeStores();
    });

    it('options the table cannot honour or that are out of range are ConfigError, and no row is touched', async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, generateTableARows(3));
      await createJobs(store);
      const base: WorkerOptions = { store, table: { table: 'table_a' }, handler: noop };
      const cases: Array<[string, Partial<WorkerOptions>]> = [
        ['maxAttempts > 1 without attempt_count', { maxAttempts: 2 }],
        ['a lease without claimed_at', { leaseMs: 1000 }],
        ['concurrency 0', { concurrency: 0 }],
        ["concurrency 'x'", { concurrency: 'x' as unknown as number }],
        ['concurrency -1', { concurrency: -1 }],
        ['concurrency 1.5', { concurrency: 1.5 }],
        ['batch 0', { batch: 0 }],
        ['maxAttempts 0', { maxAttempts: 0 }],
        ['retryDelayMs -1', { retryDelayMs: -1 }],
        ['pollMinMs NaN', { pollMinMs: Number.NaN }],
        ["claimStrategy 'fastest'", { claimStrategy: 'fastest' as never }],
        ['handler not a function', { handler: 'handler.mjs' as never }],
        ['a 5 ms lease', { table: { table: 'jobs' }, leaseMs: 5 }],
        // Past 2^31-1 ms Node fires a timer after 1 ms: a 100-day lease heartbeated in a tight loop.
        ['a 100-day lease', { table: { table: 'jobs' }, leaseMs: 100 * 86_400_000 }],
        ['retryDelayMs of 30 days', { retryDelayMs: 30 * 86_400_000 }],
        ['pollMaxMs of 25 days', { pollMaxMs: 25 * 86_400_000 }],
        ["order 'random'", { table: { table: 'table_a', order: 'random' as never } }],
        ['duplicate status codes', { table: { table: 'table_a', statusCodes: { done: 9 } } }],
      ];
      const problems: string[] = [];
      for (const [label, options] of cases) {
        const error = await rejection(() => Worker.create({ ...base, ...options }));
        if (!(error instanceof ConfigError)) problems.push(`${label}: expected ConfigError, got ${String(error)}`);
      }
      expect(problems).toEqual([]);
      expect(await rejection(Worker.create(undefined as never))).toBeInstanceOf(ConfigError);
      expect((await countsOf(store, 'table_a')).pending).toBe(3);
      await env().closeStores();
    });

    it('bad enqueue input: unknown column or the status column is a SchemaError, a non-object item on a table without payload a ConfigError', async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, []);
      const queue = await Queue.open(store, { table: 'table_a' });
      expect(await rejection(queue.enqueue([{ id: 1, date: '2024-01-01 00:00:00.000', url: 'u', kind: 'ok', nope: 1 }]))).toBeInstanceOf(SchemaError);
      expect(await rejection(queue.enqueue([{ id: 1, date: '2024-01-01 00:00:00.000', url: 'u', kind: 'ok', status: 1 }]))).toBeInstanceOf(SchemaError);
      expect(await rejection(queue.enqueue(['just a string']))).toBeInstanceOf(ConfigError);
      expect(await rejection(queue.enqueue([{ 'bad name': 1 }]))).toBeInstanceOf(ConfigError);
      expect(await countsOf(store, 'table_a')).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
      await env().closeStores();
    });

    it("a table whose ids the application assigns (no default, no auto-increment or identity, no rowid): the catalog says so, a row without its id is a ConfigError naming the fix before anything is written, and a row with it is inserted under that id", async () => {
      const store = await env().store();
      expect(await createCheckedTable(env().fixtures, store, 'assignedId', 'assigned')).toBe(true);
      const queue = await Queue.open(store, { table: 'assigned' });
      expect(queue.idColumn.filledOnInsert).toBe(false);
      expect((await createJobs(store)).idColumn.filledOnInsert).toBe(true);
      const row = (id?: number) => ({ ...(id !== undefined && { id }), date: '2024-01-01 00:00:00.000' });
      const refused = await rejection(queue.enqueue([row(1), row()]));
      expect(refused).toBeInstanceOf(ConfigError);
      expect((refused as Error).message).toBe('item 2: gives no id, and assigned.id gets none from the database (no AUTO_INCREMENT, identity, serial or DEFAULT): give each row its id');
      expect(await countsOf(store, 'assigned')).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
      expect((await queue.enqueue([row(7), row(9)])).map(Number)).toEqual([7, 9]);
      expect(await countsOf(store, 'assigned')).toMatchObject({ pending: 2 });
      await env().closeStores();
    });

    it('a handler result that is not JSON-serialisable (BigInt) ends its job in 0 with last_error saying so; the worker keeps running and loses no job', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const ids = await enqueueJobs(
        queue,
        Array.from({ length: 9 }, (_, n) => ({ n, big: n === 4 })),
      );
      const ledger = new Ledger();
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        concurrency: 2,
        maxAttempts: 3,
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job) => {
          ledger.record(job);
          const { n, big } = job.payload as { n: number; big: boolean };
          return big ? { n: BigInt(n) } : { n };
        },
      });
      const counters = await withDeadline(w.done, 30_000, 'the worker to drain the queue');
      expect(ledger.notExactlyOnce(ids)).toEqual([]);
      const bad = await readRow(store, 'jobs', ids[4]);
      expect(statusOf(bad)).toBe(0);
      expect(String(bad.last_error)).toMatch(/JSON/i);
      expect(String(bad.last_error)).toMatch(/BigInt/);
      expect(Number(bad.attempt_count)).toBe(1);
      expect(bad.result).toBeNull();
      expect(await countsOf(store, 'jobs')).toEqual({ pending: 0, processing: 0, done: 8, abuse: 0, failed: 1, other: 0 });
      expect(counters).toMatchObject({ completed: 8, failed: 1, retried: 0 });
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('a closed store rejects further calls', async () => {
      const store = await env().store();
      await createJobs(store);
      await store.close();
      const error = await rejection(store.execute({ sql: 'SELECT 1', params: [] }));
      expect(error).toBeInstanceOf(Error);
      if (error instanceof StatusqError) expect(error.code).toMatch(/^STORE_/);
      await env().closeStores();
    });
  });
  describe('the table checked at start-up', () => {
    /** Queue.open and Worker.create on `table` both reject; the error of each. */
    async function refusals(store: Store, table: string): Promise<unknown[]> {
      return [await rejection(Queue.open(store, { table })), await rejection(Worker.create({ store, table: { table }, handler: noop }))];
    }

    it('an id that is only part of the primary key (or unique only in part of the table) is a SchemaError from Queue.open and Worker.create, and no row changes', async () => {
      const store = await env().store();
      try {
        const rows = [[1, 1], [1, 2], [2, 1]] as const;
        await createCheckedTable(env().fixtures, store, 'sharedId', 'pairs', rows);
        const partial = await createCheckedTable(env().fixtures, store, 'partialUniqueId', 'partial_pairs', rows);
        for (const table of partial ? ['pairs', 'partial_pairs'] : ['pairs']) {
          for (const error of await refusals(store, table)) {
            expect(error, table).toBeInstanceOf(SchemaError);
            expect((error as SchemaError).message).toMatch(/id column "id" is not unique: it must be the primary key or have a unique index of its own/);
            expect((error as SchemaError).message).not.toMatch(/\n/);
          }
          expect((await readRows(store, table)).map((r) => statusOf(r)), table).toEqual([null, null, null]);
        }
      } finally {
        await env().closeStores();
      }
    });

    it('a unique index on id alone, beside a wider primary key, is accepted and every row gets its own outcome', async () => {
      const store = await env().store();
      await createCheckedTable(env().fixtures, store, 'uniqueId', 'keyed', [[1], [2], [3]]);
      const w = await env().startWorker({
        store,
        table: { table: 'keyed' },
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job, ctx) => (Number(job.id) === 2 ? ctx.giveUp('no') : undefined),
      });
      await withDeadline(w.done, 30_000, 'the worker to drain keyed');
      expect((await readRows(store, 'keyed')).map((r) => [Number(r.id), statusOf(r)])).toEqual([
        [1, 1],
        [2, 0],
        [3, 1],
      ]);
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('a status column that is not an integer type is a SchemaError naming the type, and no row changes (a column without a declared type that keeps integers is accepted)', async () => {
      const store = await env().store();
      try {
        await createCheckedTable(env().fixtures, store, 'textStatus', 'texty', [[1], [2]]);
        for (const error of await refusals(store, 'texty')) {
          expect(error).toBeInstanceOf(SchemaError);
          expect((error as SchemaError).message).toMatch(/status column "status" is (varchar\(8\)|character varying), not an integer type.*SMALLINT/);
        }
        expect((await readRows(store, 'texty')).map((r) => statusOf(r))).toEqual([null, null]);
        if (await createCheckedTable(env().fixtures, store, 'untypedStatus', 'untyped', [[1]])) {
          expect((await Queue.open(store, { table: 'untyped' })).table.status).toBe('status');
        }
      } finally {
        await env().closeStores();
      }
    });

    it('bounded payload, result and last_error columns: the bound is reported, a payload too long is refused before any insert, a long failure reason is cut to fit (where the database enforces a declared length)', async () => {
      const store = await env().store();
      const enforced = env().options.enforcesTextLength ?? true;
      await createCheckedTable(env().fixtures, store, 'bounded', 'bounded');
      const result = (await store.describeTable('bounded'))!.find((c) => c.name === 'result')!;
      const queue = await Queue.open(store, { table: 'bounded' });
      if (!enforced) {
        // The database stores text of any length whatever the declared size: nothing to check against.
        expect(result.maxLength).toBeNull();
        expect(queue.table.limits).toEqual({});
      } else {
        expect(result.maxLength?.chars).toBe(10);
        expect(queue.table.limits.result?.chars).toBe(10);
        expect(queue.table.limits.payload?.chars).toBe(10);
        expect(queue.table.limits.lastError?.chars).toBe(20);
        const error = await rejection(queue.enqueue([{ n: 1 }, { n: 'far too long' }]));
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as ConfigError).message).toMatch(/item 2: the payload does not fit column payload: 20 characters; the column holds at most 10/);
        expect((await readRows(store, 'bounded')).length).toBe(0);
      }
      expect(await queue.enqueue([{ n: 1 }])).toHaveLength(1);
      const reason = 'a reason longer than twenty characters';
      const w = await env().startWorker({
        store,
        table: { table: 'bounded' },
        exitWhenEmpty: true,
        ...FAST,
        handler: async () => {
          throw new Error(reason);
        },
      });
      await withDeadline(w.done, 30_000, 'the worker to settle the bounded row');
      const [row] = await readRows(store, 'bounded');
      expect(statusOf(row)).toBe(0);
      expect(row!.last_error).toBe(enforced ? `Error: ${reason}`.slice(0, 19) + '…' : `Error: ${reason}`);

      // A result longer than the column holds fails its row at once, with the reason, instead of failing
      // every settle and running again by lease.
      await store.execute({ sql: `DELETE FROM ${store.dialect.quoteIdentifier('bounded')}`, params: [] });
      expect(await queue.enqueue([{ n: 2 }])).toHaveLength(1);
      const big = await env().startWorker({ store, table: { table: 'bounded' }, exitWhenEmpty: true, ...FAST, handler: async () => 'x'.repeat(50) }, 'big result');
      const counters = await withDeadline(big.done, 30_000, 'the worker to settle the big result');
      const [bigRow] = await readRows(store, 'bounded');
      if (!enforced) {
        expect(statusOf(bigRow)).toBe(1);
      } else {
        expect({ status: statusOf(bigRow), completed: counters.completed, failed: counters.failed }).toEqual({ status: 0, completed: 0, failed: 1 });
        expect(bigRow!.last_error).toBe('HandlerResultError:…');
      }
      await env().closeStores();
    });
  });
}
