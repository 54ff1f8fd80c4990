import { describe, expect, it } from 'vitest';
import { Queue } from './queue.js';
import type { Statement, Store } from '../store/store.js';
import { jobsStoreEachTest, type SqlJsStore } from '../test/sqljs-store.js';

const withJobs = jobsStoreEachTest();

/**
 * Makes `s` a store whose settle wake-up the test fires (`wake(ids)`: null names no row), and records the id
 * list of every read of awaited rows.
 */
function settleWakeUps(s: SqlJsStore): { reads: Array<readonly unknown[]>; waiting: () => number; wake: (ids: readonly string[] | null) => void } {
  const reads: Array<readonly unknown[]> = [];
  const waits = new Set<(ids: readonly string[] | null) => void>();
  s.beforeRun = (statements: readonly Statement[]) => {
    for (const statement of statements) if (/^SELECT "id" AS "id", "status" AS "status"/.test(statement.sql)) reads.push(statement.params);
  };
  (s as Store).waitForChange = (_ms, signal) =>
    new Promise((resolve) => {
      const done = (ids: readonly string[] | null) => {
        waits.delete(done);
        resolve(ids);
      };
      waits.add(done);
      signal.addEventListener('abort', () => done(null), { once: true });
    });
  return { reads, waiting: () => waits.size, wake: (ids) => [...waits].forEach((done) => done(ids)) };
}

/** Resolves once `check` holds, checking after each turn of the event loop. */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setImmediate(resolve));
}

describe('waitFor: one watcher per queue', () => {
  it('reads every waiter\'s row together: 50 waiters cost one read per wake-up, and a wake-up that names rows reads only those', async () => {
    const s = await withJobs(50);
    const { reads, waiting, wake } = settleWakeUps(s);
    const queue = await Queue.open(s, { table: 'jobs' });
    const outcomes = Array.from({ length: 50 }, (_, i) => queue.waitFor(i + 1));
    // The first waiter's read starts at once; the other 49 joined during it and share the next.
    await until(() => waiting() === 1);
    expect(reads.map((ids) => ids.length)).toEqual([1, 49]);

    s.db.run('UPDATE jobs SET status = 1, result = \'{"n":7}\' WHERE id = 7');
    wake(['7']);
    expect(await outcomes[6]).toEqual({ status: 'done', result: { n: 7 }, lastError: null });
    await until(() => waiting() === 1);
    expect(reads.slice(2)).toEqual([[7]]);

    s.db.run('UPDATE jobs SET status = 0, last_error = \'boom\' WHERE id <> 7');
    wake(null);
    const all = await Promise.all(outcomes);
    expect(all.filter((o) => o.status === 'failed' && o.lastError === 'boom')).toHaveLength(49);
    expect(reads.slice(3).map((ids) => ids.length)).toEqual([49]);
    expect(waiting()).toBe(0);
  });

  it('two waiters on one row both hear its settle; a waiter that leaves (timeout) is read no more', async () => {
    const s = await withJobs(2);
    const { reads, waiting, wake } = settleWakeUps(s);
    const queue = await Queue.open(s, { table: 'jobs' });
    const twice = [queue.waitFor(1), queue.waitFor('1')];
    expect(await queue.waitFor(2, { timeoutMs: 0 })).toEqual({ status: 'timeout', result: undefined, lastError: null });
    await until(() => waiting() === 1);
    const before = reads.length;
    s.db.run('UPDATE jobs SET status = 2, last_error = \'spam\' WHERE id = 1');
    wake(null);
    expect(await Promise.all(twice)).toEqual([
      { status: 'abuse', result: undefined, lastError: 'spam' },
      { status: 'abuse', result: undefined, lastError: 'spam' },
    ]);
    expect(reads.slice(before).map((ids) => ids.map(String))).toEqual([['1']]);
  });
});
