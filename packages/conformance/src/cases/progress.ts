import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, SchemaError, initTable, type Handler, type Store } from '@statusq/core';
import { PROGRESS_INTERVAL_MS } from '@statusq/core/tools';
import { FAST, deferred, readRow, waitFor, withDeadline, type TestEnv } from '../harness.js';
import { createJobs, enqueueJobs } from '../tables.js';

/** A store that counts the progress UPDATEs sent through it. */
function countingProgress(inner: Store): { store: Store; writes: () => number } {
  let writes = 0;
  const counted = (sql: string) => {
    if (/^UPDATE .* SET .progress. = /.test(sql)) writes++;
  };
  const store: Store = Object.assign(Object.create(inner) as Store, {
    execute: (s: Parameters<Store['execute']>[0]) => {
      counted(s.sql);
      return inner.execute(s);
    },
    executeBatch: (list: Parameters<Store['executeBatch']>[0]) => {
      list.forEach((s) => counted(s.sql));
      return inner.executeBatch(list);
    },
  });
  return { store, writes: () => writes };
}

async function progressOf(store: Store, id: string): Promise<unknown> {
  const row = await readRow(store, 'jobs', id);
  return row?.progress === null || row?.progress === undefined ? null : JSON.parse(String(row.progress));
}

export function progressCases(env: () => TestEnv): void {
  describe('progress (ctx.progress, migrate --with progress)', () => {
    it('a handler reporting in a tight loop writes the first value at once and the latest one after the interval, no more, visible while it runs', { timeout: 30_000 }, async () => {
      const setup = await env().store('setup store');
      await initTable(setup, 'jobs', { with: ['progress'] });
      const [id] = await enqueueJobs(await Queue.open(setup, { table: 'jobs' }), [{ n: 1 }]);
      const { store, writes } = countingProgress(await env().store('worker store'));
      const seen: unknown[] = [];
      const handler: Handler = async (_job, ctx) => {
        for (let i = 1; i <= 1000; i++) ctx.progress(i / 10);
        seen.push(await waitFor('the first value on the row', async () => (await progressOf(setup, id!)) ?? false));
        ctx.progress({ step: 'upload', done: 3, of: 4 });
        seen.push(await waitFor('the latest value on the row', async () => ((await progressOf(setup, id!)) as { step?: string } | null)?.step ?? false, { timeoutMs: 5 * PROGRESS_INTERVAL_MS + 5_000 }));
      };
      const w = await env().startWorker({ store, table: { table: 'jobs' }, handler, exitWhenEmpty: true, ...FAST });
      await withDeadline(w.done, 20_000, 'the worker to finish');
      // 0.1 at once; the 999 calls after it are one write (100) at most, which the object usually overtakes
      // before the interval ends: a thousand calls, two or three writes.
      expect(seen).toEqual([0.1, 'upload']);
      expect(writes()).toBeGreaterThanOrEqual(2);
      expect(writes()).toBeLessThanOrEqual(3);
      expect(await progressOf(setup, id!)).toEqual({ step: 'upload', done: 3, of: 4 });
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('a handler whose claim was taken over writes no progress (fenced like a settle); bad values throw ConfigError; a table without the column a SchemaError', { timeout: 30_000 }, async () => {
      const store = await env().store();
      await initTable(store, 'jobs', { with: ['progress'] });
      const [id] = await enqueueJobs(await Queue.open(store, { table: 'jobs' }), [{ n: 1 }]);
      const started = deferred();
      const taken = deferred();
      const thrown: string[] = [];
      const handler: Handler = async (_job, ctx) => {
        for (const bad of [101, -1, Number.NaN, undefined, null, 'x'.repeat(1_000), { big: 'y'.repeat(1_000) }]) {
          try {
            ctx.progress(bad);
            thrown.push('accepted');
          } catch (error) {
            thrown.push(error instanceof ConfigError ? error.message.replace(/, got .*$/, '').replace(/^(ctx\.progress: the value is) .*$/, '$1 ...') : String(error));
          }
        }
        started.resolve();
        await taken.promise;
        ctx.progress(50);
        ctx.progress(60);
        // Long enough for the first write and the one after the interval to have been sent, and refused.
        await new Promise((resolve) => setTimeout(resolve, 3 * PROGRESS_INTERVAL_MS));
        finished.resolve();
      };
      const finished = deferred();
      const { store: counted, writes } = countingProgress(await env().store('worker store'));
      // No exitWhenEmpty: the row stays processing under the other token, which a drain would wait for.
      const w = await env().startWorker({ store: counted, table: { table: 'jobs' }, handler, ...FAST });
      await withDeadline(started.promise, 10_000, 'the handler to start');
      const q = (n: string) => store.dialect.quoteIdentifier(n);
      await store.execute({ sql: `UPDATE ${q('jobs')} SET ${q('worker_id')} = 'someone-else' WHERE ${q('id')} = ${store.dialect.placeholder(1)}`, params: [id!] });
      taken.resolve();
      await withDeadline(finished.promise, 10_000, 'the handler to end');
      await w.worker.stop();
      expect(writes()).toBe(2);
      expect(thrown).toEqual([
        'ctx.progress: a number must be from 0 to 100',
        'ctx.progress: a number must be from 0 to 100',
        'ctx.progress: a number must be from 0 to 100',
        'ctx.progress: give a number from 0 to 100 or a JSON value',
        'ctx.progress: give a number from 0 to 100 or a JSON value',
        'ctx.progress: the value is ...',
        'ctx.progress: the value is ...',
      ]);
      expect(await progressOf(store, id!)).toBeNull();

      const plain = await createJobs(store, 'plain');
      const [other] = await enqueueJobs(plain, [{ n: 2 }]);
      let missing: unknown = null;
      const probe = await env().startWorker({
        store: await env().store('plain worker'),
        table: { table: 'plain' },
        handler: (_job, ctx) => {
          try {
            ctx.progress(1);
          } catch (error) {
            missing = error;
          }
        },
        exitWhenEmpty: true,
        ...FAST,
      });
      await withDeadline(probe.done, 10_000, 'the plain worker');
      expect(missing).toBeInstanceOf(SchemaError);
      expect(String((missing as Error).message)).toBe('table plain has no progress column, which ctx.progress needs (statusq migrate --with progress adds it)');
      expect(other).toBeDefined();
      await env().closeStores();
    });
  });
}
