import { describe, expect, it } from 'vitest';
import { StoreError, type WorkerEvents } from '@statusq/core';
import { FAST, countsOf, deferred, flushEventLoop, readRows, statusOf, withDeadline, type TestEnv } from '../harness.js';
import { createJobs, enqueueJobs } from '../tables.js';

function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

export function stopCases(env: () => TestEnv): void {
  describe('graceful stop', () => {
    it('stop() while jobs run stops claiming, lets them finish (done), and leaves nothing in processing', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      await enqueueJobs(
        queue,
        Array.from({ length: 10 }, (_, n) => ({ n })),
      );
      const gate = deferred();
      env().cleanups.push(() => gate.resolve());
      let running = 0;
      const allStarted = deferred();
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        concurrency: 4,
        ...FAST,
        handler: async () => {
          if (++running === 4) allStarted.resolve();
          await gate.promise;
          return 'finished';
        },
      });
      await withDeadline(allStarted.promise, 10_000, 'four jobs to start');
      const stopped = w.worker.stop(30_000);
      let stopResolved = false;
      void stopped.then(() => (stopResolved = true));
      await flushEventLoop(5);
      // The jobs still run, so neither stop() nor run() may have resolved.
      expect(stopResolved).toBe(false);
      expect(w.finished()).toBe(false);
      expect((await countsOf(store, 'jobs')).processing).toBe(4);
      gate.resolve();
      expect(await withDeadline(stopped, 10_000, 'stop() to resolve once the jobs finish')).toEqual({ drained: true, handedBack: 0, abandoned: 0 });
      const counters = await w.done;
      expect(counters).toMatchObject({ claimed: 4, completed: 4, released: 0 });
      expect(await countsOf(store, 'jobs')).toEqual({ pending: 6, processing: 0, done: 4, abuse: 0, failed: 0, other: 0 });
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('stop(timeout) with a handler that never finishes hands the row back to pending (NULL), aborts its signal, and run() resolves', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const [id] = await enqueueJobs(queue, ['stuck']);
      const started = deferred();
      const never = deferred();
      env().cleanups.push(() => never.resolve());
      let signal: AbortSignal | undefined;
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        concurrency: 1,
        ...FAST,
        handler: async (_job, ctx) => {
          signal = ctx.signal;
          started.resolve();
          await never.promise; // ignores the signal on purpose
        },
      });
      await withDeadline(started.promise, 10_000, 'the job to start');
      const report = await withDeadline(w.worker.stop(100), 10_000, 'stop(100) to give up on the stuck job');
      // The handler still runs in this process: the report says so, for the caller to exit.
      expect(report).toEqual({ drained: false, handedBack: 1, abandoned: 1 });
      const counters = await withDeadline(w.done, 1000, 'run() to resolve after stop');
      expect(counters).toMatchObject({ released: 1, completed: 0, failed: 0 });
      expect(signal?.aborted).toBe(true);
      const [row] = await readRows(store, 'jobs');
      expect(String(row!.id)).toBe(id);
      expect(statusOf(row)).toBeNull();
      expect(Number(row!.attempt_count)).toBe(0);
      // The handler finishing late changes nothing: the claim was handed back.
      never.resolve();
      await flushEventLoop(5);
      expect(statusOf((await readRows(store, 'jobs'))[0])).toBeNull();
      await env().closeStores();
    });

    // Regression: stop() used to leave its timeout timer running, which kept a drained process alive for
    // the whole timeout (30 s by default).
    it('a drained stop() leaves no timer behind that would keep the process alive', async () => {
      const store = await env().store();
      try {
        await createJobs(store);
        const before = activeTimers();
        const w = await env().startWorker({ store, table: { table: 'jobs' }, ...FAST, handler: async () => undefined });
        await w.worker.stop(20_000);
        await w.done;
        // Fewer is fine (a store's own timer from the set-up may have ended meanwhile); one more is the leak.
        expect(activeTimers()).toBeLessThanOrEqual(before);
      } finally {
        await env().closeStores();
      }
    });

    // Regression: the drain's wait for a settle in flight left a 1 s timer armed when the settle won the
    // race, so a process stopped mid-backlog lingered a second after its last line.
    it('a stop() mid-backlog, with settles in flight, leaves no timer behind once stop() and run() resolve', async () => {
      const store = await env().store();
      try {
        const queue = await createJobs(store);
        await enqueueJobs(queue, Array.from({ length: 40 }, (_, n) => ({ n })));
        const before = activeTimers();
        const release = deferred();
        env().cleanups.push(() => release.resolve());
        const eightRunning = deferred();
        let running = 0;
        const w = await env().startWorker({
          store,
          table: { table: 'jobs' },
          concurrency: 8,
          ...FAST,
          handler: async () => {
            if (++running === 8) eightRunning.resolve();
            await release.promise;
          },
        });
        await withDeadline(eightRunning.promise, 10_000, 'eight jobs to start');
        const stopped = w.worker.stop(20_000);
        // All eight finish at once: their completions reach the settler together as the drain waits for it.
        release.resolve();
        expect(await withDeadline(stopped, 20_000, 'stop() to drain')).toEqual({ drained: true, handedBack: 0, abandoned: 0 });
        await w.done;
        expect(activeTimers()).toBeLessThanOrEqual(before);
        expect(await countsOf(store, 'jobs')).toMatchObject({ processing: 0, done: 8, pending: 32 });
      } finally {
        await env().closeStores();
      }
    });

    it('a worker whose table is dropped under it ends run() with the database error instead of spinning', async () => {
      const store = await env().store('worker store');
      const other = await env().store('other store');
      const queue = await createJobs(store);
      await enqueueJobs(queue, ['before the drop']);
      const completed = deferred<WorkerEvents['completed']>();
      const w = await env().startWorker(
        { store, table: { table: 'jobs' }, ...FAST, handler: async () => 'ok' },
        'worker',
        (worker) => worker.on('completed', (e) => completed.resolve(e)),
      );
      await withDeadline(completed.promise, 10_000, 'the first job to complete');
      await other.execute({ sql: `DROP TABLE ${other.dialect.quoteIdentifier('jobs')}`, params: [] });
      const error = await withDeadline(
        w.done.then(
          () => null,
          (e: unknown) => e,
        ),
        20_000,
        'run() to give up on the missing table',
      );
      expect(error).toBeInstanceOf(StoreError);
      expect((error as StoreError).retryable).toBe(false);
      expect(w.errors.filter((e) => e.during === 'claim').length).toBeGreaterThan(0);
      expect(w.worker.counters.completed).toBe(1);
      await env().closeStores();
    });
  });
}
