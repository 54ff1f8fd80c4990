import { describe, expect, it, type TestContext } from 'vitest';
import { StoreError, type Store, type Worker } from '@statusq/core';
import { READ_ONLY_CHECK_MAX_MS } from '@statusq/core/tools';
import { FAST, Ledger, countsOf, deferred, waitFor, withDeadline, type StartedWorker, type TestEnv } from '../harness.js';
import type { ConformanceOptions, ReadOnlySwitch } from '../options.js';
import { skipFor } from '../skips.js';
import { createJobs, enqueueJobs } from '../tables.js';

/** The same store, counting the calls the database refused as read-only (each one a check of the worker's wait). */
function countingRefusals(inner: Store): Store & { refused(): number } {
  let refused = 0;
  const counted = async <T>(call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      if (error instanceof StoreError && error.kind === 'ReadOnly') refused++;
      throw error;
    }
  };
  const store: Store & { refused(): number } = {
    dialect: inner.dialect,
    capabilities: inner.capabilities,
    nativeClaim: inner.nativeClaim,
    execute: (s) => counted(() => inner.execute(s)),
    executeBatch: (s) => counted(() => inner.executeBatch(s)),
    describeTable: (t) => inner.describeTable(t),
    orderTimeEncoding: (c) => inner.orderTimeEncoding(c),
    close: () => inner.close(),
    refused: () => refused,
  };
  if (inner.transaction) store.transaction = (body) => counted(() => inner.transaction!(body));
  if (inner.waitForWork) store.waitForWork = (ms, signal, table) => inner.waitForWork!(ms, signal, table);
  return store;
}

/**
 * The most checks one wait schedule (a claim loop, or one settle flush) can make in `elapsedMs`: each pause is
 * at least max(poll interval, half of the doubling step, capped): what ReadOnlyWait.delay guarantees. A
 * worker has two such schedules (claims, settles); a tight loop would make elapsedMs / pollMs checks.
 */
function maxChecks(elapsedMs: number, pollMs: number): number {
  let checks = 1;
  for (let step = 0, at = 0; ; step++) {
    at += Math.max(pollMs, Math.min(READ_ONLY_CHECK_MAX_MS, pollMs * 2 ** step) / 2);
    if (at > elapsedMs) return checks;
    checks++;
  }
}

