import { describe, expect, it } from 'vitest';
import { Queue, type Job } from '@statusq/core';
import { generateTableARows } from '@statusq/test-fixtures';
import { FAST, Ledger, countsOf, deferred, readRow, statusOf, toMs, waitFor, withDeadline, type TestEnv } from '../harness.js';
import { createJobs, createTableA, enqueueJobs, forceRowState } from '../tables.js';

const LEASE_MS = 300;
/**
 * The heartbeat case's lease. With 300 ms and a 50 ms heartbeat, one renewal stalled past 250 ms (two cores,
 * every suite at once, one adapter's server behind) let the reaper take a healthy job in CI. The case proves renewal, not
 * speed: 1 s with a 100 ms heartbeat tolerates a 0.9 s stall and still runs the job four leases long.
 */
const HEARTBEAT_LEASE_MS = 1000;

export function leaseCases(env: () => TestEnv): void {
  describe('leases', () => {
    it('a row claimed by a worker that died (Queue.claim, never settled) is reaped after the lease and handled by another worker', async () => {
      const deadStore = await env().store('dead worker store');
      const store = await env().store('live worker store');
      // table_a with leases but no attempt counter: an expired claim can only go back to pending.
      const rows = generateTableARows(5, { poisonEvery: 0, abuseEvery: 0 });
      await createTableA(env().fixtures, deadStore, rows, { migrate: ['leases'] });
      const dead = await Queue.open(deadStore, { table: 'table_a' });
      const claimed = await dead.claim({ limit: 1, token: 'dead' });
      expect(claimed.rows).toHaveLength(1);
      const deadId = String(claimed.rows[0]!.id);
      await deadStore.close();

      const ledger = new Ledger();
      let reaped = 0;
      const w = await env().startWorker(
        {
          store,
          table: { table: 'table_a' },
          leaseMs: 150,
          reapIntervalMs: 20,
          exitWhenEmpty: true,
          ...FAST,
          handler: async (job) => {
            ledger.record(job);
          },
        },
        'live worker',
        (worker) => worker.on('reaped', (e) => (reaped += e.count)),
      );
      await withDeadline(w.done, 30_000, 'the live worker to reap the dead claim and drain the table');
      expect(ledger.notExactlyOnce(rows.map((r) => r.id))).toEqual([]);
      expect(reaped).toBe(1);
      expect(await countsOf(store, 'table_a')).toEqual({ pending: 0, processing: 0, done: 5, abuse: 0, failed: 0, other: 0 });
      expect(String((await readRow(store, 'table_a', deadId)).worker_id).startsWith(`${w.worker.workerId}:`)).toBe(true);
      await env().closeStores();
    });

    it('with attempt_count, an expired claim that has used its attempts goes to 0 instead (handler never called)', async () => {
      const deadStore = await env().store('dead worker store');
      const store = await env().store('live worker store');
      const queue = await createJobs(deadStore);
      const ids = await enqueueJobs(queue, ['a', 'b', 'c']);
      const claimed = await queue.claim({ limit: 1, token: 'dead' });
      const deadId = String(claimed.rows[0]!.id);
      // Two earlier attempts already ended in expired leases.
      await forceRowState(queue, deadId, { status: queue.table.codes.processing, attemptCount: 2 });
      await deadStore.close();

      const ledger = new Ledger();
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        maxAttempts: 3,
        // Long enough that the live worker's own claims outlast a loaded machine's stalls (at 100 ms one was
        // once reaped under it and ran twice), short enough that the dead claim expires at once.
        leaseMs: 500,
        reapIntervalMs: 20,
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job) => {
          ledger.record(job);
        },
      });
      await withDeadline(w.done, 30_000, 'the worker to reap the exhausted claim and drain the queue');
      expect(ledger.count(deadId)).toBe(0);
      expect(ledger.notExactlyOnce(ids.filter((id) => id !== deadId))).toEqual([]);
      const row = await readRow(store, 'jobs', deadId);
      expect(statusOf(row)).toBe(0);
      expect(Number(row.attempt_count)).toBe(3);
      expect(String(row.last_error)).toMatch(/lease expired/);
      expect(row.finished_at).not.toBeNull();
      await env().closeStores();
    });

    it(`heartbeats keep a job that runs past its lease (${HEARTBEAT_LEASE_MS} ms) alive: no reaper takes it, and it completes once`, async () => {
      const store = await env().store('worker store');
      const reaperStore = await env().store('reaper store');
      const queue = await createJobs(store);
      const [id] = await enqueueJobs(queue, ['long']);
      const reaper = await Queue.open(reaperStore, { table: 'jobs' });
      const started = deferred<Job>();
      const gate = deferred();
      env().cleanups.push(() => gate.resolve());
      let aborted = false;
      const ledger = new Ledger();
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        concurrency: 1,
        leaseMs: HEARTBEAT_LEASE_MS,
        heartbeatMs: 100,
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job, ctx) => {
          ledger.record(job);
          started.resolve(job);
          await gate.promise;
          aborted = ctx.signal.aborted;
          return 'finished';
        },
      });
      await withDeadline(started.promise, 10_000, 'the job to start');
      const begin = Date.now();
      const leaseStarts = new Set<number>();
      let reapedByOther = 0;
      // Run a reaper with the same lease for four leases' time; the job must stay claimed throughout.
      await waitFor(
        'four leases to pass with heartbeats',
        async () => {
          reapedByOther += (await reaper.reapExpired(HEARTBEAT_LEASE_MS, 3)).charged;
          const row = await readRow(reaperStore, 'jobs', id);
          if (statusOf(row) !== queue.table.codes.processing) throw new Error(`the running job left processing: status ${statusOf(row)}`);
          leaseStarts.add(toMs(row.claimed_at)!);
          return Date.now() - begin >= 4 * HEARTBEAT_LEASE_MS;
        },
        { timeoutMs: 20_000, intervalMs: 25 },
      );
      expect(reapedByOther).toBe(0);
      expect(leaseStarts.size).toBeGreaterThanOrEqual(4);
      gate.resolve();
      const counters = await withDeadline(w.done, 30_000, 'the job to complete');
      expect(aborted).toBe(false);
      expect(ledger.count(id)).toBe(1);
      expect(counters).toMatchObject({ completed: 1, claimLost: 0 });
      expect(statusOf(await readRow(store, 'jobs', id))).toBe(queue.table.codes.done);
      await env().closeStores();
    });

    it('control: without timely heartbeats the same long job is reaped, its worker gets claim-lost, and the row runs again', async () => {
      const store = await env().store('worker store');
      const reaperStore = await env().store('reaper store');
      const queue = await createJobs(store);
      const [id] = await enqueueJobs(queue, ['long']);
      const reaper = await Queue.open(reaperStore, { table: 'jobs' });
      const started = deferred();
      const gate = deferred();
      env().cleanups.push(() => gate.resolve());
      const ledger = new Ledger();
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        concurrency: 1,
        leaseMs: LEASE_MS,
        heartbeatMs: 60_000,
        reapIntervalMs: 60_000,
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job) => {
          ledger.record(job);
          started.resolve();
          await gate.promise;
        },
      });
      await withDeadline(started.promise, 10_000, 'the job to start');
      await waitFor('the lease to expire and be reaped', async () => (await reaper.reapExpired(LEASE_MS, 3)).charged === 1, { timeoutMs: 10_000, intervalMs: 25 });
      gate.resolve();
      const counters = await withDeadline(w.done, 30_000, 'the worker to run the row again');
      expect(counters.claimLost).toBe(1);
      expect(ledger.attempts.get(id!)).toEqual([1, 2]);
      expect(statusOf(await readRow(store, 'jobs', id))).toBe(queue.table.codes.done);
      await env().closeStores();
    });
  });
}
