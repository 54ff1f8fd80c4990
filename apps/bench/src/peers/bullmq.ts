/**
 * BullMQ 6.7 as a bench peer, on its two backends:
 *
 * - `redis`: the local Redis (127.0.0.1:6379). That server keeps nothing on disk (`CONFIG GET save` is empty,
 *   `appendonly` is no): a job survives no restart, while every SQL row in this bench is fsynced at commit.
 *   The run reads both settings and names them in its variant, so the table says what was measured.
 * - `postgres`: `createPostgresBackend` from the same package (dist/esm/postgres: one `job` table per schema,
 *   a `state` column with partial indexes, claims with `FOR UPDATE SKIP LOCKED`, LISTEN/NOTIFY to wake blocked
 *   workers), on the bench's own PostgreSQL.
 *
 * What 6.7.0 does, read from its source (classes/worker.js, postgres/postgres-queue-backend.js), that shapes the
 * numbers:
 *
 * - No batch fetch in the open-source Worker (batches are BullMQ Pro): each of `concurrency` slots claims one
 *   job, and finishing a job fetches the next in the same call (`moveToFinished` with fetchNext: one Lua
 *   script on Redis, one transaction and one commit on PostgreSQL). So a no-op job costs about one round trip
 *   and, on PostgreSQL, one commit.
 * - A worker's 'completed' event fires after that completion returned, so counting them counts settled jobs:
 *   the clock stops at the last one, and the backend's own count of completed jobs must then equal the load.
 * - Completed jobs are kept (the default `removeOnComplete`), as pg-boss keeps its completed rows.
 *
 * Each run uses its own queue name (Redis) or schema (PostgreSQL) and removes it afterwards (`obliterate`,
 * `DROP SCHEMA`).
 */
