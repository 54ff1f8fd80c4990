/**
 * pg-boss 12 as a bench peer. A worker is one PgBoss instance with a pool of its own (pg-boss builds it from
 * `connectionString` and `max`, so LISTEN/NOTIFY works for the pickup) running `work()` loops that fetch a
 * batch per query and give it to the handler as one array.
 *
 * What 12.38 does, read from its source (dist/manager.js `work()`, dist/worker.js), that shapes the numbers:
 *
 * - The loop is fetch -> handler -> `await complete(name, ids)` (one UPDATE for the batch, awaited in 12.38;
 *   10.x left it in flight) -> sleep(interval - elapsed). `pollingIntervalSeconds` is still >= 0.5
 *   (attorney.js MIN_POLLING_INTERVAL_MS). 10.x slept after every fetch, so a no-op burn-down was capped near
 *   batchSize / 0.5 s per worker; `burstWhenBatchFull` (12.x) skips the sleep while fetches come back full
 *   (`resolveInterval`: 0 when lastFetchCount >= batchSize and batchSize > 1), which is what every variant here
 *   turns on.
 * - `localConcurrency: n` starts n such loops in the instance, each with its own fetch of `batchSize`: a worker
 *   then holds up to n x batchSize jobs. Without it one loop runs one batch at a time, so a batch's slowest job
 *   holds up the next fetch.
 * - NOTIFY (12.x): only with `useListenNotify` on the instance and `notify: true` on the queue; a job insert
 *   then wakes the workers, with polling kept as the floor. The pickup uses both; a burn-down never waits.
 * - v10 -> v12 migration notes that matter here: `PgBoss` is a named export; a queue must exist
 *   (`createQueue`) before `send`/`insert`; `insert(name, jobs)` takes the queue name first again; `stop()`
 *   has no `wait` (it always waits); `work()` options are per call (`batchSize`, `localConcurrency`,
 *   `burstWhenBatchFull`, `pollingIntervalSeconds`).
 *
 * The clock stops when no job of the run's queue is left before 'completed', checked after every connection
 * the workers give back, and a count of 'completed' rows must then equal the jobs loaded. Each run creates its
 * own schema (pg-boss's `schema` option) and drops it afterwards. `supervise` (maintenance: expiry, archiving)
 * and `schedule` (cron, clock checks) are off so nothing but the workers touches the database.
 */
import { PgBoss, type Job } from 'pg-boss';
import type pg from 'pg';
import type { BurnDownOptions, BurnDownResult, Peer, PickupOptions, PickupResult } from '../peer-contract.js';
import { Latch, Tally, beforeDeadline, firstError, newClient, pacedPickup, payloadSeq, sleep, uniqueSchema, warmPool, whenSettled } from './shared.js';
import { assertLocalUrl, poolSize } from '../limits.js';

interface Variant {
  /** The name in the results table: the settings that differ. */
  name: string;
  /** Jobs per fetch; undefined: the run's slots per worker. */
  batchSize?: number;
  /** Fetch loops per instance (pg-boss's default is 1). */
  localConcurrency: number;
}

const QUEUE = 'bench';

/** pg-boss's floor for pollingIntervalSeconds; burst mode skips it while batches come back full. */
const POLLING_INTERVAL_SECONDS = 0.5;

/** Jobs per `insert()` call: each call is one statement with the whole chunk as one JSON parameter. */
const INSERT_CHUNK = 5_000;

/** The pickup's one idle worker fetches as many jobs per poll as statusq's pickup worker runs at once. */
const PICKUP_CONCURRENCY = 16;

const TEARDOWN_MS = 15_000;

/** One connection per fetch loop (its fetch, then its awaited complete) plus one spare, cut to the budget. */
function workerPoolSize(localConcurrency: number, workers: number): number {
  return poolSize(localConcurrency + 1, workers, 2);
}

