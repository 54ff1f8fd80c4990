import { describe, expect, it } from 'vitest';
import { Queue, type Job, type Store } from '@statusq/core';
import { FAST, deferred, nextEvent, readRow, statusOf, waitFor, withDeadline, type TestEnv } from '../harness.js';
import { createJobs, enqueueJobs, retoken } from '../tables.js';
import { claimAndReap } from './state-machine.js';

/** Worker options under which only a rival moves a claim: a lease that outlasts the test, and no reaping of its own. */
const ONLY_THE_RIVAL_MOVES_CLAIMS = { table: { table: 'jobs' }, leaseMs: 60_000, reapIntervalMs: 60_000, ...FAST } as const;

/**
 * A worker's store and a rival's (connections of its own) on one `jobs` table holding `payloads`: the rival
 * reaps and claims again from under the worker.
 */
async function workerAndRival(env: () => TestEnv, payloads: readonly string[]): Promise<{ workerStore: Store; rivalStore: Store; rival: Queue; queue: Queue; ids: string[] }> {
  const workerStore = await env().store('worker store');
  const rivalStore = await env().store('rival store');
  const queue = await createJobs(workerStore);
  const ids = await enqueueJobs(queue, payloads);
  return { workerStore, rivalStore, queue, ids, rival: await Queue.open(rivalStore, { table: 'jobs' }) };
}