import { Queue, Worker, createPostgresBackend, withBackend, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import type { BurnDownOptions, BurnDownResult, Peer, PickupOptions, PickupResult } from '../peer-contract.js';
import { Latch, Tally, beforeDeadline, firstError, newClient, pacedPickup, payloadSeq, sleep, uniqueSchema } from './shared.js';
import { assertLocalUrl, poolSize } from '../limits.js';

type Backend = 'redis' | 'postgres';

/** The local Redis; STATUSQ_BENCH_REDIS_URL overrides it (127.0.0.1 only, like every other server here). */
const REDIS_URL = process.env.STATUSQ_BENCH_REDIS_URL || 'redis://127.0.0.1:6379';

/** Jobs per `addBulk()` call. */
const ADD_CHUNK = 1_000;

/** The pickup's one idle worker runs as many slots as statusq's pickup worker does. */
const PICKUP_CONCURRENCY = 16;

const TEARDOWN_MS = 15_000;

/** The queue and worker constructors of one backend, with their connection option filled in. */
interface Kit {
  queue(name: string): Queue;
  worker(name: string, processor: (job: Job) => Promise<void>, concurrency: number, workers: number): Worker;
  /** Removes what the run created. */
  cleanUp(queue: Queue): Promise<void>;
}

function redisOptions(): { host: string; port: number; maxRetriesPerRequest: null } {
  assertLocalUrl(REDIS_URL);
  const url = new URL(REDIS_URL);
  // A Worker's blocking connection must not give up on a command (BullMQ insists on maxRetriesPerRequest null).
  return { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
}

function redisKit(): Kit {
  const connection = redisOptions();
  return {
    queue: (name) => new Queue(name, { connection }),
    worker: (name, processor, concurrency) => new Worker(name, processor, { connection, concurrency, autorun: false }),
    cleanUp: (queue) => queue.obliterate({ force: true }),
  };
}

function postgresKit(url: string, schema: string): Kit {
  const pg = withBackend(createPostgresBackend);
  return {
    // The producer installs the schema (migrate: true); workers only check it.
    queue: (name) => new pg.Queue(name, { connection: { connectionString: url, schema, max: 2, migrate: true, application_name: 'bench-bullmq-producer' } }) as unknown as Queue,
    worker: (name, processor, concurrency, workers) =>
      new pg.Worker(name, processor, {
        // One connection per slot for its fused complete-and-fetch, cut to the run's budget; the LISTEN client is
        // a connection of its own outside the pool (postgres-connection.js), so it comes out of the same share.
        connection: { connectionString: url, schema, max: Math.max(1, poolSize(concurrency + 1, workers, 2) - 1), application_name: 'bench-bullmq-worker' },
        concurrency,
        autorun: false,
      }) as unknown as Worker,
    cleanUp: async () => {
      const admin = await newClient(url, 'bench-bullmq-admin');
      try {
        await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } catch (error) {
        console.warn(`[bullmq] could not drop schema ${schema}: ${String(error)}`);
      } finally {
        await admin.end();
      }
    },
  };
}

/** What the local Redis keeps on disk, read (never set) from its configuration: goes into the variant's name. */
async function redisDurability(): Promise<string> {
  const client = new Redis({ ...redisOptions(), lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await client.connect();
    const save = ((await client.config('GET', 'save')) as string[])[1] ?? '';
    const aof = ((await client.config('GET', 'appendonly')) as string[])[1] ?? '';
    return save === '' && aof === 'no' ? 'nothing on disk' : `save "${save}", appendonly ${aof}`;
  } finally {
    client.disconnect();
  }
}

/**
 * One measured run on a queue of its own: any worker's error fails it (`fail`, then `failed` fires), and
 * `withRun` tears every worker and the queue down after the body, whatever happened.
 */
interface Run {
  kit: Kit;
  name: string;
  queue: Queue;
  workers: Worker[];
  errors: unknown[];
  failed: Latch;
  fail: (error: unknown) => void;
}

async function withRun<T>(backend: Backend, url: string, body: (run: Run) => Promise<T>): Promise<T> {
  assertLocalUrl(url);
  const name = uniqueSchema('bullmq_bench');
  const kit = backend === 'redis' ? redisKit() : postgresKit(url, name);
  const errors: unknown[] = [];
  const failed = new Latch();
  const run: Run = {
    kit,
    name,
    queue: kit.queue(name),
    workers: [],
    errors,
    failed,
    fail: (error) => {
      errors.push(error);
      failed.fire();
    },
  };
  try {
    await run.queue.waitUntilReady();
    return await body(run);
  } finally {
    await teardown(run);
  }
}

async function teardown(run: Run): Promise<void> {
  const by = performance.now() + TEARDOWN_MS;
  await beforeDeadline(Promise.allSettled(run.workers.map((w) => w.close())), by);
  try {
    await run.kit.cleanUp(run.queue);
  } catch (error) {
    console.warn(`[bullmq] could not remove queue ${run.name}: ${String(error)}`);
  } finally {
    await run.queue.close().catch(() => undefined);
  }
}

/** Starts `count` workers into `run.workers`, each reporting its errors and failed jobs to the run. */
async function startWorkers(run: Run, count: number, concurrency: number, processor: (job: Job) => Promise<void>): Promise<Worker[]> {
  const workers = Array.from({ length: count }, () => run.kit.worker(run.name, processor, concurrency, count));
  run.workers.push(...workers);
  for (const worker of workers) {
    // A Worker is an EventEmitter: an 'error' without a listener would throw out of its loop.
    worker.on('error', run.fail);
    worker.on('failed', (_job, error) => run.fail(error));
  }
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  return workers;
}

function burnDown(backend: Backend, options: BurnDownOptions): Promise<BurnDownResult> {
  return withRun(backend, options.url, async (run) => {
    for (let from = 0; from < options.jobs; from += ADD_CHUNK) {
      const count = Math.min(ADD_CHUNK, options.jobs - from);
      await run.queue.addBulk(Array.from({ length: count }, (_, k) => ({ name: 'bench', data: { i: from + k } })));
    }
    const tally = new Tally(options.jobs);
    const delayMs = options.handlerDelayMs;
    const workers = await startWorkers(run, options.workers, options.concurrency, async () => {
      tally.started();
      if (delayMs > 0) await sleep(delayMs);
    });
    for (const worker of workers) worker.on('completed', () => tally.finished());

    // Like statusq's runs, the timeout bounds the work, not the setup: it starts as the workers do.
    const launchedAt = performance.now();
    const deadline = launchedAt + options.timeoutMs;
    for (const worker of workers) worker.run().catch(run.fail);
    const settled = await beforeDeadline(Promise.race([tally.allHandled.promise, run.failed.promise]), deadline);
    const end = performance.now();
    if (run.failed.fired) throw firstError(run.errors) ?? new Error('bullmq worker failed');
    const timedOut = !settled;
    if (!timedOut) {
      const counts = await run.queue.getJobCounts('completed');
      if (counts.completed !== options.jobs) throw new Error(`bullmq ${backend} settled with ${counts.completed} of ${options.jobs} jobs completed (handled ${tally.handled})`);
    }
    return { handled: tally.handled, seconds: (end - (tally.firstStart ?? launchedAt)) / 1000, timedOut };
  });
}

function pickup(backend: Backend, options: PickupOptions): Promise<PickupResult> {
  const setupDeadline = performance.now() + options.timeoutMs;
  return withRun(backend, options.url, async (run) => {
    const producer = run.queue;
    const startedAt: number[] = [];
    let received = 0;
    const allReceived = new Latch();
    const [worker] = await startWorkers(run, 1, PICKUP_CONCURRENCY, async (job) => {
      const now = performance.now();
      const seq = payloadSeq(job.data);
      if (startedAt[seq] === undefined) {
        startedAt[seq] = now;
        if (++received >= options.rows) allReceived.fire();
      }
      await Promise.resolve();
    });
    // Idle means the worker is blocked waiting for a job (BZPOPMIN on Redis, LISTEN on PostgreSQL).
    const idle = new Latch();
    worker!.once('drained', () => idle.fire());
    worker!.run().catch(run.fail);
    if (!(await beforeDeadline(Promise.race([idle.promise, run.failed.promise]), setupDeadline))) throw new Error('bullmq pickup: the worker did not become idle before the timeout');

    return await pacedPickup(options, { failed: run.failed, allReceived, errors: run.errors, startedAt }, (seq) => producer.add('bench', { seq }));
  });
}

function peer(backend: Backend, variant: string): Peer {
  return {
    system: 'bullmq',
    variant,
    ...(backend === 'redis' && { store: 'redis' as const }),
    burnDown: (options) => burnDown(backend, options),
    pickup: (options) => pickup(backend, options),
  };
}

/**
 * The Redis peer, its variant naming what that Redis keeps on disk; undefined (with a line saying why) when
 * no Redis answers, so a machine without one still runs the rest of the bench.
 */
export async function redisPeer(): Promise<Peer | undefined> {
  try {
    return peer('redis', `redis (${await redisDurability()})`);
  } catch (error) {
    console.warn(`[bullmq] no Redis at ${REDIS_URL} (${String(error)}): the BullMQ Redis peer is skipped`);
    return undefined;
  }
}

export const postgres: Peer = peer('postgres', 'postgres backend');