function newBoss(url: string, schema: string, max: number, name: string, migrate: boolean, errors: unknown[], failed?: Latch, listen = false): PgBoss {
  const boss = new PgBoss({
    connectionString: url,
    max,
    application_name: name,
    schema,
    migrate,
    supervise: false,
    schedule: false,
    ...(listen && { useListenNotify: true }),
  });
  // PgBoss is an EventEmitter: an 'error' without a listener would throw out of the emitting loop.
  boss.on('error', (error) => {
    errors.push(error);
    failed?.fire();
  });
  return boss;
}

/** pg-boss's own pool (its Db keeps it as `pool`), for warming it and for knowing when a completion committed. */
function poolOf(boss: PgBoss): pg.Pool {
  const pool = (boss.getDb() as { pool?: pg.Pool }).pool;
  if (!pool) throw new Error('pg-boss: no pool on its Db (did start() run?)');
  return pool;
}

/** A boss that installs the schema and creates the queue; it stays around to insert jobs. */
async function setUp(url: string, schema: string, errors: unknown[], notify: boolean): Promise<PgBoss> {
  const boss = newBoss(url, schema, 1, 'bench-pgboss-producer', true, errors);
  try {
    await boss.start();
    await boss.createQueue(QUEUE, notify ? { notify: true } : {});
  } catch (error) {
    await boss.stop({ graceful: false }).catch(() => undefined);
    throw error;
  }
  return boss;
}

async function teardown(bosses: readonly PgBoss[], admin: pg.Client, schema: string): Promise<void> {
  // A boss that does not stop in time is abandoned; teardown must not hang the bench.
  await beforeDeadline(Promise.allSettled(bosses.map((boss) => boss.stop({ graceful: true, timeout: TEARDOWN_MS }))), performance.now() + TEARDOWN_MS);
  try {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } catch (error) {
    console.warn(`[pg-boss] could not drop schema ${schema}: ${String(error)}`);
  } finally {
    await admin.end();
  }
}

async function startWorkers(bosses: readonly PgBoss[], variant: Variant, batchSize: number, handle: (jobs: Job<unknown>[]) => Promise<void>): Promise<void> {
  await Promise.all(
    bosses.map((boss) =>
      boss.work<unknown>(
        QUEUE,
        { batchSize, localConcurrency: variant.localConcurrency, burstWhenBatchFull: true, pollingIntervalSeconds: POLLING_INTERVAL_SECONDS },
        async (jobs: Job<unknown>[]) => handle(jobs),
      ),
    ),
  );
}

/**
 * One measured run in a schema of its own: every boss pushed to `bosses` reports its errors there, and
 * `withRun` stops them all and drops the schema after the body, whatever happened.
 */
interface Run {
  schema: string;
  admin: pg.Client;
  bosses: PgBoss[];
  errors: unknown[];
  failed: Latch;
}

async function withRun<T>(url: string, body: (run: Run) => Promise<T>): Promise<T> {
  assertLocalUrl(url);
  const run: Run = { schema: uniqueSchema('pgboss_bench'), admin: await newClient(url, 'bench-pgboss-admin'), bosses: [], errors: [], failed: new Latch() };
  try {
    return await body(run);
  } finally {
    await teardown(run.bosses, run.admin, run.schema);
  }
}