export function fencingCases(env: () => TestEnv): void {
  describe('guarded settles with fencing tokens', () => {
    it('after a lease is reaped and the row claimed again with token B, every settle with token A affects 0 and B settles', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const [id] = await enqueueJobs(queue, ['fenced']);
      expect(await claimAndReap(queue, 'A')).toBe(id);
      const again = await queue.claim({ limit: 1, token: 'B' });
      expect(again.rows.map((r) => String(r.id))).toEqual([id]);
      expect(again.rows[0]!.worker_id).toBe('B');

      const byA = await queue.apply([
        queue.sql.complete(id!, 'A', '"from A"'),
        queue.sql.giveUp(id!, 'A', 'from A'),
        queue.sql.abuse(id!, 'A', 'from A'),
        queue.sql.retry(id!, 'A', 'from A', 0),
        queue.sql.release(id!, 'A'),
        queue.sql.heartbeat(id!, 'A'),
      ]);
      expect(byA.map((r) => r.affected)).toEqual([0, 0, 0, 0, 0, 0]);
      const held = await readRow(store, 'jobs', id);
      expect(statusOf(held)).toBe(queue.table.codes.processing);
      expect(held.worker_id).toBe('B');
      expect(held.result).toBeNull();

      expect((await queue.apply([queue.sql.heartbeat(id!, 'B'), queue.sql.complete(id!, 'B', '"from B"')])).map((r) => r.affected)).toEqual([1, 1]);
      const done = await readRow(store, 'jobs', id);
      expect(statusOf(done)).toBe(queue.table.codes.done);
      expect(done.result).toBe('"from B"');
      await env().closeStores();
    });

    it('a Worker whose lease was taken over emits claim-lost on settle, and its settle changes nothing', async () => {
      const { workerStore, rivalStore, rival, queue, ids: [id] } = await workerAndRival(env, ['slow']);
      const started = deferred<Job>();
      const gate = deferred();
      env().cleanups.push(() => gate.resolve());
      // The worker's own lease is long and it never heartbeats during the test: only the rival moves the row.
      const w = await env().startWorker({
        store: workerStore,
        ...ONLY_THE_RIVAL_MOVES_CLAIMS,
        concurrency: 1,
        heartbeatMs: 60_000,
        handler: async (job) => {
          started.resolve(job);
          await gate.promise;
          return 'late';
        },
      });
      const job = await withDeadline(started.promise, 10_000, 'the handler to start');
      expect(String(job.id)).toBe(id);
      const tokenA = String((await readRow(rivalStore, 'jobs', id)).worker_id);
      expect(tokenA.startsWith(w.worker.workerId)).toBe(true);

      await waitFor('the rival to reap the claim', async () => (await rival.reapExpired(0, 1000)).charged === 1);
      const taken = await rival.claim({ limit: 1, token: 'B' });
      expect(taken.rows.map((r) => String(r.id))).toEqual([id]);

      const lost = nextEvent(w.worker, 'claim-lost');
      gate.resolve();
      const event = await lost;
      expect(event.during).toBe('settle');
      expect(String(event.job.id)).toBe(id);
      const row = await readRow(rivalStore, 'jobs', id);
      expect(statusOf(row)).toBe(queue.table.codes.processing);
      expect(row.worker_id).toBe('B');
      expect(row.result).toBeNull();

      await w.worker.stop(5000);
      const counters = await w.done;
      expect(counters.claimLost).toBe(1);
      expect(counters.completed).toBe(0);
      expect(w.errors).toEqual([]);
      expect((await rival.apply([rival.sql.complete(id!, 'B', null)]))[0]!.affected).toBe(1);
      await env().closeStores();
    });

    it('completions grouped into one UPDATE report each row exactly: rows taken over are claim-lost, the rest done', async () => {
      const { workerStore, rivalStore, rival, queue, ids } = await workerAndRival(env, ['a', 'b', 'c', 'd']);
      const gate = deferred();
      env().cleanups.push(() => gate.resolve());
      let running = 0;
      const allStarted = deferred();
      // No result is returned, so the four completions under one claim token share one guarded UPDATE.
      const w = await env().startWorker({
        store: workerStore,
        ...ONLY_THE_RIVAL_MOVES_CLAIMS,
        concurrency: 4,
        batch: 4,
        heartbeatMs: 60_000,
        handler: async () => {
          if (++running === 4) allStarted.resolve();
          await gate.promise;
        },
      });
      await withDeadline(allStarted.promise, 10_000, 'four handlers to start');
      const tokens = new Set((await Promise.all(ids.map((id) => readRow(rivalStore, 'jobs', id)))).map((r) => String(r.worker_id)));
      expect(tokens.size).toBe(1);
      const stolen = ids.slice(0, 2);
      await retoken(rival, stolen, 'B');

      const lost: string[] = [];
      w.worker.on('claim-lost', ({ job }) => lost.push(String(job.id)));
      gate.resolve();
      await waitFor('four settles', () => w.worker.counters.completed + w.worker.counters.claimLost === 4);
      expect(lost.sort()).toEqual([...stolen].sort());
      expect(w.worker.counters.completed).toBe(2);
      for (const id of stolen) {
        const row = await readRow(rivalStore, 'jobs', id);
        expect(statusOf(row)).toBe(queue.table.codes.processing);
        expect(row.worker_id).toBe('B');
      }
      for (const id of ids.slice(2)) expect(statusOf(await readRow(rivalStore, 'jobs', id))).toBe(queue.table.codes.done);
      await w.worker.stop(5000);
      await w.done;
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('a heartbeat that finds its claim taken over emits claim-lost and aborts the job signal', async () => {
      const { workerStore, rivalStore, rival, queue, ids: [id] } = await workerAndRival(env, ['long']);
      const started = deferred();
      const aborted = deferred<unknown>();
      // The handler holds its slot until the end, so the worker cannot claim the reaped row again before the rival.
      const gate = deferred();
      env().cleanups.push(() => gate.resolve());
      const w = await env().startWorker({
        store: workerStore,
        ...ONLY_THE_RIVAL_MOVES_CLAIMS,
        concurrency: 1,
        heartbeatMs: 20,
        handler: async (_job, ctx) => {
          started.resolve();
          ctx.signal.addEventListener('abort', () => aborted.resolve(ctx.signal.reason), { once: true });
          await gate.promise;
        },
      });
      await withDeadline(started.promise, 10_000, 'the handler to start');
      const lost = nextEvent(w.worker, 'claim-lost');
      await waitFor('the rival to reap the claim', async () => (await rival.reapExpired(0, 1000)).charged === 1);
      // A skip-locked claim passes over a row that the worker's heartbeat UPDATE holds at that instant: try again.
      let taken: string[] = [];
      await waitFor('the rival to claim the reaped row', async () => (taken = (await rival.claim({ limit: 1, token: 'B' })).rows.map((r) => String(r.id))).length > 0);
      expect(taken).toEqual([id]);
      const event = await lost;
      expect(event.during).toBe('heartbeat');
      expect(String(await withDeadline(aborted.promise, 5000, 'the job signal to abort'))).toMatch(/claim lost/);
      gate.resolve();
      await w.worker.stop(5000);
      const counters = await w.done;
      expect(counters.claimLost).toBe(1);
      expect(counters.completed).toBe(0);
      const row = await readRow(rivalStore, 'jobs', id);
      expect(statusOf(row)).toBe(queue.table.codes.processing);
      expect(row.worker_id).toBe('B');
      await env().closeStores();
    });
  });
}
