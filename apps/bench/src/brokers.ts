/**
 * The brokers the broker-path scenario runs through (issue 17), each on its shared local server. Adding one is
 * one entry: its name in the variants (`relay, <name>`), the package connectBroker loads, the URL, and how to
 * delete a queue (or stream) the run made.
 */
import { randomBytes } from 'node:crypto';
import { connectBroker } from '@statusq/core';
import type { Broker } from '@statusq/core/tools';

export interface BenchBroker {
  /** As it appears in variant names: `relay, rabbitmq`. */
  readonly name: string;
  /** The package connectBroker loads (resolved from the bench's own dependencies, in child processes too). */
  readonly module: string;
  readonly url: string;
  /** Deletes a queue (stream) the run made, and anything the package made beside it (its dead-letter queue). */
  deleteQueue(queue: string): Promise<void>;
}

const RABBITMQ_URL = process.env.STATUSQ_TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const NATS_URL = process.env.STATUSQ_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

export const BENCH_BROKERS: readonly BenchBroker[] = [
  {
    name: 'rabbitmq',
    module: '@statusq/broker-rabbitmq',
    url: RABBITMQ_URL,
    // Imported when needed: a broker package whose server is not in use costs nothing at start-up.
    deleteQueue: async (queue) => (await import('@statusq/broker-rabbitmq/testing')).deleteQueues([queue], RABBITMQ_URL),
  },
  {
    name: 'nats',
    module: '@statusq/broker-nats',
    url: NATS_URL,
    deleteQueue: async (queue) => (await import('@statusq/broker-nats/testing')).deleteQueueStreams(NATS_URL, [queue]),
  },
];

/** What a worker (or a child process's worker) needs to open its own connection to the run's queue: plain data. */
export interface BrokerTarget {
  module: string;
  url: string;
  queue: string;
}

/** A queue no other run (or a leftover of an earlier one) uses: messages of a dropped table must not name the next one's rows. */
export function benchQueue(broker: BenchBroker, table: string): BrokerTarget {
  return { module: broker.module, url: broker.url, queue: `statusq.bench.${table}.${process.pid}.${randomBytes(4).toString('hex')}` };
}

export function openBroker(target: BrokerTarget, table: string): Promise<Broker> {
  return connectBroker(target.url, { table, queue: target.queue, broker: target.module });
}
