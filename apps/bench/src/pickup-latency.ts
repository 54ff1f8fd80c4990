/**
 * statusq's side of the pick-up scenarios: one idle worker in this process, rows inserted one at a time by a
 * store of their own, through the table or through a broker.
 */
import { Queue, Relay, Worker, type Store } from '@statusq/core';
import { sleep, type Broker, type ClaimStrategy } from '@statusq/core/tools';
import { openBroker, type BrokerTarget } from './brokers.js';
import type { BenchDatabase } from './databases.js';
import type { PickupResult } from './peer-contract.js';

/**
 * How pick-up runs through a broker (issue 17): `relay`, rows inserted by a plain INSERT and published by a relay
 * in this process (its default polling; LISTEN/NOTIFY wakes it on PostgreSQL); `dispatchTo`, rows enqueued with
 * `dispatchTo`, which publishes them once committed. Either way the worker takes them `from` the broker.
 */
export interface PickupThroughBroker {
  path: 'relay' | 'dispatchTo';
  target: BrokerTarget;
}

/**
 * One idle worker; a row is inserted every `intervalMs`. Latency runs from just before the INSERT (the enqueue)
 * to the handler's start. The worker idles first so a LISTEN connection (PostgreSQL) is in place, as it would be,
 * and so does the relay with `broker`.
 */
export async function pickupLatency(
  db: BenchDatabase,
  table: string,
  options: { rows: number; intervalMs: number; timeoutMs: number; listen: boolean; strategy: ClaimStrategy; broker?: PickupThroughBroker; delayMs?: number },
): Promise<PickupResult> {
  const stores: Store[] = [];
  const brokers: Broker[] = [];
  const through = options.broker;
  const connectBroker = async () => {
    const broker = await openBroker(through!.target, table);
    brokers.push(broker);
    return broker;
  };
  const insertedAt: number[] = [];
  const latencies: number[] = new Array<number>(options.rows).fill(Number.NaN);
  let seen = 0;
  let allSeen!: () => void;
  const finished = new Promise<void>((resolve) => (allSeen = resolve));
  const giveUp = new AbortController();
  let worker: Worker | null = null;
  let relay: Relay | null = null;
  let running: Promise<unknown> = Promise.resolve();
  let relaying: Promise<unknown> = Promise.resolve();
  try {
    const workerStore = await db.connect({ listen: options.listen });
    stores.push(workerStore);
    const inserter = await db.connect();
    stores.push(inserter);
    if (through?.path === 'relay') {
      const relayStore = await db.connect({ listen: true });
      stores.push(relayStore);
      relay = await Relay.create({ store: relayStore, table: { table }, to: await connectBroker() });
      relaying = relay.run();
    }
    const publisher = through?.path === 'dispatchTo' ? await connectBroker() : null;
    const queue = publisher || options.delayMs !== undefined ? await Queue.open(inserter, { table }) : null;
    worker = await Worker.create({
      store: workerStore,
      ...(through && { from: await connectBroker() }),
      table: { table },
      concurrency: 16,
      claimStrategy: options.strategy,
      handler: (job) => {
        const seq = Number(job.payload);
        latencies[seq] = performance.now() - insertedAt[seq]!;
        if (++seen === options.rows) allSeen();
      },
    });
    running = worker.run();
    const q = inserter.dialect.quoteIdentifier(table);
    const placeholder = inserter.dialect.placeholder(1);
    // Deliberate: the worker must be idle (its empty first claims done, its LISTEN issued) before the first row.
    await sleep(500);
    const deadline = performance.now() + options.timeoutMs;
    for (let seq = 0; seq < options.rows && performance.now() < deadline; seq++) {
      // A delayed row's latency runs from when it came due (the database sets next_attempt_at a moment after
      // this, so the figure errs late, never early).
      insertedAt[seq] = performance.now() + (options.delayMs ?? 0);
      if (queue && options.delayMs !== undefined) await queue.enqueue([seq], { delayMs: options.delayMs });
      else if (queue && publisher) await queue.enqueue([seq], { dispatchTo: publisher, onDispatchError: (error) => console.error(`bench: a pick-up row's publish failed: ${String(error)}`) });
      else await inserter.execute({ sql: `INSERT INTO ${q} (payload) VALUES (${placeholder})`, params: [String(seq)] });
      await sleep(options.intervalMs);
    }
    await Promise.race([finished, sleep(Math.max(0, deadline - performance.now()), giveUp.signal)]);
    return { latenciesMs: latencies.filter((ms) => !Number.isNaN(ms)) };
  } finally {
    giveUp.abort();
    await worker?.stop(1_000);
    await running;
    await relay?.stop();
    await relaying;
    await Promise.all(brokers.map((b) => b.close()));
    await Promise.all(stores.map((s) => s.close()));
  }
}
