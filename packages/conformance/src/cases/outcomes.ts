import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, type Handler, type Queue, type Row } from '@statusq/core';

type WaitForOutcome = Awaited<ReturnType<Queue['waitFor']>>;
import { generateTableARows } from '@statusq/test-fixtures';
import { FAST, Ledger, countsOf, idKey, readRow, readRows, statusOf, withDeadline, type TestEnv } from '../harness.js';
import { createJobs, createTableA, enqueueJobs, insertJobsAt } from '../tables.js';
import { childScript } from '../child-handle.js';
import type { ChildWorkerArgs, ChildWorkerResult } from '../child-worker.js';

type Waited = { outcome: WaitForOutcome; at: number };

export function outcomeCases(env: () => TestEnv): void {
  describe('poison jobs', () => {
    it('without retry columns (the seed), a poison row ends 0 after exactly one attempt and the other rows end done', async () => {
      const store = await env().store();
      const rows = generateTableARows(60, { poisonEvery: 10, abuseEvery: 0 });
      await createTableA(env().fixtures, store, rows);
      const ledger = new Ledger();
      const w = await env().startWorker({
        store,
        table: { table: 'table_a' },
        concurrency: 2,
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job) => {
          ledger.record(job);
          if (job.row.kind === 'poison') throw new Error(`unreachable host for ${String(job.row.url)}`);
          return 'ok';
        },
      });
      const counters = await withDeadline(w.done, 30_000, 'the worker to drain table_a');
      expect(ledger.notExactlyOnce(rows.map((r) => r.id))).toEqual([]);
      const byId = new Map((await readRows(store, 'table_a')).map((r) => [idKey(r.id), r]));
      for (const row of rows) expect(statusOf(byId.get(String(row.id))), `row ${row.id} (${row.kind})`).toBe(row.kind === 'poison' ? 0 : 1);
      expect(counters.failed).toBe(6);
      expect(counters.completed).toBe(54);
      expect(counters.retried).toBe(0);
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('with retry columns and maxAttempts 3, a poison row ends 0 after exactly 3 attempts with last_error and attempt_count 3, without blocking the other rows', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const now = Date.now();
      // The poison row is the newest, so a newest-first queue meets it first.
      await insertJobsAt(queue, [
        { id: 1, date: new Date(now - 1000), payload: { poison: true } },
        ...Array.from({ length: 10 }, (_, i) => ({ id: i + 2, date: new Date(now - 10_000 - i * 1000), payload: { poison: false } })),
      ]);
      const ledger = new Ledger();
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        concurrency: 1,
        batch: 1,
        maxAttempts: 3,
        retryDelayMs: 200,
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job) => {
          ledger.record(job);
          if ((job.payload as { poison: boolean }).poison) throw new Error('unreachable host');
          return 'ok';
        },
      });
      const counters = await withDeadline(w.done, 30_000, 'the worker to drain the queue');
      expect(ledger.attempts.get('1')).toEqual([1, 2, 3]);
      const poison = await readRow(store, 'jobs', 1);
      expect(statusOf(poison)).toBe(0);
      expect(Number(poison.attempt_count)).toBe(3);
      expect(poison.last_error).toBe('Error: unreachable host');
      expect(poison.finished_at).not.toBeNull();
      const others = Array.from({ length: 10 }, (_, i) => i + 2);
      expect(ledger.notExactlyOnce(others)).toEqual([]);
      expect(await countsOf(store, 'jobs')).toEqual({ pending: 0, processing: 0, done: 10, abuse: 0, failed: 1, other: 0 });
      // Not blocked: the first attempt came first, and other rows ran while its retry waited.
      const order = ledger.order.map((e) => `${e.id}#${e.attempt}`);
      expect(order[0]).toBe('1#1');
      expect(order.indexOf('2#1')).toBeLessThan(order.indexOf('1#2'));
      expect(counters).toMatchObject({ completed: 10, failed: 1, retried: 2 });
      await env().closeStores();
    });
  });

  describe('results', () => {
    it('completions settled together store each row its own result (a store with groupedResults shares one UPDATE), and one that returned nothing stores NULL', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const ids = await enqueueJobs(
        queue,
        Array.from({ length: 40 }, (_, n) => ({ n })),
      );
      // Distinct values, some with quotes, a backslash and non-ASCII text, every third one nothing at all.
      const resultOf = (n: number) => (n % 3 === 0 ? undefined : { n, note: `it's "row" ${n} \\ été ${'x'.repeat(n)}` });
      const handler: Handler = async (job) => resultOf((job.payload as { n: number }).n);
      // One worker whose slots all finish within a tick of each other: their completions reach the same flush.
      const w = await env().startWorker({ store, table: { table: 'jobs' }, concurrency: 20, batch: 20, exitWhenEmpty: true, ...FAST, handler });
      const counters = await withDeadline(w.done, 30_000, 'the worker to drain the queue');
      expect(counters.completed).toBe(40);
      for (const [n, id] of ids.entries()) {
        const row = await readRow(store, 'jobs', id);
        const expected = resultOf(n);
        expect({ n, status: statusOf(row), result: row.result === null ? null : JSON.parse(String(row.result)) }).toEqual({ n, status: 1, result: expected ?? null });
      }
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });
  });

  describe('abuse and giveUp', () => {
    it('abuse ends in 2 via ctx.abuse(), return ctx.abuse(), throw ctx.abuse() and the isAbuse rule (handler not called); giveUp ends in 0 with no retry', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const modes = ['call', 'return', 'throw', 'call-then-throw', 'rule', 'giveUp', 'throw-giveUp', 'ok'] as const;
      const ids = await enqueueJobs(
        queue,
        modes.map((mode) => ({ mode })),
      );
      const idOf = Object.fromEntries(modes.map((m, i) => [m, ids[i]!])) as Record<(typeof modes)[number], string>;
      const ledger = new Ledger();
      const handler: Handler = async (job, ctx) => {
        ledger.record(job);
        switch ((job.payload as { mode: string }).mode) {
          case 'call':
            ctx.abuse('flagged: call');
            return { ignored: true };
          case 'return':
            return ctx.abuse();
          case 'throw':
            throw ctx.abuse('flagged: throw');
          case 'call-then-throw':
            ctx.abuse('flagged first');
            throw new Error('and then failed');
          case 'giveUp':
            return ctx.giveUp('not worth retrying');
          case 'throw-giveUp':
            throw ctx.giveUp('thrown giveUp');
          default:
            return 'fine';
        }
      };
      const ruleSaw: Row[] = [];
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        maxAttempts: 3,
        retryDelayMs: 10,
        exitWhenEmpty: true,
        ...FAST,
        handler,
        isAbuse: (row) => {
          ruleSaw.push(row);
          return String(row.payload).includes('"rule"');
        },
      });
      const counters = await withDeadline(w.done, 30_000, 'the worker to drain the queue');
      const row = async (mode: (typeof modes)[number]) => readRow(store, 'jobs', idOf[mode]);
      const expectRow = async (mode: (typeof modes)[number], status: number, lastError: string | null, attempts: number) => {
        const r = await row(mode);
        expect({ mode, status: statusOf(r), lastError: r.last_error, attempts: Number(r.attempt_count) }).toEqual({ mode, status, lastError, attempts });
      };
      await expectRow('call', 2, 'flagged: call', 0);
      await expectRow('return', 2, 'abuse', 0);
      await expectRow('throw', 2, 'flagged: throw', 0);
      await expectRow('call-then-throw', 2, 'flagged first', 0);
      await expectRow('rule', 2, 'isAbuse rule', 0);
      await expectRow('giveUp', 0, 'not worth retrying', 1);
      await expectRow('throw-giveUp', 0, 'thrown giveUp', 1);
      await expectRow('ok', 1, null, 0);
      expect((await row('call')).result).toBeNull();
      // The rule ran on every row; the handler on every row but the one the rule judged abusive, once each.
      expect(ruleSaw).toHaveLength(modes.length);
      expect(ledger.count(idOf.rule)).toBe(0);
      expect(ledger.notExactlyOnce(modes.filter((m) => m !== 'rule').map((m) => idOf[m]))).toEqual([]);
      expect(counters).toMatchObject({ abused: 5, failed: 2, completed: 1, retried: 0 });
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });
  });

  describe('waitFor', () => {
    it('resolves with done and the parsed result once a worker ran the row, and with failed or abuse and last_error for rows given up or flagged', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const [ok, gaveUp, flagged] = await enqueueJobs(queue, [{ mode: 'ok' }, { mode: 'giveUp' }, { mode: 'abuse' }]);
      // Each waits before any worker runs: the rows are pending, so each must be woken by its settle.
      const waits = [ok!, gaveUp!, flagged!].map((id) => queue.waitFor(id, { timeoutMs: 30_000 }).then((outcome) => ({ outcome, at: performance.now() })));
      expect(await queue.waitFor(ok!, { timeoutMs: 0 })).toEqual({ status: 'timeout', result: undefined, lastError: null });
      const handler: Handler = async (job, ctx) => {
        const mode = (job.payload as { mode: string }).mode;
        if (mode === 'giveUp') return ctx.giveUp('not worth retrying');
        if (mode === 'abuse') return ctx.abuse('flagged: abuse');
        return { mode, note: 'it\'s "done"' };
      };
      const w = await env().startWorker({ store, table: { table: 'jobs' }, concurrency: 1, batch: 1, exitWhenEmpty: true, ...FAST, handler });
      await withDeadline(w.done, 30_000, 'the worker to drain the queue');
      const drainedAt = performance.now();
      const [done, failed, abuse] = (await withDeadline(Promise.all(waits), 5_000, 'waitFor to see every settle')) as [Waited, Waited, Waited];
      expect(done.outcome).toEqual({ status: 'done', result: { mode: 'ok', note: 'it\'s "done"' }, lastError: null });
      expect(failed.outcome).toEqual({ status: 'failed', result: undefined, lastError: 'not worth retrying' });
      expect(abuse.outcome).toEqual({ status: 'abuse', result: undefined, lastError: 'flagged: abuse' });
      // Bounded by the backoff (at most 1 s between reads), not by the 30 s timeout.
      for (const { at } of [done, failed, abuse]) expect(at - drainedAt).toBeLessThan(1_500);
      expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('resolves each waiter with its own row\'s outcome once a worker in another process settles it, many waiters sharing one watcher', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const payloads = Array.from({ length: 24 }, (_, n) => ({ n }));
      const ids = await enqueueJobs(queue, payloads);
      // Every row is pending as its waits begin, so each outcome comes from a settle committed elsewhere; two
      // waiters on one row both hear it.
      const waits = [...ids, ids[0]!].map((id) => queue.waitFor(id, { timeoutMs: 60_000 }));
      const handler = join(env().tempDir(), 'settle.mjs');
      writeFileSync(
        handler,
        [
          'export default async function handle(job, ctx) {',
          '  if (job.payload.n % 3 === 2) return ctx.giveUp(`no ${job.payload.n}`);',
          '  return { doubled: job.payload.n * 2 };',
          '}',
          '',
        ].join('\n'),
      );
      const child = env().spawnChild(
        childScript('child-worker.js'),
        { adapterModule: env().adapterModulePath, url: env().url, table: { table: 'jobs' }, handlerPath: handler, concurrency: 4, worker: { ...FAST, exitWhenEmpty: true } } satisfies ChildWorkerArgs,
        {},
        'the settling worker process',
      );
      const outcomes = await withDeadline(Promise.all(waits), 60_000, 'waitFor to see every settle of the other process');
      expect((await child.result<ChildWorkerResult>(60_000)).counters).toMatchObject({ completed: 16, failed: 8 });
      const expected = (n: number): WaitForOutcome => (n % 3 === 2 ? { status: 'failed', result: undefined, lastError: `no ${n}` } : { status: 'done', result: { doubled: n * 2 }, lastError: null });
      expect(outcomes).toEqual([...payloads.map(({ n }) => expected(n)), expected(0)]);
      await env().closeStores();
    });

    it('rejects at once with a ConfigError for an id no row has, and for a bad timeout', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      await enqueueJobs(queue, [{ n: 1 }]);
      const started = performance.now();
      await expect(queue.waitFor(987_654_321, { timeoutMs: 30_000 })).rejects.toThrow(ConfigError);
      await expect(queue.waitFor('not an id', { timeoutMs: 30_000 })).rejects.toThrow(/no row of jobs has id not an id/);
      expect(performance.now() - started).toBeLessThan(5_000);
      await expect(queue.waitFor(1, { timeoutMs: -1 })).rejects.toThrow(ConfigError);
      await env().closeStores();
    });

    it('resolves with status timeout once timeoutMs runs out on a pending row, and rejects with the signal reason when aborted', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const [id] = await enqueueJobs(queue, [{ n: 1 }]);
      const started = performance.now();
      expect(await queue.waitFor(id!, { timeoutMs: 200 })).toEqual({ status: 'timeout', result: undefined, lastError: null });
      const took = performance.now() - started;
      expect(took).toBeGreaterThanOrEqual(199);
      expect(took).toBeLessThan(5_000);

      const controller = new AbortController();
      const reason = new Error('the caller stopped waiting');
      const waiting = queue.waitFor(id!, { signal: controller.signal });
      const outcome = waiting.then(() => 'resolved', (error: unknown) => error);
      // A round trip of our own, so the wait is under way (past its first read) when the signal aborts.
      await queue.counts();
      const abortedAt = performance.now();
      controller.abort(reason);
      expect(await withDeadline(outcome, 5_000, 'waitFor to end on abort')).toBe(reason);
      expect(performance.now() - abortedAt).toBeLessThan(1_500);
      await expect(queue.waitFor(id!, { signal: controller.signal })).rejects.toBe(reason);
      expect(statusOf(await readRow(store, 'jobs', id!))).toBeNull();
      await env().closeStores();
    });
  });
}
