import { describe, expect, it } from 'vitest';
import { Queue, type Order, type Store } from '@statusq/core';
import type { ClaimStrategy } from '@statusq/core/adapter';
import { formatUtcTime, type TableARow } from '@statusq/test-fixtures';
import { FAST, toMs, withDeadline, type TestEnv } from '../harness.js';
import { createJobs, createTableA, insertJobsAt } from '../tables.js';

/** A fixed permutation, so ids say nothing about dates. */
const PERMUTATION = [7, 2, 9, 0, 5, 11, 3, 8, 1, 10, 4, 6];

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Ages (ms before now) of the rows: three older than an hour, the rest recent. */
const AGES = [3 * HOUR, 2 * HOUR, 90 * MINUTE, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000, 70_000, 80_000, 90_000];

async function drainInOrder(env: TestEnv, store: Store, table: string, options: { order?: Order; agingMs?: number; strategy: ClaimStrategy }): Promise<number[]> {
  const seen: number[] = [];
  const w = await env.startWorker({
    store,
    table: { table, ...(options.order ? { order: options.order } : {}) },
    concurrency: 1,
    batch: 1,
    claimStrategy: options.strategy,
    exitWhenEmpty: true,
    ...(options.agingMs !== undefined ? { agingMs: options.agingMs } : {}),
    ...FAST,
    handler: async (job) => {
      seen.push(toMs(job.row.date)!);
    },
  });
  await withDeadline(w.done, 30_000, 'the worker to drain the queue');
  expect(w.errors).toEqual([]);
  return seen;
}

async function resetToPending(store: Store, table: string): Promise<void> {
  const q = (n: string) => store.dialect.quoteIdentifier(n);
  await store.execute({ sql: `UPDATE ${q(table)} SET ${q('status')} = NULL`, params: [] });
}

const desc = (xs: number[]) => [...xs].sort((a, b) => b - a);
const asc = (xs: number[]) => [...xs].sort((a, b) => a - b);

/** Aged rows first, oldest first; then the rest newest first. */
function agedThenNewest(times: number[], now: number, agingMs: number): number[] {
  return [...asc(times.filter((t) => t <= now - agingMs)), ...desc(times.filter((t) => t > now - agingMs))];
}

export function orderCases(env: () => TestEnv): void {
  describe('claim order', () => {
    for (const strategy of ['native', 'conditional-update'] as ClaimStrategy[]) {
      it(`${strategy}: table_a (text dates): newest first by default, oldest first with order 'oldest', aged rows first with agingMs`, async () => {
        const store = await env().store();
        const now = Date.now();
        const rows: TableARow[] = PERMUTATION.map((p, id) => ({
          id: id + 1,
          date: formatUtcTime(new Date(now - AGES[p]!)),
          url: `https://example.test/${id + 1}`,
          kind: 'ok',
        }));
        await createTableA(env().fixtures, store, rows);
        const times = rows.map((r) => toMs(r.date)!);

        expect(await drainInOrder(env(), store, 'table_a', { strategy })).toEqual(desc(times));
        await resetToPending(store, 'table_a');
        expect(await drainInOrder(env(), store, 'table_a', { strategy, order: 'oldest' })).toEqual(asc(times));
        await resetToPending(store, 'table_a');
        const aged = await drainInOrder(env(), store, 'table_a', { strategy, agingMs: HOUR });
        expect(aged).toEqual(agedThenNewest(times, now, HOUR));
        expect(aged.slice(0, 3)).toEqual(asc(times).slice(0, 3));
        await env().closeStores();
      });

      it(`${strategy}: managed table (epoch-ms dates): newest first by default, oldest first with order 'oldest', aged rows first with agingMs`, async () => {
        const store = await env().store();
        const queue = await createJobs(store);
        const now = Date.now();
        const rows = PERMUTATION.map((p, i) => ({ id: i + 1, date: new Date(now - AGES[p]!), payload: { p } }));
        await insertJobsAt(queue, rows);
        const reopened = await Queue.open(store, { table: 'jobs' });
        expect(reopened.table.orderTime).not.toBe('text');
        const times = rows.map((r) => r.date.getTime());

        expect(await drainInOrder(env(), store, 'jobs', { strategy })).toEqual(desc(times));
        await resetToPending(store, 'jobs');
        expect(await drainInOrder(env(), store, 'jobs', { strategy, order: 'oldest' })).toEqual(asc(times));
        await resetToPending(store, 'jobs');
        expect(await drainInOrder(env(), store, 'jobs', { strategy, agingMs: HOUR })).toEqual(agedThenNewest(times, now, HOUR));
        await env().closeStores();
      });
    }
  });
}
