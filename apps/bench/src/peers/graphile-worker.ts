/**
 * graphile-worker 0.18 as a bench peer, in two modes:
 *
 * - `unbatched`: the library's default; every worker slot asks the database for its next job on its own.
 * - `local-queue`: `preset.worker.localQueue.size` (0.16+); the pool fetches and locks a batch of jobs at once and
 *   hands them to its slots from memory.
 *
 * Each run installs graphile-worker into a schema of its own (dropped afterwards), so runs never see each
 * other's jobs. A worker is one `run()` Runner with its own pg Pool.
 *
 * What the clock counts: 0.18 (like 0.17) does not await a job's completion write. dist/worker.js calls
 * `completeJob(job)` and emits 'job:complete' straight away (the type docs say "written back to the database";
 * in 0.18.0 it is not yet)
 * and fetches its next job while the DELETE is still in flight. With the default `completeJobBatchDelay: -1`
 * that is one DELETE per job; with a delay >= 0 they are coalesced. Neither mode here turns completion batching
 * on, so the only difference between them is the fetch. 0.18.0 runs on Node 20 although its `engines` asks for
 * 22.18 (pnpm only warns); nothing the bench calls (run, runMigrations, Logger, preset.worker.localQueue) changed
 * from 0.17.3. So a run stops its clock when the job table is seen
 * empty, checked after every connection the workers give back, not when the last handler returns.
 */
import { EventEmitter } from 'node:events';
import { Logger, run, runMigrations, type Runner, type RunnerOptions, type Task, type WorkerEvents } from 'graphile-worker';
import type pg from 'pg';
import type { BurnDownOptions, BurnDownResult, Peer, PickupOptions, PickupResult } from '../peer-contract.js';
import {
  Latch,
  Tally,
  beforeDeadline,
  endPools,
  firstError,
  newClient,
  newPool,
  pacedPickup,
  payloadSeq,
  sleep,
  uniqueSchema,
  warmPool,
  whenSettled,
} from './shared.js';
import { assertLocalUrl, poolSize } from '../limits.js';

type Mode = 'unbatched' | 'local-queue';

const TASK = 'bench';

/** The pickup's one idle worker runs as many slots as statusq's pickup worker does. */
const PICKUP_CONCURRENCY = 16;

/** How long teardown may wait for workers to stop and pools to go quiet. */
const TEARDOWN_MS = 15_000;

/**
 * The local queue's size. graphile's docs and 0.16 release notes give `concurrency + 1` as the starting point:
 * every slot has a job and the next is already in memory when one finishes. The pool warns about anything
 * below concurrency. Bigger (their own perf setup uses 500 at concurrency 24) would favour one huge burn-down
 * with one worker but lock jobs away from the other workers when there are many; we use the documented default.
 */
export function localQueueSize(concurrency: number): number {
  return concurrency + 1;
}

/**
 * A pool per worker sized for its slots: one connection per slot for fetching, one held by LISTEN, one spare
 * for the unawaited completion DELETEs; cut down to a share of the connection budget when workers are many.
 * Two is the floor: LISTEN and one connection to do everything else.
 */
function workerPoolSize(concurrency: number, workers: number): number {
  return poolSize(concurrency + 2, workers, 2);
}

// Per-job "Completed task" info lines would dominate a no-op handler's cost; warnings and errors still show,
// each text once, since every runner of a run repeats the same one (e.g. a budget-cut pool below concurrency).
const logged = new Set<string>();
const logger = new Logger(() => (level: string, message: string) => {
  if (level !== 'error' && level !== 'warning') return;
  const line = `[graphile-worker] ${level}: ${message}`;
  if (logged.has(line)) return;
  logged.add(line);
  console.warn(line);
});

function runnerOptions(mode: Mode, schema: string, pool: pg.Pool, concurrency: number, task: Task, events?: WorkerEvents): RunnerOptions {
  return {
    pgPool: pool,
    schema,
    taskList: { [TASK]: task },
    concurrency,
    noHandleSignals: true,
    logger,
    ...(events ? { events } : {}),
    ...(mode === 'local-queue' ? { preset: { worker: { localQueue: { size: localQueueSize(concurrency) } } } } : {}),
  };
}

/** Starts one runner per pool; if any fails, the ones that started are still returned for teardown. */
async function startRunners(optionsFor: (pool: pg.Pool) => RunnerOptions, pools: readonly pg.Pool[], runners: Runner[], errors: unknown[], failed: Latch): Promise<void> {
  const started = await Promise.allSettled(pools.map((pool) => run(optionsFor(pool))));
  for (const outcome of started) {
    if (outcome.status === 'fulfilled') {
      runners.push(outcome.value);
      // A runner that dies mid-run rejects this promise; left alone it would be an unhandled rejection.
      outcome.value.promise.catch((error: unknown) => {
        errors.push(error);
        failed.fire();
      });
    } else {
      errors.push(outcome.reason);
    }
  }
  const error = firstError(errors);
  if (error) throw error;
}

async function teardown(runners: readonly Runner[], pools: readonly pg.Pool[], admin: pg.Client, schema: string): Promise<void> {
  const by = performance.now() + TEARDOWN_MS;
  // A runner that does not stop in time is left to the pools' end below; teardown must not hang the bench.
  await beforeDeadline(Promise.allSettled(runners.map((runner) => runner.stop())), by);
  await endPools(pools, by);
  try {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } catch (error) {
    console.warn(`[graphile-worker] could not drop schema ${schema}: ${String(error)}`);
  } finally {
    await admin.end();
  }
}

