import { skipFor } from '../skips.js';
import { Socket } from 'node:net';
import { describe, expect, it, type TestContext } from 'vitest';
import { StoreError, type Store } from '@statusq/core';
import { FAST, Ledger, countsOf, deferred, waitFor, withDeadline, type TestEnv } from '../harness.js';
import type { CallDeadlines, ConformanceOptions } from '../options.js';
import { TcpProxy } from '@statusq/test-fixtures';
import { createJobs, enqueueJobs } from '../tables.js';

/** Short deadlines, so that a call on the frozen network gives up within the test. */
const DEADLINES: CallDeadlines = { connectTimeoutMs: 1000, queryTimeoutMs: 1000 };
/**
 * How long after the freeze the first failed call may be reported: one deadline plus room for a loaded
 * machine. Without deadlines the report never comes (the driver waits on the silent socket for ever).
 */
const FIRST_ERROR_WITHIN_MS = DEADLINES.queryTimeoutMs + 4000;
const STOP_TIMEOUT_MS = 1000;
/**
 * Generous on purpose: the hand-back of the stuck claim is retried on the frozen database up to ten times,
 * each bounded by the 1 s deadline. What this tells apart is a stop that returns and one that never does.
 */
const STOP_MARGIN_MS = 25_000;
/** close() cuts sockets that do not answer after a short grace; this is far above that. */
const CLOSE_WITHIN_MS = 10_000;
const CASE_TIMEOUT_MS = 90_000;

/**
 * Sockets of this process connected to `port`: through the proxy, the store's connections. Node lists open
 * handles only through this undocumented call; a socket half-closed by end() still is one.
 */
function socketsTo(port: number): number {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.filter((handle) => handle instanceof Socket && handle.remotePort === port).length;
}

function isConnectionLost(error: unknown): boolean {
  return error instanceof StoreError && error.kind === 'ConnectionLost';
}

