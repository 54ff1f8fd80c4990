/**
 * pg-boss 10 as a bench peer. A worker is one PgBoss instance (its own pg Pool, handed to pg-boss through its
 * documented `db` option so the pool's size and host are ours) running one `work()` loop that fetches up to
 * `concurrency` jobs per query and gives them to the handler as one array.
 *
 * What 10.4.2 does, read from its source (src/worker.js, src/manager.js), that shapes the numbers:
 *
 * - `pollingIntervalSeconds` must be >= 0.5 (attorney.js: MIN_POLLING_INTERVAL_MS = 500). There is no
 *   LISTEN/NOTIFY; a new job waits for the next poll.
 * - The loop is fetch -> handler -> sleep(interval - elapsed), and it sleeps after every fetch that took less
 *   than interval - 100 ms, even when the batch came back full and the queue is deep. A no-op burn-down is
 *   therefore capped near batchSize / 0.5 s per worker. `notifyWorker(id)` is the library's documented way to
 *   skip that sleep for one turn; the `batch-fetch-notify` variant calls it when a batch came back full.
 * - When the handler's promise resolves, `complete(name, ids)` is issued for the whole batch (one UPDATE) but
 *   not awaited: the loop moves on while it is in flight. So the clock stops when no job of the run's queue is
 *   left before 'completed', checked after every connection the workers give back, and a count of
 *   'completed' rows must then equal the jobs loaded.
 *
 * Each run creates its own schema (pg-boss's `schema` option) and drops it afterwards. `supervise` (maintenance:
 * expiry, archiving) and `schedule` (cron, clock checks) are off so nothing but the workers touches the database.
 * v10's `insert()` takes the queue name in each job (`{ name, data }`), not as a first argument.
 */
import PgBoss from 'pg-boss';
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
  payloadSeq,
  sleep,
  uniqueSchema,
  warmPool,
  whenSettled,
} from './shared.js';
import { assertLocalUrl, poolSize } from '../limits.js';

type Variant = 'batch-fetch' | 'batch-fetch-notify';

const QUEUE = 'bench';

/** pg-boss 10's floor for pollingIntervalSeconds. */
const POLLING_INTERVAL_SECONDS = 0.5;

/** Jobs per `insert()` call: each call is one statement with the whole chunk as one JSON parameter. */
const INSERT_CHUNK = 5_000;

/** The pickup's one idle worker fetches as many jobs per poll as statusq's pickup worker runs at once. */
const PICKUP_CONCURRENCY = 16;

const TEARDOWN_MS = 15_000;

/**
 * Two connections per worker: its loop runs one query at a time, plus the unawaited completion UPDATE that
 * overlaps the next fetch.
 */
function workerPoolSize(workers: number): number {
  return poolSize(2, workers, 2);
}

/**
 * pg-boss completes a batch without awaiting it, so a completion can still be on its way when teardown ends
 * the pool (seen with a 5 ms handler cut off by the run's time limit); its rejection would be unhandled inside
 * pg-boss and end the bench. Once the pool has ended, such late calls get an empty answer instead.
 */
function bossDb(pool: pg.Pool): PgBoss.Db {
  return { executeSql: (text, values) => (pool.ending || pool.ended ? Promise.resolve({ rows: [] }) : pool.query(text, values)) };
}

function newBoss(schema: string, pool: pg.Pool, migrate: boolean, errors: unknown[], failed?: Latch): PgBoss {
  const boss = new PgBoss({ db: bossDb(pool), schema, migrate, supervise: false, schedule: false });
  // PgBoss is an EventEmitter: an 'error' without a listener would throw out of the emitting loop.
  boss.on('error', (error) => {
    errors.push(error);
    failed?.fire();
  });
  return boss;
}

/** A boss that installs the schema and creates the queue; it stays around to insert jobs. */
async function setUp(url: string, schema: string, errors: unknown[]): Promise<{ boss: PgBoss; pool: pg.Pool }> {
  const pool = newPool(url, 1, 'bench-pgboss-producer', errors);
  const boss = newBoss(schema, pool, true, errors);
  try {
    await boss.start();
    await boss.createQueue(QUEUE);
  } catch (error) {
    await boss.stop({ graceful: false, wait: true }).catch(() => undefined);
    await pool.end().catch(() => undefined);
    throw error;
  }
  return { boss, pool };
}

async function stopBosses(bosses: readonly PgBoss[]): Promise<void> {
  await Promise.allSettled(bosses.map((boss) => boss.stop({ graceful: true, wait: true, timeout: TEARDOWN_MS })));
}

async function teardown(bosses: readonly PgBoss[], pools: readonly pg.Pool[], admin: pg.Client, schema: string): Promise<void> {
  const by = performance.now() + TEARDOWN_MS;
  await stopBosses(bosses);
  await endPools(pools, by);
  try {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } catch (error) {
    console.warn(`[pg-boss] could not drop schema ${schema}: ${String(error)}`);
  } finally {
    await admin.end();
  }
}

/** Starts a `work()` loop on each boss with `handle`; `notify` says whether a full batch skips the poll sleep. */
async function startWorkers(bosses: readonly PgBoss[], batchSize: number, notify: boolean, handle: (jobs: PgBoss.Job<unknown>[]) => Promise<void>): Promise<void> {
  await Promise.all(
    bosses.map(async (boss) => {
      const worker: { id?: string } = {};
      worker.id = await boss.work<unknown>(QUEUE, { batchSize, pollingIntervalSeconds: POLLING_INTERVAL_SECONDS }, async (jobs) => {
        await handle(jobs);
        // The id is known before the loop's first fetch returns in practice; if not, that one turn just sleeps.
        if (notify && jobs.length >= batchSize && worker.id !== undefined) boss.notifyWorker(worker.id);
      });
    }),
  );
}

