import { describe, expect, it, type TestContext } from 'vitest';
import { ClaimLostError, JobTransactionError, Queue, StoreError, type Job, type JobContext, type Store } from '@statusq/core';
import { FAST, deferred, readRow, readRows, statusOf, waitFor, withDeadline, type Deferred, type TestEnv } from '../harness.js';
import type { ConformanceOptions, DisposableServer } from '../options.js';
import { createEffects, effectMismatches, effectsByJob, loadInsertEffect } from '../effects.js';
import { checkTableARun, countLedgerLines, readLedgerFile, startTableARun, type TableARun } from '../supervised-run.js';
import { createJobs, enqueueJobs, retoken } from '../tables.js';
import { skipFor } from '../skips.js';
import { delegatingStore } from '../latency.js';
import { withKnex, type KnexTrx } from './outbox.js';

/** Options under which only the test moves a claim: a lease and heartbeat that outlast it, no reaping. */
const NOTHING_ELSE_MOVES_CLAIMS = { table: { table: 'jobs' }, ...FAST, leaseMs: 60_000, heartbeatMs: 30_000, reapIntervalMs: 60_000 } as const;

/** Each row's status by id, for effectMismatches. */
async function statusesOf(store: Store, table: string): Promise<Map<string, number | null>> {
  return new Map((await readRows(store, table)).map((row) => [String(row.id), statusOf(row)]));
}

/** The same store, except that every lent transaction's COMMIT lands and its answer is lost (the connection dropped after it). */
function losingCommitAnswers(inner: Store): Store & { lost(): number } {
  let lost = 0;
  return {
    ...delegatingStore(inner),
    lendTransaction: async (body) => {
      await inner.lendTransaction!(body);
      lost++;
      throw new StoreError('ConnectionLost', 'the answer to COMMIT was lost (simulated)', 'TEST');
    },
    lost: () => lost,
  };
}

/**
 * ctx.transaction (everyday cases): a handler's writes and its row's move to done commit together, under the
 * claim token, or not at all.
 */