function burnDown(variant: Variant, options: BurnDownOptions): Promise<BurnDownResult> {
  const batchSize = variant.batchSize ?? options.concurrency;
  return withRun(options.url, async ({ schema, admin, bosses, errors, failed }) => {
    const producer = await setUp(options.url, schema, errors, false);
    bosses.push(producer);
    for (let from = 0; from < options.jobs; from += INSERT_CHUNK) {
      const count = Math.min(INSERT_CHUNK, options.jobs - from);
      await producer.insert(QUEUE, Array.from({ length: count }, (_, k) => ({ data: { i: from + k } })));
    }
    // Fresh statistics, as statusq's tables get after their fill; ANALYZE on the parent covers the queue's partition.
    await admin.query(`ANALYZE ${schema}.job`);

    const size = workerPoolSize(variant.localConcurrency, options.workers);
    const workers = Array.from({ length: options.workers }, (_, i) => newBoss(options.url, schema, size, `bench-pgboss-${i}`, false, errors, failed));
    bosses.push(...workers);
    await Promise.all(workers.map((boss) => boss.start()));
    const pools = workers.map(poolOf);
    await Promise.all(pools.map((pool) => warmPool(pool, size)));

    const tally = new Tally(options.jobs);
    const delayMs = options.handlerDelayMs;
    // Like statusq's runs, the timeout bounds the work, not the setup: it starts as the workers do.
    const launchedAt = performance.now();
    const deadline = launchedAt + options.timeoutMs;
    await startWorkers(workers, variant, batchSize, async (jobs) => {
      tally.started();
      // One batch runs its jobs at once, so their simulated I/O overlaps.
      if (delayMs > 0) await Promise.all(jobs.map(() => sleep(delayMs)));
      tally.finished(jobs.length);
    });

    let stoppedAt: number | undefined;
    if (await beforeDeadline(Promise.race([tally.allHandled.promise, failed.promise]), deadline)) {
      if (failed.fired) throw firstError(errors) ?? new Error('pg-boss worker failed');
      stoppedAt = await whenSettled(
        pools,
        async () =>
          (await admin.query<{ settled: boolean }>(`SELECT NOT EXISTS (SELECT 1 FROM ${schema}.job WHERE name = $1 AND state < 'completed') AS settled`, [QUEUE])).rows[0]
            ?.settled === true,
        deadline,
      );
    }
    const timedOut = stoppedAt === undefined;
    const end = stoppedAt ?? performance.now();
    const handled = tally.handled;
    if (!timedOut) {
      const { rows } = await admin.query<{ completed: number }>(`SELECT count(*)::int AS completed FROM ${schema}.job WHERE name = $1 AND state = 'completed'`, [QUEUE]);
      const completed = rows[0]?.completed ?? 0;
      if (completed !== options.jobs) throw new Error(`pg-boss settled with ${completed} of ${options.jobs} jobs completed (handled ${handled})`);
    }
    return { handled, seconds: (end - (tally.firstStart ?? launchedAt)) / 1000, timedOut, slotsPerWorker: batchSize * variant.localConcurrency };
  });
}

function pickup(variant: Variant, options: PickupOptions): Promise<PickupResult> {
  return withRun(options.url, async ({ schema, bosses, errors, failed }) => {
    const producer = await setUp(options.url, schema, errors, true);
    bosses.push(producer);
    const worker = newBoss(options.url, schema, workerPoolSize(variant.localConcurrency, 1), 'bench-pgboss-pickup', false, errors, failed, true);
    bosses.push(worker);
    await worker.start();

    const startedAt: number[] = [];
    let received = 0;
    const allReceived = new Latch();
    await startWorkers([worker], variant, variant.batchSize ?? PICKUP_CONCURRENCY, async (jobs) => {
      const now = performance.now();
      for (const job of jobs) {
        const seq = payloadSeq(job.data);
        if (startedAt[seq] === undefined) {
          startedAt[seq] = now;
          if (++received >= options.rows) allReceived.fire();
        }
      }
    });

    // No idle signal to wait for: the first insert lands at some point of the worker's poll cycle (NOTIFY
    // wakes it early), which is what every later one does too. As in statusq's pickup, the timeout starts here.
    return await pacedPickup(options, { failed, allReceived, errors, startedAt }, (seq) => producer.send(QUEUE, { seq }));
  });
}

function peer(variant: Variant): Peer {
  return {
    system: 'pg-boss',
    variant: variant.name,
    burnDown: (options) => burnDown(variant, options),
    pickup: (options) => pickup(variant, options),
  };
}

/** One fetch loop per worker, batchSize = the run's slots, burst while batches come back full. */
export const batchBurst: Peer = peer({ name: 'batch=slots, burst', localConcurrency: 1 });

/**
 * The setting the issue measured at about 12,000 jobs/s on 20,000 no-op jobs (batchSize 50, localConcurrency 10,
 * burstWhenBatchFull): ten fetch loops of 50, so up to 500 jobs in flight per worker, whatever the run's slots.
 */
export const batch50Local10: Peer = peer({ name: 'batch 50 x localConcurrency 10, burst', batchSize: 50, localConcurrency: 10 });