export function frozenNetworkCases(env: () => TestEnv, options: ConformanceOptions): void {
  /** A proxy in front of this test's database, closed after the test, and a store that reaches the database through it. */
  async function proxiedStore(ctx: TestContext, deadlines = DEADLINES): Promise<{ proxy: TcpProxy; store: Store }> {
    if (!options.throughProxy) skipFor(ctx, 'throughProxy');
    const route = options.throughProxy!(env().url, deadlines);
    const proxy = await TcpProxy.start(route.upstream);
    env().cleanups.push(() => proxy.close());
    const store = await env().store('store behind the proxy', route.via(proxy));
    return { proxy, store };
  }

  describe('a database that stops answering (TCP open, no packets)', () => {
    it(
      '[needs throughProxy] the network freezes mid-run: a call gives up within its deadline with ConnectionLost, reported as an error; after the thaw the worker finishes every row, none lost',
      async (ctx) => {
        // A connect deadline far above the wait below: what must report the freeze is the call stuck on a
        // connection that was already open, not the opening of a new one.
        const { proxy, store } = await proxiedStore(ctx, { ...DEADLINES, connectTimeoutMs: 30_000 });
        const setup = await env().store('setup store');
        const ids = await enqueueJobs(await createJobs(setup), Array.from({ length: 30 }, (_, n) => ({ n })));
        const ledger = new Ledger();
        const firstStarted = deferred();
        const release = deferred();
        env().cleanups.push(() => release.resolve());
        let first = true;
        const w = await env().startWorker({
          store,
          table: { table: 'jobs' },
          concurrency: 2,
          // A claim whose answer the freeze swallowed comes back by lease, within the test.
          leaseMs: 3000,
          exitWhenEmpty: true,
          ...FAST,
          handler: async (job) => {
            ledger.record(job);
            if (first) {
              first = false;
              firstStarted.resolve();
              await release.promise;
            }
          },
        });
        await withDeadline(firstStarted.promise, 10_000, 'the first job to start');
        const acceptedBefore = proxy.accepted;
        proxy.freeze();
        const frozenAt = Date.now();
        // The held job finishes now: its settle meets the frozen network too, as does the claim loop.
        release.resolve();
        const firstError = await waitFor('an error event after the freeze', () => w.errors[0], { timeoutMs: FIRST_ERROR_WITHIN_MS + 10_000 });
        const reportedAfterMs = Date.now() - frozenAt;
        expect(isConnectionLost(firstError.error), String(firstError.error)).toBe(true);
        expect(reportedAfterMs).toBeLessThan(FIRST_ERROR_WITHIN_MS);

        proxy.thaw();
        const counters = await withDeadline(w.done, 60_000, 'the worker to finish the queue after the thaw');
        expect(await countsOf(setup, 'jobs')).toEqual({ pending: 0, processing: 0, done: 30, abuse: 0, failed: 0, other: 0 });
        expect(ids.filter((id) => ledger.count(id) === 0)).toEqual([]);
        expect(counters.completed).toBeGreaterThanOrEqual(29);
        expect(w.errors.filter((e) => !isConnectionLost(e.error)).map((e) => `${e.during}: ${String(e.error)}`)).toEqual([]);
        // The connections that timed out were dropped, not handed out again: the worker needed new ones.
        expect(proxy.accepted).toBeGreaterThan(acceptedBefore);
        console.info(
          `[${options.name}] frozen network: first error after ${reportedAfterMs} ms (${firstError.during}), ${w.errors.length} errors survived, ` +
            `${proxy.accepted - acceptedBefore} connections opened after the freeze, 30 rows done`,
        );
        await env().closeStores();
      },
      CASE_TIMEOUT_MS,
    );

    it(
      '[needs throughProxy] stop(timeout) with the database frozen returns within the timeout plus a bounded margin, and the store closes',
      async (ctx) => {
        const { proxy, store } = await proxiedStore(ctx);
        const setup = await env().store('setup store');
        await enqueueJobs(await createJobs(setup), ['stuck', 'waiting']);
        await setup.close();
        const started = deferred();
        const never = deferred();
        env().cleanups.push(() => never.resolve());
        const w = await env().startWorker({
          store,
          table: { table: 'jobs' },
          concurrency: 1,
          ...FAST,
          handler: async () => {
            started.resolve();
            await never.promise; // ignores its signal: only the database may hold stop() up here
          },
        });
        await withDeadline(started.promise, 10_000, 'the job to start');
        proxy.freeze();
        const stopping = Date.now();
        await withDeadline(w.worker.stop(STOP_TIMEOUT_MS), STOP_TIMEOUT_MS + STOP_MARGIN_MS, 'stop() to return with the database frozen');
        const stopMs = Date.now() - stopping;
        await withDeadline(w.done, 1000, 'run() to resolve once stop() returned');
        const closing = Date.now();
        await withDeadline(store.close(), CLOSE_WITHIN_MS, 'store.close() to return with the database frozen');
        const closeMs = Date.now() - closing;
        // The hand-back could not reach the database: that is reported, not swallowed.
        expect(w.errors.some((e) => isConnectionLost(e.error))).toBe(true);
        console.info(`[${options.name}] frozen network: stop(${STOP_TIMEOUT_MS}) returned after ${stopMs} ms, close() after ${closeMs} ms`);
      },
      CASE_TIMEOUT_MS,
    );

    it('[needs throughProxy] store.close() with the database frozen returns and leaves no socket open: idle connections that never answer are cut after a short grace', async (ctx) => {
      const { proxy, store } = await proxiedStore(ctx);
      await createJobs(store);
      expect(socketsTo(proxy.port)).toBeGreaterThan(0);
      // The store now holds idle pooled connections; the server will never hear the goodbye on them.
      proxy.freeze();
      const closing = Date.now();
      await withDeadline(store.close(), CLOSE_WITHIN_MS, 'store.close() to return with the database frozen');
      const closeMs = Date.now() - closing;
      // A socket of the store's own left open, or half-closed and waiting for a goodbye, would keep a finished
      // process alive.
      await waitFor('every socket of the store to be closed', () => socketsTo(proxy.port) === 0, { timeoutMs: 5000 });
      console.info(`[${options.name}] frozen network: close() of an idle store returned after ${closeMs} ms`);
    });
  });
}
