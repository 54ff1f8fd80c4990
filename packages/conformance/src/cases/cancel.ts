import { describe, expect, it } from 'vitest';
import { Queue, SchemaError } from '@statusq/core';
import { generateTableARows } from '@statusq/test-fixtures';
import { FAST, deferred, nextEvent, readRow, statusOf, waitFor, withDeadline, type TestEnv } from '../harness.js';
import { createJobs, createTableA, enqueueJobs } from '../tables.js';

export function cancelCases(env: () => TestEnv): void {
  describe('cancel (an operator fails pending and running rows for good)', () => {
    it('pending rows cancelled end failed with the reason and never run; the others run', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const ids = await enqueueJobs(queue, ['a', 'b', 'c']);
      const report = await queue.cancel([ids[0]!, ids[2]!], 'not wanted');
      expect(report).toEqual({ cancelled: 2, notCancelled: [] });
      for (const id of [ids[0]!, ids[2]!]) {
        const row = await readRow(store, 'jobs', id);
        expect(statusOf(row)).toBe(queue.table.codes.failed);
        expect(row.last_error).toBe('cancelled: not wanted');
        expect(row.finished_at).not.toBeNull();
        expect(Number(row.attempt_count ?? 0)).toBe(0);
      }
      const ran: string[] = [];
      const w = await env().startWorker({ store, table: { table: 'jobs' }, ...FAST, handler: (job) => void ran.push(String(job.id)) });
      await waitFor('the row not cancelled to be done', async () => statusOf(await readRow(store, 'jobs', ids[1])) === queue.table.codes.done);
      await w.worker.stop(5000);
      await w.done;
      expect(ran).toEqual([ids[1]]);
      for (const id of [ids[0]!, ids[2]!]) expect(statusOf(await readRow(store, 'jobs', id))).toBe(queue.table.codes.failed);
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('ids it cannot cancel are reported each with its reason: unknown, done, already failed; the rest are cancelled', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const ids = await enqueueJobs(queue, ['one', 'other']);
      // The row the claim takes (whichever the table's order gives first) is done; the other stays pending.
      const claimed = await queue.claim({ limit: 1, token: 'A' });
      const done = String(claimed.rows[0]!.id);
      const pending = ids.find((id) => id !== done);
      expect((await queue.apply([queue.sql.complete(done, 'A', null)]))[0]!.affected).toBe(1);
      const first = await queue.cancel([done, '999999', pending!], 'tidy');
      expect(first.cancelled).toBe(1);
      expect(first.notCancelled.map(({ id, reason }) => [String(id), reason])).toEqual([
        [done, 'status done'],
        ['999999', 'not found'],
      ]);
      // Cancelled once, a row is failed: a second cancel leaves it (and its first reason) as they are.
      const again = await queue.cancel([pending!], 'twice');
      expect(again.cancelled).toBe(0);
      expect(again.notCancelled.map(({ id, reason }) => [String(id), reason])).toEqual([[pending, 'status failed']]);
      expect((await readRow(store, 'jobs', pending)).last_error).toBe('cancelled: tidy');
      expect(statusOf(await readRow(store, 'jobs', done))).toBe(queue.table.codes.done);
      await env().closeStores();
    });

    it("a cancelled claim's holder can write nothing more: its settles, heartbeat and release affect 0 rows", async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const [id] = await enqueueJobs(queue, ['held']);
      expect((await queue.claim({ limit: 1, token: 'A' })).rows.map((r) => String(r.id))).toEqual([id]);
      expect((await queue.cancel([id!], 'stop')).cancelled).toBe(1);
      const late = await queue.apply([
        queue.sql.complete(id!, 'A', '"late"'),
        queue.sql.giveUp(id!, 'A', 'late'),
        queue.sql.abuse(id!, 'A', 'late'),
        queue.sql.retry(id!, 'A', 'late', 0),
        queue.sql.release(id!, 'A'),
        queue.sql.heartbeat(id!, 'A'),
      ]);
      expect(late.map((r) => r.affected)).toEqual([0, 0, 0, 0, 0, 0]);
      const row = await readRow(store, 'jobs', id);
      expect(statusOf(row)).toBe(queue.table.codes.failed);
      expect(row.last_error).toBe('cancelled: stop');
      expect(row.result).toBeNull();
      await env().closeStores();
    });

    it("a running row cancelled: its handler's signal aborts with the reason at the next heartbeat, the row ends failed, and the handler's late return revives nothing", async () => {
      const workerStore = await env().store('worker store');
      const operatorStore = await env().store('operator store');
      const queue = await createJobs(workerStore);
      const [id] = await enqueueJobs(queue, ['long']);
      const operator = await Queue.open(operatorStore, { table: 'jobs' });
      const started = deferred();
      const aborted = deferred<unknown>();
      let runs = 0;
      const w = await env().startWorker({
        store: workerStore,
        table: { table: 'jobs' },
        ...FAST,
        // A lease that outlasts the test and no reaping: only the cancel moves the row; the heartbeat finds it.
        leaseMs: 60_000,
        reapIntervalMs: 60_000,
        heartbeatMs: 20,
        maxAttempts: 3,
        concurrency: 1,
        handler: async (_job, ctx) => {
          runs++;
          const signalled = new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
          started.resolve();
          await signalled;
          aborted.resolve(ctx.signal.reason);
          // What a careless handler does after the abort: returns a result, which must not make the row done.
          return 'late';
        },
      });
      await withDeadline(started.promise, 10_000, 'the handler to start');
      const cancelledEvent = nextEvent(w.worker, 'cancelled');
      expect(await operator.cancel([id!], 'user asked')).toEqual({ cancelled: 1, notCancelled: [] });
      const reason = await withDeadline(aborted.promise, 5000, 'the handler signal to abort');
      expect(reason).toBeInstanceOf(Error);
      expect((reason as Error).message).toBe('cancelled: user asked');
      const event = await withDeadline(cancelledEvent, 5000, 'the cancelled event');
      expect(String(event.job.id)).toBe(id);
      expect(event.reason).toBe('cancelled: user asked');
      await w.worker.stop(5000);
      const counters = await w.done;
      expect(counters.completed + counters.failed + counters.retried + counters.claimLost).toBe(0);
      expect(runs).toBe(1);
      const row = await readRow(operatorStore, 'jobs', id);
      expect(statusOf(row)).toBe(queue.table.codes.failed);
      expect(row.last_error).toBe('cancelled: user asked');
      expect(row.result).toBeNull();
      expect(Number(row.attempt_count ?? 0)).toBe(0);
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('a table without a last_error column is a SchemaError naming the migration, and no row moves', async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, generateTableARows(2));
      const queue = await Queue.open(store, { table: 'table_a' });
      const error = await queue.cancel([1], 'x').then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(SchemaError);
      expect((error as SchemaError).message).toMatch(/last_error.*migrate --with retries/);
      expect(statusOf(await readRow(store, 'table_a', 1))).toBeNull();
      await env().closeStores();
    });
  });
}