async function burnDown(mode: Mode, options: BurnDownOptions): Promise<BurnDownResult> {
  assertLocalUrl(options.url);
  const schema = uniqueSchema('gw_bench');
  const errors: unknown[] = [];
  const failed = new Latch();
  const admin = await newClient(options.url, 'bench-graphile-admin');
  const size = workerPoolSize(options.concurrency, options.workers);
  const pools = Array.from({ length: options.workers }, (_, i) => newPool(options.url, size, `bench-graphile-${i}`, errors));
  const runners: Runner[] = [];
  try {
    const [firstPool] = pools;
    if (!firstPool) throw new Error('burnDown needs at least one worker');
    await runMigrations({ pgPool: firstPool, schema, logger });
    // One statement through graphile's own bulk entry point (what addJobs() calls), so loading is not timed.
    await admin.query(
      `SELECT count(*) FROM ${schema}.add_jobs(ARRAY(
         SELECT ROW($2::text, json_build_object('i', g), NULL, NULL, NULL, NULL, NULL, NULL)::${schema}.job_spec
         FROM generate_series(1, $1::int) AS g))`,
      [options.jobs, TASK],
    );
    // Fresh statistics, as statusq's tables get after their fill; otherwise the planner guesses from an empty table.
    await admin.query(`ANALYZE ${schema}._private_jobs`);
    await Promise.all(pools.map((pool) => warmPool(pool, size)));

    const tally = new Tally(options.jobs);
    const delayMs = options.handlerDelayMs;
    const task: Task = async () => {
      tally.started();
      if (delayMs > 0) await sleep(delayMs);
      tally.finished();
    };
    // Like statusq's runs, the timeout bounds the work, not the setup: it starts as the workers do.
    const launchedAt = performance.now();
    const deadline = launchedAt + options.timeoutMs;
    await startRunners((pool) => runnerOptions(mode, schema, pool, options.concurrency, task), pools, runners, errors, failed);

    let stoppedAt: number | undefined;
    if (await beforeDeadline(Promise.race([tally.allHandled.promise, failed.promise]), deadline)) {
      if (failed.fired) throw firstError(errors) ?? new Error('graphile-worker runner failed');
      stoppedAt = await whenSettled(
        pools,
        async () => (await admin.query<{ settled: boolean }>(`SELECT NOT EXISTS (SELECT 1 FROM ${schema}._private_jobs) AS settled`)).rows[0]?.settled === true,
        deadline,
      );
    }
    const timedOut = stoppedAt === undefined;
    const end = stoppedAt ?? performance.now();
    const handled = tally.handled;
    return { handled, seconds: (end - (tally.firstStart ?? launchedAt)) / 1000, timedOut };
  } finally {
    await teardown(runners, pools, admin, schema);
  }
}

async function pickup(mode: Mode, options: PickupOptions): Promise<PickupResult> {
  assertLocalUrl(options.url);
  const setupDeadline = performance.now() + options.timeoutMs;
  const schema = uniqueSchema('gw_bench');
  const errors: unknown[] = [];
  const failed = new Latch();
  const admin = await newClient(options.url, 'bench-graphile-inserter');
  const pool = newPool(options.url, PICKUP_CONCURRENCY + 2, 'bench-graphile-pickup', errors);
  const runners: Runner[] = [];
  try {
    await runMigrations({ pgPool: pool, schema, logger });

    // Idle means: LISTEN in place, and the first look for jobs came back empty (every slot's, or the local queue's).
    const events = new EventEmitter() as WorkerEvents;
    const listening = new Latch();
    const idle = new Latch();
    let listenClient: pg.PoolClient | undefined;
    events.on('pool:listen:success', ({ client }) => {
      listenClient = client;
      listening.fire();
    });
    let emptyLooks = 0;
    events.on('worker:getJob:empty', () => {
      if (++emptyLooks >= PICKUP_CONCURRENCY) idle.fire();
    });
    events.on('localQueue:getJobs:complete', ({ jobs }) => {
      if (jobs.length === 0) idle.fire();
    });

    const startedAt: number[] = [];
    let received = 0;
    const allReceived = new Latch();
    const task: Task = (payload) => {
      const now = performance.now();
      const seq = payloadSeq(payload);
      if (startedAt[seq] === undefined) {
        startedAt[seq] = now;
        if (++received >= options.rows) allReceived.fire();
      }
    };
    await startRunners((p) => runnerOptions(mode, schema, p, PICKUP_CONCURRENCY, task, events), [pool], runners, errors, failed);
    if (!(await beforeDeadline(Promise.all([listening.promise, idle.promise]), setupDeadline))) {
      throw new Error('graphile-worker pickup: the worker did not become idle before the timeout');
    }
    // The event fires just before LISTEN is sent on this client; a query queued behind it returns once it is in effect.
    await listenClient?.query('SELECT 1');

    return await pacedPickup(options, { failed, allReceived, errors, startedAt }, (seq) => admin.query(`SELECT ${schema}.add_job($1::text, json_build_object('seq', $2::int))`, [TASK, seq]));
  } finally {
    await teardown(runners, [pool], admin, schema);
  }
}

function peer(variant: Mode): Peer {
  return {
    system: 'graphile-worker',
    variant,
    burnDown: (options) => burnDown(variant, options),
    pickup: (options) => pickup(variant, options),
  };
}

export const unbatched: Peer = peer('unbatched');
export const localQueue: Peer = peer('local-queue');