export function transactionCases(env: () => TestEnv, options: ConformanceOptions): void {
  describe('ctx.transaction (the handler writes and the settle commit together)', () => {
    it("the handler's write and the row's move to done commit together; the callback's value is the job's result and ctx.transaction's value", async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      await createEffects(store);
      const insertEffect = await loadInsertEffect();
      const ids = await enqueueJobs(queue, ['a', 'b', 'c', 'd', 'e']);
      const returned = new Map<string, unknown>();
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        ...FAST,
        concurrency: 3,
        exitWhenEmpty: true,
        handler: async (job: Job, ctx: JobContext) => {
          const value = await ctx.transaction(async (tx) => {
            await insertEffect(tx, job.id, process.pid);
            return { wrote: String(job.id) };
          });
          returned.set(String(job.id), value);
        },
      });
      const counters = await withDeadline(w.done, 20_000, 'the worker to drain the queue');
      expect(w.errors).toEqual([]);
      expect(counters.completed).toBe(5);
      expect(effectMismatches(await statusesOf(store, 'jobs'), await effectsByJob(store), queue.table.codes.done)).toEqual([]);
      for (const id of ids) {
        const row = await readRow(store, 'jobs', id);
        expect(statusOf(row)).toBe(queue.table.codes.done);
        expect(JSON.parse(String(row.result))).toEqual({ wrote: id });
        expect(row.finished_at).not.toBeNull();
        expect(returned.get(id)).toEqual({ wrote: id });
      }
      await env().closeStores();
    });

    it('a COMMIT that landed but whose answer was lost: the row is found done under the claim token, ctx.transaction resolves, and the job counts once, completed', async () => {
      const inner = await env().store();
      const queue = await createJobs(inner);
      await createEffects(inner);
      const insertEffect = await loadInsertEffect();
      const [id] = await enqueueJobs(queue, ['answer lost']);
      const store = losingCommitAnswers(inner);
      const returned = deferred<unknown>();
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        ...FAST,
        exitWhenEmpty: true,
        handler: async (job: Job, ctx: JobContext) => {
          returned.resolve(await ctx.transaction(async (tx) => (await insertEffect(tx, job.id, 1), 'landed')));
        },
      });
      const counters = await withDeadline(w.done, 20_000, 'the worker to drain the queue');
      expect(store.lost()).toBe(1);
      expect(await returned.promise).toBe('landed');
      expect([counters.completed, counters.claimLost, counters.failed, counters.retried]).toEqual([1, 0, 0, 0]);
      expect(w.errors).toEqual([]);
      const row = await readRow(inner, 'jobs', id);
      expect(statusOf(row)).toBe(queue.table.codes.done);
      expect(JSON.parse(String(row.result))).toBe('landed');
      expect(await effectsByJob(inner)).toEqual(new Map([[id!, 1]]));
      await env().closeStores();
    });

    it('a claim taken over before the settle: what the callback wrote is rolled back, ctx.transaction rejects with ClaimLostError, the new holder keeps the row', async () => {
      const workerStore = await env().store('worker store');
      const rivalStore = await env().store('rival store');
      const queue = await createJobs(workerStore);
      await createEffects(workerStore);
      const insertEffect = await loadInsertEffect();
      const [id] = await enqueueJobs(queue, ['taken over']);
      const rival = await Queue.open(rivalStore, { table: 'jobs' });
      const started = deferred();
      const gate = deferred();
      const caught = deferred<unknown>();
      env().cleanups.push(() => gate.resolve());
      const w = await env().startWorker({
        store: workerStore,
        ...NOTHING_ELSE_MOVES_CLAIMS,
        concurrency: 1,
        maxAttempts: 1,
        handler: async (job: Job, ctx: JobContext) => {
          started.resolve();
          await gate.promise;
          // The body runs and writes: only the guarded settle inside the transaction can tell the claim is gone.
          await ctx.transaction(async (tx) => insertEffect(tx, job.id, 1)).catch((error: unknown) => {
            caught.resolve(error);
            throw error;
          });
        },
      });
      await withDeadline(started.promise, 10_000, 'the handler to start');
      // What a rescue does to the row: another claim's token on it, still processing.
      expect(await retoken(rival, [id], 'B', true)).toBe(1);
      gate.resolve();
      const error = await withDeadline(caught.promise, 10_000, 'ctx.transaction to reject');
      expect(error).toBeInstanceOf(ClaimLostError);
      expect((error as Error).message).toMatch(/rolled back/);
      await w.worker.stop(5000);
      const counters = await w.done;
      expect(counters.completed).toBe(0);
      const row = await readRow(rivalStore, 'jobs', id);
      expect(statusOf(row)).toBe(queue.table.codes.processing);
      expect(row.worker_id).toBe('B');
      expect(await effectsByJob(rivalStore)).toEqual(new Map());
      await env().closeStores();
    });

    it('a running row cancelled: ctx.transaction afterwards rejects with ClaimLostError naming the cancel, writes nothing, and the row stays failed', async () => {
      const workerStore = await env().store('worker store');
      const operatorStore = await env().store('operator store');
      const queue = await createJobs(workerStore);
      await createEffects(workerStore);
      const insertEffect = await loadInsertEffect();
      const [id] = await enqueueJobs(queue, ['cancelled']);
      const operator = await Queue.open(operatorStore, { table: 'jobs' });
      const started = deferred();
      const caught = deferred<unknown>();
      let bodies = 0;
      const w = await env().startWorker({
        store: workerStore,
        ...NOTHING_ELSE_MOVES_CLAIMS,
        heartbeatMs: 20,
        concurrency: 1,
        handler: async (job: Job, ctx: JobContext) => {
          const aborted = new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
          started.resolve();
          await aborted;
          await ctx
            .transaction(async (tx) => {
              bodies++;
              await insertEffect(tx, job.id, 1);
            })
            .catch((error: unknown) => caught.resolve(error));
          return 'late';
        },
      });
      await withDeadline(started.promise, 10_000, 'the handler to start');
      expect(await operator.cancel([id!], 'user asked')).toEqual({ cancelled: 1, notCancelled: [] });
      const error = await withDeadline(caught.promise, 10_000, 'ctx.transaction to reject');
      expect(error).toBeInstanceOf(ClaimLostError);
      expect((error as Error).message).toMatch(/cancelled: user asked/);
      expect(bodies).toBe(0);
      await w.worker.stop(5000);
      await w.done;
      const row = await readRow(operatorStore, 'jobs', id);
      expect(statusOf(row)).toBe(queue.table.codes.failed);
      expect(row.last_error).toBe('cancelled: user asked');
      expect(row.result).toBeNull();
      expect(await effectsByJob(operatorStore)).toEqual(new Map());
      await env().closeStores();
    });

    it('misuse is a JobTransactionError and writes nothing more: a second call, a call after the handler returned, a knex option that is not knex; a callback that throws rolls back and the row fails as the handler says', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      await createEffects(store);
      const insertEffect = await loadInsertEffect();
      const ids = await enqueueJobs(queue, ['twice', 'after', 'not-knex', 'throws']);
      const byPayload = new Map(['twice', 'after', 'not-knex', 'throws'].map((p, i) => [p, ids[i]!]));
      const seen = new Map<string, Deferred<unknown>>(['twice', 'after', 'not-knex', 'throws'].map((p) => [p, deferred<unknown>()]));
      const record = (payload: string) => (error: unknown) => seen.get(payload)!.resolve(error);
      const w = await env().startWorker({
        store,
        table: { table: 'jobs' },
        ...FAST,
        maxAttempts: 1,
        concurrency: 4,
        handler: async (job: Job, ctx: JobContext) => {
          const payload = String(job.payload);
          const effect = (tx: unknown) => insertEffect(tx, job.id, 1);
          if (payload === 'twice') {
            await ctx.transaction(effect);
            await ctx.transaction(effect).then(() => record(payload)(undefined), record(payload));
          } else if (payload === 'after') {
            setImmediate(() => void ctx.transaction(effect).then(() => record(payload)(undefined), record(payload)));
          } else if (payload === 'not-knex') {
            await ctx.transaction(effect, { knex: { transaction: () => undefined } }).then(() => record(payload)(undefined), record(payload));
          } else {
            await ctx
              .transaction(async (tx) => {
                await effect(tx);
                throw new Error('boom after the write');
              })
              .catch((error: unknown) => {
                record(payload)(error);
                throw error;
              });
          }
        },
      });
      for (const payload of ['twice', 'after', 'not-knex']) {
        const error = await withDeadline(seen.get(payload)!.promise, 10_000, `the ${payload} case's rejection`);
        expect(error, payload).toBeInstanceOf(JobTransactionError);
      }
      expect(((await withDeadline(seen.get('throws')!.promise, 10_000, 'the throwing callback')) as Error).message).toBe('boom after the write');
      await waitFor('every row settled', async () => (await readRows(store, 'jobs')).every((row) => statusOf(row) !== queue.table.codes.processing && statusOf(row) !== null));
      await w.worker.stop(5000);
      await w.done;
      const effects = await effectsByJob(store);
      const expected = { twice: [queue.table.codes.done, 1], after: [queue.table.codes.done, 0], 'not-knex': [queue.table.codes.done, 0], throws: [queue.table.codes.failed, 0] } as const;
      for (const [payload, [status, count]] of Object.entries(expected)) {
        const id = byPayload.get(payload)!;
        expect(statusOf(await readRow(store, 'jobs', id)), payload).toBe(status);
        expect(effects.get(id) ?? 0, payload).toBe(count);
      }
      expect(String((await readRow(store, 'jobs', byPayload.get('throws'))).last_error)).toMatch(/boom after the write/);
      await env().closeStores();
    });

    it('a store that cannot lend a transaction: ctx.transaction rejects with a JobTransactionError that names { knex }, runs nothing, and the row settles as the handler says', async () => {
      const inner = await env().store();
      const queue = await createJobs(inner);
      const [id] = await enqueueJobs(queue, ['no lending']);
      const { lendTransaction: _lends, ...lendless } = delegatingStore(inner);
      const caught = deferred<unknown>();
      let bodies = 0;
      const w = await env().startWorker({
        store: lendless,
        table: { table: 'jobs' },
        ...FAST,
        exitWhenEmpty: true,
        handler: async (_job: Job, ctx: JobContext) => {
          await ctx.transaction(() => void bodies++).catch((error: unknown) => caught.resolve(error));
          return 'settled without it';
        },
      });
      const counters = await withDeadline(w.done, 20_000, 'the worker to drain the queue');
      const error = await caught.promise;
      expect(error).toBeInstanceOf(JobTransactionError);
      expect((error as Error).message).toMatch(/cannot lend a transaction; pass ctx.transaction\(body, \{ knex \}\)/);
      expect(bodies).toBe(0);
      expect(counters.completed).toBe(1);
      const row = await readRow(inner, 'jobs', id);
      expect(statusOf(row)).toBe(queue.table.codes.done);
      expect(JSON.parse(String(row.result))).toBe('settled without it');
      await env().closeStores();
    });

    it("[needs knex] with { knex }: the write through the application's knex transaction and the settle commit together; a claim taken over rolls both back", async (ctx: TestContext) => {
      if (!options.knexConfig) skipFor(ctx, 'knex');
      const store = await env().store();
      const queue = await createJobs(store);
      await createEffects(store);
      const [kept, taken] = await enqueueJobs(queue, ['kept', 'taken']);
      await withKnex(options.knexConfig!(env().url), async (db) => {
        const gate = deferred();
        const started = deferred();
        env().cleanups.push(() => gate.resolve());
        const rejections = new Map<string, unknown>();
        const w = await env().startWorker({
          store,
          ...NOTHING_ELSE_MOVES_CLAIMS,
          maxAttempts: 1,
          concurrency: 2,
          handler: async (job: Job, ctx: JobContext) => {
            if (String(job.payload) === 'taken') {
              started.resolve();
              await gate.promise;
            }
            await ctx
              .transaction(async (trx: KnexTrx) => {
                await trx('effects').insert({ job_id: String(job.id), pid: 1 });
                return 'via knex';
              }, { knex: db })
              .catch((error: unknown) => {
                rejections.set(String(job.payload), error);
                throw error;
              });
          },
        });
        await withDeadline(started.promise, 10_000, 'the handler of the row to take over');
        expect(await retoken(queue, [taken], 'B', true)).toBe(1);
        gate.resolve();
        await waitFor('the kept row done and the taken row refused', async () => statusOf(await readRow(store, 'jobs', kept)) === queue.table.codes.done && rejections.has('taken'));
        await w.worker.stop(5000);
        await w.done;
        expect(rejections.get('taken')).toBeInstanceOf(ClaimLostError);
        expect(rejections.has('kept')).toBe(false);
        expect(JSON.parse(String((await readRow(store, 'jobs', kept)).result))).toBe('via knex');
        expect(await effectsByJob(store)).toEqual(new Map([[kept!, 1]]));
      });
      await env().closeStores();
    });
  });
}

