import { afterEach, describe, expect, it } from 'vitest';
import { BrokerError } from '../broker/broker.js';
import { SchemaError } from '../protocol/errors.js';
import type { Job } from '../worker/handler.js';
import { Relay, type RelayOptions } from './relay.js';
import { MemoryBroker } from '../test/memory-broker.js';
import { JOBS_DDL, SqlJsStore, type SqlJsClaim } from '../test/sqljs-store.js';
import { Worker } from '../worker/worker.js';
import type { WorkerOptions } from '../worker/worker-options.js';
import { Queue } from '../queue/queue.js';
import type { Store, StoreCapabilities } from '../store/store.js';

// The relay and the broker consumer against an in-memory SQLite and an in-memory broker: what they do with
// duplicates, reordering, refused publishes and retries. Real brokers: the broker packages and conformance.

const DISPATCH_DDL = JOBS_DDL.replace('finished_at INTEGER', 'finished_at INTEGER, dispatched_at INTEGER');
let stores: SqlJsStore[] = [];
afterEach(async () => {
  for (const store of stores) await store.close();
  stores = [];
});

async function jobsTable(count: number, ddl = DISPATCH_DDL, claim: SqlJsClaim = 'one-statement'): Promise<SqlJsStore> {
  const store = await SqlJsStore.open(ddl, claim);
  stores.push(store);
  for (let i = 1; i <= count; i++) store.db.run('INSERT INTO jobs (id, date) VALUES (?, ?)', [i, i]);
  return store;
}

function relay(store: SqlJsStore, broker: MemoryBroker, options: Partial<RelayOptions> = {}): Promise<Relay> {
  return Relay.create({ store, table: { table: 'jobs' }, to: broker, pollMinMs: 1, pollMaxMs: 5, ...options });
}

function consumer(store: SqlJsStore, broker: MemoryBroker, options: Partial<WorkerOptions> = {}): Promise<Worker> {
  return Worker.create({ store, table: { table: 'jobs' }, from: broker, handler: () => undefined, pollMinMs: 1, pollMaxMs: 5, retryDelayMs: 1, ...options });
}

const statuses = (store: SqlJsStore) => store.rows('SELECT status FROM jobs ORDER BY id').map((row) => row.status as number | null);

