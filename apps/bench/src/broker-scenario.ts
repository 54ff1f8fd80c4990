/**
 * The broker scenario (issue 17): rows reaching workers through a broker queue, published by a relay or by the
 * enqueue itself, against the table polled as before; pick-up latency and burn-down on the server databases.
 */
import { Relay } from '@statusq/core';
import type { Broker } from '@statusq/core/tools';
import { BENCH_BROKERS, benchQueue, openBroker, type BenchBroker, type BrokerTarget } from './brokers.js';
import type { BenchDatabase, Dialect } from './databases.js';
import { pickupLatency } from './pickup-latency.js';
import { pickupRecord } from './pickup-scenarios.js';
import { withDatabase, type BenchContext } from './scenarios.js';
import { burnDownInProcesses, type AlongsideRun, type StatusqRunOptions } from './statusq-runs.js';
import { burnDownRecord } from './throughput-scenarios.js';

/** The dialects the broker path is measured on: the server databases (a SQLite table has one process, and its file watch already wakes workers). */
const BROKER_DIALECTS: readonly Dialect[] = ['postgres', 'mysql'];

/** Variant names of the broker path: `relay, rabbitmq` and `dispatchTo, rabbitmq` (issue 17); `polling` is the table polled as before. */
export function brokerVariant(path: 'relay' | 'dispatchTo', broker: BenchBroker): string {
  return `${path}, ${broker.name}`;
}
export const POLLING_VARIANT = 'polling';

/** Runs `body` with a fresh queue of `broker` for `table`, deleted afterwards with whatever messages it still holds. */
async function withBrokerQueue<T>(broker: BenchBroker, table: string, body: (target: BrokerTarget) => Promise<T>): Promise<T> {
  const target = benchQueue(broker, table);
  try {
    return await body(target);
  } finally {
    await broker.deleteQueue(target.queue);
  }
}

/** What the relay beside a broker burn-down did: errors it survived, by kind, and the time its confirmed batches took. */
interface RelayLog {
  errors: Record<string, number>;
  /** Sum of each confirmed batch's SELECT-to-last-confirm time: near the run's span, the relay is what paces it. */
  busyMs: number;
}

/**
 * A relay in the bench process over `table`, publishing to `target` from when the workers start until they are
 * done, on a store and a broker connection of its own; what it did goes into `log`.
 */
function relayAlongside(db: BenchDatabase, table: string, target: BrokerTarget, log: RelayLog): AlongsideRun {
  let relay: Relay | null = null;
  let stopped = false;
  return {
    async start() {
      const store = await db.connect({ listen: false, connections: 1 });
      let broker: Broker | null = null;
      try {
        broker = await openBroker(target, table);
        relay = await Relay.create({ store, table: { table }, to: broker });
        relay.on('error', ({ error, during }) => {
          const key = `relay ${during}: ${error instanceof Error ? error.message.slice(0, 80) : String(error)}`;
          log.errors[key] = (log.errors[key] ?? 0) + 1;
        });
        relay.on('published', ({ durationMs }) => (log.busyMs += durationMs));
        // Workers that were done before the relay got going stopped it already.
        if (!stopped) await relay.run();
      } finally {
        await broker?.close();
        await store.close();
      }
    },
    async stop() {
      stopped = true;
      await relay?.stop();
    },
  };
}

/**
 * Issue 17's broker path against polling, on the server databases:
 *
 * - pick-up latency (PickupRecord, beside the pickup scenario's polling, idle probe and LISTEN rows): one idle
 *   worker taking rows `from` the broker, rows arriving one every pickupIntervalMs, published by a relay in this
 *   process (`relay, <broker>`: a plain INSERT; the relay polls with its defaults, or is woken by LISTEN/NOTIFY on
 *   PostgreSQL) or by the enqueue itself (`dispatchTo, <broker>`);
 * - a burn-down of brokerJobs pending rows (BurnDownRecord `broker-burn-down`): consumer workers in a child
 *   process (the polling burn-down's machinery: each worker with its own store and broker connection, 16 slots)
 *   and one relay in the bench process started with them, against polling workers at the same counts on the
 *   same table size. Neither side warms up first: a relay's warm-up would need a queue and a relay of its own.
 */
export async function broker(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  const pickupTimeoutMs = plan.pickupRows * plan.pickupIntervalMs * 3 + 5_000;
  for (const dialect of ctx.dialects.filter((d) => BROKER_DIALECTS.includes(d))) {
    await withDatabase(dialect, async (db) => {
      const table = 'bench_broker';
      for (const bench of BENCH_BROKERS) {
        for (const path of ['relay', 'dispatchTo'] as const) {
          await db.createTable(table, { pending: 0, finished: 0 }, { dispatch: true });
          const { latenciesMs } = await withBrokerQueue(bench, table, (target) =>
            pickupLatency(db, table, { rows: plan.pickupRows, intervalMs: plan.pickupIntervalMs, timeoutMs: pickupTimeoutMs, listen: false, strategy: 'native', broker: { path, target } }),
          );
          ctx.record(pickupRecord('statusq', brokerVariant(path, bench), dialect, plan.pickupRows, latenciesMs));
        }
      }
      const runs = [...plan.workerCounts.map((workers) => ({ workers, processes: 1 })), ...plan.processCounts.map((processes) => ({ workers: processes, processes }))];
      for (const { workers, processes } of runs) {
        const options: StatusqRunOptions = { table, workers, concurrency: plan.concurrency, strategy: 'native', handlerDelayMs: 0, timeoutMs: plan.runTimeoutMs };
        await db.createTable(table, { pending: plan.brokerJobs, finished: 0 }, { dispatch: true });
        ctx.record(burnDownRecord('broker-burn-down', dialect, options, processes, plan.brokerJobs, await burnDownInProcesses(db, options, processes), POLLING_VARIANT));
        for (const bench of BENCH_BROKERS) {
          await db.createTable(table, { pending: plan.brokerJobs, finished: 0 }, { dispatch: true });
          await withBrokerQueue(bench, table, async (target) => {
            const relayLog: RelayLog = { errors: {}, busyMs: 0 };
            const consumers: StatusqRunOptions = { ...options, from: target };
            const result = await burnDownInProcesses(db, consumers, processes, relayAlongside(db, table, target, relayLog));
            for (const [key, n] of Object.entries(relayLog.errors)) result.errors[key] = (result.errors[key] ?? 0) + n;
            const record = burnDownRecord('broker-burn-down', dialect, consumers, processes, plan.brokerJobs, result, brokerVariant('relay', bench));
            ctx.record({ ...record, relayBusyPercent: Math.round((100 * relayLog.busyMs) / (1000 * result.seconds)) });
          });
        }
      }
      await db.dropTable(table);
    });
  }
}