async function burnDown(variant: Variant, options: BurnDownOptions): Promise<BurnDownResult> {
  assertLocalUrl(options.url);
  const schema = uniqueSchema('pgboss_bench');
  const errors: unknown[] = [];
  const failed = new Latch();
  const admin = await newClient(options.url, 'bench-pgboss-admin');
  const bosses: PgBoss[] = [];
  const pools: pg.Pool[] = [];
  try {
    const producer = await setUp(options.url, schema, errors);
    bosses.push(producer.boss);
    pools.push(producer.pool);
    for (let from = 0; from < options.jobs; from += INSERT_CHUNK) {
      const count = Math.min(INSERT_CHUNK, options.jobs - from);
      await producer.boss.insert(Array.from({ length: count }, (_, k) => ({ name: QUEUE, data: { i: from + k } })));
    }
    // Fresh statistics, as statusq's tables get after their fill; ANALYZE on the parent covers the queue's partition.
    await admin.query(`ANALYZE ${schema}.job`);

    const size = workerPoolSize(options.workers);
    const workerPools = Array.from({ length: options.workers }, (_, i) => newPool(options.url, size, `bench-pgboss-${i}`, errors));
    pools.push(...workerPools);
    const workers = workerPools.map((pool) => newBoss(schema, pool, false, errors, failed));
    bosses.push(...workers);
    await Promise.all(workers.map((boss) => boss.start()));
    await Promise.all(workerPools.map((pool) => warmPool(pool, size)));

    const tally = new Tally(options.jobs);
    const delayMs = options.handlerDelayMs;
    // Like statusq's runs, the timeout bounds the work, not the setup: it starts as the workers do.
    const launchedAt = performance.now();
    const deadline = launchedAt + options.timeoutMs;
    await startWorkers(workers, options.concurrency, variant === 'batch-fetch-notify', async (jobs) => {
      tally.started();
      // One batch is `concurrency` jobs running at once, so their simulated I/O overlaps.
      if (delayMs > 0) await Promise.all(jobs.map(() => sleep(delayMs)));
      tally.finished(jobs.length);
    });

    let stoppedAt: number | undefined;
    if (await beforeDeadline(Promise.race([tally.allHandled.promise, failed.promise]), deadline)) {
      if (failed.fired) throw firstError(errors) ?? new Error('pg-boss worker failed');
      stoppedAt = await whenSettled(
        workerPools,
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
    return { handled, seconds: (end - (tally.firstStart ?? launchedAt)) / 1000, timedOut };
  } finally {
    await teardown(bosses, pools, admin, schema);
  }
}

async function pickup(variant: Variant, options: PickupOptions): Promise<PickupResult> {
  assertLocalUrl(options.url);
  const schema = uniqueSchema('pgboss_bench');
  const errors: unknown[] = [];
  const failed = new Latch();
  const admin = await newClient(options.url, 'bench-pgboss-admin');
  const bosses: PgBoss[] = [];
  const pools: pg.Pool[] = [];
  try {
    const producer = await setUp(options.url, schema, errors);
    bosses.push(producer.boss);
    pools.push(producer.pool);
    const workerPool = newPool(options.url, workerPoolSize(1), 'bench-pgboss-pickup', errors);
    pools.push(workerPool);
    const worker = newBoss(schema, workerPool, false, errors, failed);
    bosses.push(worker);
    await worker.start();

    const insertedAt: number[] = [];
    const startedAt: number[] = [];
    let received = 0;
    const allReceived = new Latch();
    await startWorkers([worker], PICKUP_CONCURRENCY, variant === 'batch-fetch-notify', async (jobs) => {
      const now = performance.now();
      for (const job of jobs) {
        const seq = payloadSeq(job.data);
        if (startedAt[seq] === undefined) {
          startedAt[seq] = now;
          if (++received >= options.rows) allReceived.fire();
        }
      }
    });

    // No idle signal to wait for: the worker polls, so the first insert lands at some point of its cycle,
    // which is what every later one does too. As in statusq's pickup, the timeout starts here.
    const deadline = performance.now() + options.timeoutMs;
    for (let seq = 0; seq < options.rows && performance.now() < deadline && !failed.fired; seq++) {
      insertedAt[seq] = performance.now();
      await producer.boss.send(QUEUE, { seq });
      await sleep(options.intervalMs);
    }
    await beforeDeadline(Promise.race([allReceived.promise, failed.promise]), deadline);
    const error = firstError(errors);
    if (error) throw error;
    const latenciesMs: number[] = [];
    insertedAt.forEach((at, seq) => {
      const start = startedAt[seq];
      if (start !== undefined) latenciesMs.push(start - at);
    });
    return { latenciesMs };
  } finally {
    await teardown(bosses, pools, admin, schema);
  }
}

function peer(variant: Variant): Peer {
  return {
    system: 'pg-boss',
    variant,
    burnDown: (options) => burnDown(variant, options),
    pickup: (options) => pickup(variant, options),
  };
}

/** As briefed: batchSize = concurrency, polling at the 0.5 s floor. */
export const batchFetch: Peer = peer('batch-fetch');

/** The same, plus `notifyWorker()` after a full batch so a deep queue is drained without the poll sleep. */
export const batchFetchNotify: Peer = peer('batch-fetch-notify');