export function readOnlyCases(env: () => TestEnv, options: ConformanceOptions): void {
  /** The server's switch for this test, turned writable again after it whatever happened; skips without one. */
  function readOnlySwitch(ctx: TestContext): ReadOnlySwitch {
    if (!options.readOnlySwitch) skipFor(ctx, 'readOnlySwitch');
    const server = options.readOnlySwitch!(env().url);
    env().cleanups.push(() => server.off());
    return server;
  }

  function events(worker: Worker) {
    const seen = { readOnly: [] as Array<{ during: string; waitMs: number; error: unknown }>, writable: [] as number[] };
    worker.on('read-only', (e) => seen.readOnly.push(e));
    worker.on('writable', (e) => seen.writable.push(e.durationMs));
    return seen;
  }

  describe('read-only server', () => {
    it('[needs readOnlySwitch] a server turned read-only mid-run: each worker waits (one read-only event, no tight loop), one started meanwhile too, and once it takes writes again every job is done exactly once', async (ctx) => {
      const server = readOnlySwitch(ctx);
      const setup = await env().store('setup store');
      const queue = await createJobs(setup);
      const ids = await enqueueJobs(
        queue,
        Array.from({ length: 120 }, (_, n) => ({ n })),
      );
      const ledger = new Ledger();
      // The first 20 jobs run freely; the rest wait until the server is read-only, so every worker has claims
      // to settle and rows to claim while it is.
      const readOnlyNow = deferred();
      const workers: Array<{ started: StartedWorker; store: ReturnType<typeof countingRefusals>; seen: ReturnType<typeof events> }> = [];
      const startWorker = async (i: number) => {
        const store = countingRefusals(await env().store(`worker ${i + 1} store`));
        let seen!: ReturnType<typeof events>;
        const started = await env().startWorker(
          {
            store,
            table: { table: 'jobs' },
            concurrency: 4,
            exitWhenEmpty: true,
            readOnlyWaitMs: 60_000,
            ...FAST,
            handler: async (job) => {
              ledger.record(job);
              if (ledger.order.length > 20) await readOnlyNow.promise;
            },
          },
          `worker ${i + 1}`,
          (worker) => (seen = events(worker)),
        );
        workers.push({ started, store, seen });
      };
      await startWorker(0);
      await startWorker(1);
      await waitFor('20 jobs run before the server turns read-only', () => ledger.order.length > 20, { timeoutMs: 20_000 });
      await server.on();
      const readOnlyAt = performance.now();
      readOnlyNow.resolve();
      // Workers 1 and 2 hold claims whose settles now wait; worker 3, started on the read-only server (a
      // failover in progress when a worker starts), has free slots and pending rows: its claims wait.
      await startWorker(2);
      // The outage lasts a second, long enough for the backoff to show: a worker checking every poll
      // interval (20 ms) would make about 50 calls per schedule in it, the paced wait 8.
      await waitFor(
        'every worker to meet the read-only server, and the server to stay read-only for 1 s',
        () => workers.every((w) => w.seen.readOnly.length === 1) && performance.now() - readOnlyAt >= 1000,
        { timeoutMs: 20_000 },
      );
      const doneWhileReadOnly = (await countsOf(setup, 'jobs')).done;
      await server.off();
      const readOnlyMs = performance.now() - readOnlyAt;
      const counters = await withDeadline(Promise.all(workers.map((w) => w.started.done)), 60_000, 'the workers to drain the queue once the server takes writes again');

      expect(ledger.notExactlyOnce(ids)).toEqual([]);
      expect(await countsOf(setup, 'jobs')).toEqual({ pending: 0, processing: 0, done: ids.length, abuse: 0, failed: 0, other: 0 });
      expect(counters.reduce((n, c) => n + c.completed, 0)).toBe(ids.length);
      expect(counters.reduce((n, c) => n + c.claimLost, 0)).toBe(0);
      expect(workers[2]!.seen.readOnly[0]!.during).toBe('claim');
      for (const [i, w] of workers.entries()) {
        expect(w.seen.readOnly, `worker ${i + 1}'s read-only events`).toHaveLength(1);
        expect(w.seen.readOnly[0]!.waitMs).toBe(60_000);
        expect(w.seen.readOnly[0]!.error).toMatchObject({ kind: 'ReadOnly' });
        expect(w.seen.writable, `worker ${i + 1}'s writable events`).toHaveLength(1);
        expect(w.seen.writable[0]!).toBeGreaterThan(0);
        // Two schedules (the claim loop and the settles), each paced by the wait's backoff, plus one call
        // each already on its way when the server turned: a tight loop would be hundreds.
        expect(w.store.refused(), `worker ${i + 1}'s refused calls in ${Math.round(readOnlyMs)} ms`).toBeLessThanOrEqual(2 * maxChecks(readOnlyMs, FAST.pollMaxMs) + 2);
      }
      console.info(
        `[${options.name}] read-only for ${Math.round(readOnlyMs)} ms mid-run: ${ids.length} jobs done exactly once, ${doneWhileReadOnly} done before the switch, ` +
          `refused calls per worker ${workers.map((w) => w.store.refused()).join(', ')}, waits ${workers.map((w) => `${Math.round(w.seen.writable[0]!)} ms`).join(', ')}`,
      );
      await env().closeStores();
    });

    it('[needs readOnlySwitch] a server read-only past the wait: the run ends with ReadOnly after a paced wait, and its claims are recovered by lease', async (ctx) => {
      const server = readOnlySwitch(ctx);
      const setup = await env().store('setup store');
      const queue = await createJobs(setup);
      const ids = await enqueueJobs(
        queue,
        Array.from({ length: 10 }, (_, n) => ({ n })),
      );
      const ledger = new Ledger();
      const readOnlyNow = deferred();
      const WAIT_MS = 1500;
      const LEASE_MS = 1000;
      // The reaper keeps its own fixed interval whatever the server answers (one refused call per interval,
      // no tight loop): set here so the bounds below count its calls apart from the wait's paced checks.
      const REAP_MS = 500;
      const reapsWithin = (ms: number) => 1 + Math.floor(ms / REAP_MS);
      const store = countingRefusals(await env().store('worker store'));
      let seen!: ReturnType<typeof events>;
      const first = await env().startWorker(
        {
          store,
          table: { table: 'jobs' },
          concurrency: 2,
          leaseMs: LEASE_MS,
          reapIntervalMs: REAP_MS,
          readOnlyWaitMs: WAIT_MS,
          ...FAST,
          handler: async (job) => {
            ledger.record(job);
            await readOnlyNow.promise;
          },
        },
        'worker on the read-only server',
        (worker) => (seen = events(worker)),
      );
      await waitFor('two claimed jobs running', () => ledger.order.length === 2, { timeoutMs: 20_000 });
      const claimed = ledger.order.map((o) => o.id);
      await server.on();
      const readOnlyAt = performance.now();
      readOnlyNow.resolve();
      // A worker started on the read-only server: its claims (not settles) meet the wait's end.
      const claimingStore = countingRefusals(await env().store('claiming worker store'));
      let claimingSeen!: ReturnType<typeof events>;
      const claiming = await env().startWorker(
        { store: claimingStore, table: { table: 'jobs' }, concurrency: 2, leaseMs: LEASE_MS, reapIntervalMs: REAP_MS, readOnlyWaitMs: WAIT_MS, ...FAST, handler: async (job) => void ledger.record(job) },
        'worker started on the read-only server',
        (worker) => (claimingSeen = events(worker)),
      );
      const ended = (w: StartedWorker) =>
        w.done.then(
          () => null,
          (e: unknown) => e,
        );
      const errors = await withDeadline(Promise.all([ended(first), ended(claiming)]), WAIT_MS + 10_000, 'both runs to end with ReadOnly once the wait is spent');
      const endedMs = performance.now() - readOnlyAt;
      for (const error of errors) {
        expect(error).toBeInstanceOf(StoreError);
        expect((error as StoreError).kind).toBe('ReadOnly');
        expect((error as StoreError).message).toMatch(/read-only and did not take writes again within 1\.5 s/);
        // The adapter's refusal says what to check on that database; core names none.
        expect((error as StoreError).message).toMatch(/Last refusal: .*\bcheck\b/);
      }
      expect(endedMs).toBeGreaterThanOrEqual(WAIT_MS - 50);
      expect(endedMs).toBeLessThan(WAIT_MS + 5_000);
      expect(seen.readOnly.map((e) => e.during)).toEqual(['settle']);
      expect(claimingSeen.readOnly.map((e) => e.during)).toEqual(['claim']);
      expect([...seen.writable, ...claimingSeen.writable]).toEqual([]);
      const refused = store.refused();
      // Two schedules (claims, settles), each with its last check right at the bound, plus the reaper's calls.
      expect(refused, `refused calls in ${Math.round(endedMs)} ms`).toBeLessThanOrEqual(2 * (maxChecks(endedMs, FAST.pollMaxMs) + 1) + reapsWithin(endedMs));
      // One schedule (claims) with its last check at the bound, plus the reaper's calls.
      expect(claimingStore.refused(), `the claiming worker's refused calls in ${Math.round(endedMs)} ms`).toBeLessThanOrEqual(maxChecks(endedMs, FAST.pollMaxMs) + 1 + reapsWithin(endedMs));
      // Nothing was lost: the two claims stay in processing, the rest pending.
      expect(await countsOf(setup, 'jobs')).toMatchObject({ pending: ids.length - 2, processing: 2, done: 0 });

      await server.off();
      // The server is back: another worker reaps the expired claims and finishes everything.
      const second = await env().startWorker({
        store: await env().store('second worker store'),
        table: { table: 'jobs' },
        concurrency: 2,
        leaseMs: LEASE_MS,
        reapIntervalMs: 50,
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job) => void ledger.record(job),
      });
      await withDeadline(second.done, 30_000, 'a worker on the writable server to reap the expired claims and drain the queue');
      expect(await countsOf(setup, 'jobs')).toEqual({ pending: 0, processing: 0, done: ids.length, abuse: 0, failed: 0, other: 0 });
      // The two jobs whose settles the read-only server refused ran again (at-least-once); every other ran once.
      expect(ledger.notExactlyOnce(ids.filter((id) => !claimed.includes(id)))).toEqual([]);
      for (const id of claimed) expect(ledger.count(id), `runs of job ${id}`).toBe(2);
      console.info(
        `[${options.name}] read-only past a ${WAIT_MS} ms wait: both runs ended after ${Math.round(endedMs)} ms with ReadOnly, ` +
          `refused calls ${refused} (settling worker) and ${claimingStore.refused()} (claiming worker), 2 claims recovered by lease`,
      );
      await env().closeStores();
    });
  });
}