/** Long enough that heartbeats every 200 ms keep a running claim through a loaded machine's stalls; short enough that a stopped worker's claims expire within the test. */
const LEASE_MS = 2500;

/**
 * The exactly-once proof under faults: supervised worker processes run table_a's handler, each successful run
 * writing one effect inside ctx.transaction, while one is SIGSTOPped past its lease and resumed, one is SIGKILLed,
 * and (with a private server) the server restarts and every connection is killed. The ledger may show re-runs;
 * the effects must match the done rows exactly.
 */
export function exactlyOnceCases(env: () => TestEnv, options: ConformanceOptions): void {
  const rowCount = Math.max(600, Math.round(1200 * (options.scale ?? 1)));

  /** Waits (bounded) until `executions` runs are in the ledger; fails if the run ended first. */
  async function whenExecuted(run: TableARun, executions: number): Promise<number> {
    return waitFor(
      `${executions} executions in the ledger`,
      () => {
        const n = countLedgerLines(run.ledgerPath);
        if (run.ended()) throw new Error(`the run ended with ${n} of the ${executions} executions awaited: the fault would have landed on nothing`);
        return n >= executions ? n : false;
      },
      { timeoutMs: 30_000 },
    );
  }

  /** A worker process that has been up a while (so it holds claims), other than `except`. */
  function liveWorker(run: TableARun, except?: number): number {
    const live = run.supervisor.pids.filter((pid) => pid !== except && Date.now() - (run.startedAt.get(pid) ?? Date.now()) > 300);
    if (live.length === 0) throw new Error('no worker process has been up long enough to hold claims');
    return live[0]!;
  }

  describe('exactly-once database effects under faults (ctx.transaction)', () => {
    it(
      'a worker SIGKILLed mid-transaction, another SIGSTOPped past its lease and resumed (and with a private server: the server restarted, its connections killed): effects equal done rows, never two for one row',
      async () => {
        const server: DisposableServer | null = options.disposableServer ? await options.disposableServer() : null;
        if (server) env().cleanups.push(() => server.stop());
        const url = server?.url ?? env().url;
        const setup = await env().store('setup store', url);
        await createEffects(setup);
        const run = await startTableARun(env(), setup, url, rowCount, LEASE_MS, { handler: 'effects' });
        await setup.close();
        const faults: string[] = [];

        await whenExecuted(run, Math.round(rowCount / 8));
        const killed = liveWorker(run);
        process.kill(killed, 'SIGKILL');
        faults.push('SIGKILL');

        if (server) {
          await whenExecuted(run, countLedgerLines(run.ledgerPath) + Math.round(rowCount / 10));
          await server.restart(1000);
          faults.push('server restart');
          await whenExecuted(run, countLedgerLines(run.ledgerPath) + Math.round(rowCount / 12));
          faults.push(`${await server.dropConnections()} connections killed`);
        }

        // Last, as it may outlast the run: a worker stalls (a GC pause, a frozen VM) past its lease. Its claims are
        // rescued and run again elsewhere while its transactions stay open; resumed, it must commit none of them.
        await whenExecuted(run, countLedgerLines(run.ledgerPath) + Math.round(rowCount / 12));
        const stopped = liveWorker(run, killed);
        const before = readLedgerFile(run.ledgerPath);
        const heldByStopped = [...before].filter(([, ran]) => ran.pids[ran.pids.length - 1] === stopped).map(([id]) => id);
        process.kill(stopped, 'SIGSTOP');
        let rescued: number;
        try {
          // Rescued: a row the stopped worker ran last has run again in another process. It may have held none
          // (between two claims) or, on a database with one writer, hold the write lock so nobody can rescue: then
          // the stall just ends after twice the lease.
          rescued = await waitFor(
            'a run of the stopped worker to be rescued',
            () => {
              const now = readLedgerFile(run.ledgerPath);
              const again = heldByStopped.filter((id) => (now.get(id)?.pids.length ?? 0) > (before.get(id)?.pids.length ?? 0)).length;
              return again > 0 ? again : false;
            },
            { timeoutMs: 2 * LEASE_MS },
          ).catch(() => 0);
        } finally {
          process.kill(stopped, 'SIGCONT');
        }
        faults.push(`SIGSTOP past the lease (${rescued} rows rescued meanwhile)`);

        expect(await withDeadline(run.finished, 120_000, 'the supervised workers to empty the queue')).toBe(0);
        const check = await env().store('check store', url);
        const { problems, reruns } = await checkTableARun(run, check);
        expect(problems).toEqual([]);
        const effects = await effectsByJob(check);
        const queue = await Queue.open(check, { table: 'table_a' });
        expect(effectMismatches(await statusesOf(check, 'table_a'), effects, queue.table.codes.done)).toEqual([]);
        console.info(`[${options.name}] exactly-once: ${run.rows.length} rows, faults: ${faults.join(', ')}; ${reruns} re-runs, ${[...effects.values()].reduce((a, b) => a + b, 0)} effects, one per done row`);
        await env().closeStores();
      },
      180_000,
    );
  });
}