/** Runs `relay` and `workers` until every row is settled (bounded), then stops them all. */
async function runUntilSettled(store: SqlJsStore, relayRun: Relay, workers: Worker[], boundMs = 10_000): Promise<void> {
  const runs = [relayRun.run(), ...workers.map((w) => w.run())];
  const deadline = Date.now() + boundMs;
  try {
    while (store.rows('SELECT COUNT(*) AS n FROM jobs WHERE status IS NULL OR status = 9')[0]!.n !== 0) {
      if (Date.now() > deadline) throw new Error(`rows still open after ${boundMs} ms: ${JSON.stringify(statuses(store))}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  } finally {
    await relayRun.stop();
    await Promise.all(workers.map((w) => w.stop(1_000)));
    await Promise.all(runs);
  }
}

describe('relay and broker consumers', () => {
  it('runs every row once through the broker, each message acked after its settle', async () => {
    const store = await jobsTable(40);
    const broker = new MemoryBroker();
    const runs = new Map<unknown, number>();
    const handler = (job: Job) => void runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
    const workers = await Promise.all([1, 2, 3].map(() => consumer(store, broker, { handler, concurrency: 4 })));
    const r = await relay(store, broker);
    await runUntilSettled(store, r, workers);
    expect(statuses(store)).toEqual(Array(40).fill(1));
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(runs.size).toBe(40);
    expect(broker.published).toHaveLength(40);
    expect(broker.acked).toHaveLength(40);
    // Every claim used up its row's dispatch: nothing counts as waiting in the broker.
    expect(store.rows('SELECT COUNT(*) AS n FROM jobs WHERE dispatched_at IS NOT NULL')[0]!.n).toBe(0);
  });

  it('drops duplicate and out-of-order messages by the claim: no row runs twice', async () => {
    const store = await jobsTable(30);
    const broker = new MemoryBroker();
    broker.copies = 3;
    broker.reversed = true;
    const runs = new Map<unknown, number>();
    const handler = (job: Job) => void runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
    const workers = await Promise.all([1, 2].map(() => consumer(store, broker, { handler, concurrency: 3 })));
    const r = await relay(store, broker);
    await runUntilSettled(store, r, workers);
    expect(statuses(store)).toEqual(Array(30).fill(1));
    expect(runs.size).toBe(30);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    // Every copy was acked: none is left to be redelivered for ever.
    expect(broker.acked).toHaveLength(90);
    expect(await broker.depth()).toBe(0);
  });

  it('publishes a retried row again once it is due, and it succeeds on its next attempt', async () => {
    const store = await jobsTable(5);
    const broker = new MemoryBroker();
    const attempts: Array<[unknown, number]> = [];
    const handler = (job: Job) => {
      attempts.push([job.id, job.attempt]);
      if (job.attempt === 1) throw new Error('first attempt fails');
    };
    const workers = [await consumer(store, broker, { handler, maxAttempts: 3 })];
    const r = await relay(store, broker);
    await runUntilSettled(store, r, workers);
    expect(statuses(store)).toEqual(Array(5).fill(1));
    expect(attempts).toHaveLength(10);
    expect(broker.published.filter((m) => m.attempt === 2)).toHaveLength(5);
  });

  it('gives a poison row up (status 0) and sends it to the dead-letter queue', async () => {
    const store = await jobsTable(2);
    const broker = new MemoryBroker();
    const workers = [await consumer(store, broker, { maxAttempts: 2, handler: () => Promise.reject(new Error('poison')) })];
    const r = await relay(store, broker);
    await runUntilSettled(store, r, workers);
    expect(statuses(store)).toEqual([0, 0]);
    await expect.poll(() => broker.deadLetters.length).toBe(2);
    expect(broker.deadLetters[0]).toMatchObject({ table: 'jobs', attempt: 2, error: 'Error: poison' });
  });

  it('dead-letters a row its reaper gave up (each attempt lost its worker), and its run waits for the dead letter', async () => {
    const store = await jobsTable(1);
    // Row 1 was on its last attempt when its worker died: its lease ran out long ago.
    store.db.run(`UPDATE jobs SET status = 9, claimed_at = 0, worker_id = 'gone:1', attempt_count = 1 WHERE id = 1`);
    const broker = new MemoryBroker();
    broker.ackDelayMs = 50;
    const reaped: Array<{ count: number; givenUp: unknown[] }> = [];
    const w = await consumer(store, broker, { maxAttempts: 2, leaseMs: 1_000, exitWhenEmpty: true });
    w.on('reaped', (e) => reaped.push(e));
    await w.run();
    // The caller may close the broker now: the dead letter is in, not in flight.
    expect(broker.deadLetters).toEqual([{ table: 'jobs', id: 1, attempt: 2, error: expect.stringMatching(/^lease expired after 1000 ms/) }]);
    expect(reaped).toEqual([{ count: 1, givenUp: [{ id: 1, attempt: 2, error: expect.stringMatching(/^lease expired/) }] }]);
    expect(statuses(store)).toEqual([0]);
  });

  it('unmarks a batch the broker refused and publishes it at the next pass', async () => {
    const store = await jobsTable(3);
    const broker = new MemoryBroker();
    broker.refuseNextPublish = new BrokerError('NotConfirmed', 'nacked');
    const errors: string[] = [];
    const r = await relay(store, broker);
    r.on('error', ({ error }) => errors.push((error as Error).message));
    const workers = [await consumer(store, broker)];
    await runUntilSettled(store, r, workers);
    expect(errors).toEqual(['nacked']);
    expect(r.counters.publishFailures).toBe(1);
    expect(statuses(store)).toEqual([1, 1, 1]);
  });

  it('publishes again a row dispatched longer ago than the redispatch age and never claimed (a lost message)', async () => {
    const store = await jobsTable(2);
    const broker = new MemoryBroker();
    const r = await relay(store, broker, { redispatchMs: 1_000 });
    const run = r.run();
    await expect.poll(() => broker.published.length).toBe(2);
    // The broker "lost" both messages: nobody consumes them. Age the dispatch instead of waiting for it.
    store.db.run('UPDATE jobs SET dispatched_at = dispatched_at - 1500');
    await expect.poll(() => broker.published.length).toBe(4);
    await r.stop();
    await run;
    // First in queue order (newest first); published again oldest dispatch first, here the same instant.
    expect(broker.published.slice(0, 2).map((m) => m.id)).toEqual([2, 1]);
    expect(broker.published.slice(2).map((m) => m.id).sort()).toEqual([1, 2]);
  });

  it('acks a message of another table or in another shape, and reports it', async () => {
    const store = await jobsTable(1);
    const broker = new MemoryBroker();
    const w = await consumer(store, broker);
    const errors: string[] = [];
    w.on('error', ({ error }) => errors.push((error as Error).message));
    const run = w.run();
    broker.inject('not json');
    broker.inject(JSON.stringify({ table: 'other', id: 1, attempt: 1 }));
    broker.inject(JSON.stringify({ table: 'jobs', id: { $ne: 1 }, attempt: 1 }));
    await expect.poll(() => broker.acked.length).toBe(3);
    await w.stop();
    await run;
    expect(errors).toHaveLength(3);
    expect(errors[1]).toContain('names table "other"');
    expect(statuses(store)).toEqual([null]);
  });

  it('ends the run with the broker error when the subscription breaks for good', async () => {
    const store = await jobsTable(0);
    const broker = new MemoryBroker();
    const w = await consumer(store, broker);
    const run = w.run();
    await expect.poll(() => broker['consumers'].size).toBe(1);
    broker.breakSubscriptions();
    await expect(run).rejects.toMatchObject({ kind: 'ConnectionLost' });
  });

  it('refuses a table without the dispatch column, naming the migration (relay and consumer alike)', async () => {
    const store = await jobsTable(1, JOBS_DDL);
    const broker = new MemoryBroker();
    await expect(relay(store, broker)).rejects.toThrow(SchemaError);
    await expect(relay(store, broker)).rejects.toThrow('statusq migrate --with dispatch');
    await expect(consumer(store, broker)).rejects.toThrow('statusq migrate --with dispatch');
    expect(statuses(store)).toEqual([null]);
  });

  it('runs beside polling workers on the same table (a migration in progress): every row once', async () => {
    const store = await jobsTable(60);
    const broker = new MemoryBroker();
    const runs = new Map<unknown, number>();
    const handler = (job: Job) => void runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
    const poller = await Worker.create({ store, table: { table: 'jobs' }, handler, pollMinMs: 1, pollMaxMs: 5, concurrency: 2, batch: 2 });
    const workers = [await consumer(store, broker, { handler, concurrency: 2 }), poller];
    const r = await relay(store, broker);
    await runUntilSettled(store, r, workers);
    expect(runs.size).toBe(60);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(poller.counters.completed).toBeGreaterThan(0);
    expect(workers[0]!.counters.completed).toBeGreaterThan(0);
  });

  it('enqueue with dispatchTo publishes the committed rows itself; a refused publish leaves them to the relay', async () => {
    const store = await jobsTable(0, DISPATCH_DDL.replace('date INTEGER NOT NULL', 'date INTEGER NOT NULL DEFAULT 0'));
    // As the SQLite and PostgreSQL stores: INSERT ... RETURNING gives each row's id to publish.
    Object.assign(store.capabilities, { insertReturning: true });
    const broker = new MemoryBroker();
    const queue = await Queue.open(store, { table: 'jobs' });
    const ids = await queue.enqueue([{ a: 1 }, { a: 2 }], { dispatchTo: broker });
    expect(broker.published.map((m) => m.id)).toEqual(ids);
    expect(store.rows('SELECT COUNT(*) AS n FROM jobs WHERE dispatched_at IS NOT NULL')[0]!.n).toBe(2);
    expect(await queue.dispatchedCount()).toBe(2);
    broker.refuseNextPublish = new BrokerError('ConnectionLost', 'gone');
    const failures: unknown[] = [];
    const [third] = await queue.enqueue([{ a: 3 }], { dispatchTo: broker, onDispatchError: (error) => failures.push(error) });
    expect(failures).toHaveLength(1);
    expect(store.rows('SELECT dispatched_at FROM jobs WHERE id = ?', [third as number])[0]!.dispatched_at).toBeNull();
    const r = await relay(store, broker);
    await runUntilSettled(store, r, [await consumer(store, broker)]);
    expect(statuses(store)).toEqual([1, 1, 1]);
    // The relay published only the row whose publish failed.
    expect(broker.published.map((m) => m.id)).toEqual([...ids, third]);
    await expect(queue.enqueue([{ a: 4 }], { dispatchTo: broker, delayMs: 1000 })).rejects.toThrow('delayed row');
  });

  it('with exitWhenEmpty runs on while a row is processing: a claim its worker loses comes back pending and is published again', async () => {
    const store = await jobsTable(1);
    // Claimed by a worker elsewhere (a claim uses up the dispatch); that worker dies, a reaper puts the row back.
    store.db.run("UPDATE jobs SET status = 9, claimed_at = ?, worker_id = 'elsewhere', dispatched_at = NULL WHERE id = 1", [Date.now()]);
    const broker = new MemoryBroker();
    let idlePasses = 0;
    store.afterCommit = (statements) => {
      const sql = statements[0]?.sql ?? '';
      if (!/^SELECT .* FROM "jobs"/.test(sql) || !sql.includes('dispatched_at')) return;
      // A few empty passes while the row is processing, then the reap; once published, the row is done.
      if (++idlePasses === 3) store.db.run("UPDATE jobs SET status = NULL, claimed_at = NULL, worker_id = NULL WHERE id = 1");
      if (broker.published.length > 0) store.db.run('UPDATE jobs SET status = 1 WHERE id = 1');
    };
    const relayRun = await relay(store, broker, { exitWhenEmpty: true });
    await relayRun.run();
    expect(broker.published.map((m) => String(m.id))).toEqual(['1']);
    expect(statuses(store)).toEqual([1]);
  });

  it('starts no wait once stop() was called during a pass (its wake() ends only the waits under way)', async () => {
    const store = await jobsTable(0);
    const waits: number[] = [];
    let stopCall: Promise<unknown> | null = null;
    // A store that is woken by writes: the relay's idle wait is the store's own, recorded here.
    (store as { capabilities: StoreCapabilities }).capabilities = { ...store.capabilities, listenNotify: true };
    (store as Store).waitForWork = async (ms) => {
      waits.push(ms);
    };
    const relayRun = await relay(store, new MemoryBroker());
    // The pass after the first wait sees stop() called while it runs.
    store.afterCommit = () => {
      if (waits.length === 1 && !stopCall) stopCall = relayRun.stop();
    };
    await relayRun.run();
    await stopCall;
    expect(stopCall).not.toBeNull();
    expect(waits).toHaveLength(1);
  });

  it('a consumer run that ends resolves only after the acks of its last jobs were answered', async () => {
    const store = await jobsTable(3);
    const broker = new MemoryBroker();
    broker.ackDelayMs = 50;
    const r = await relay(store, broker);
    const relayRun = r.run();
    await expect.poll(() => broker.published.length).toBe(3);
    const w = await consumer(store, broker, { exitWhenEmpty: true });
    await w.run();
    // The caller closes the broker now: no ack may still be in flight, or its message would be delivered again.
    expect(broker.acked).toHaveLength(3);
    await r.stop();
    await relayRun;
  });
});
