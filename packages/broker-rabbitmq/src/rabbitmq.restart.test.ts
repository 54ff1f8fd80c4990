/**
 * Outages on a private RabbitMQ node of this file's own (PrivateRabbitMQ: its own node name, ports and data
 * under a temporary directory), never the shared one: a graceful restart, a SIGKILL of the node, an outage
 * longer than the reconnect window. Unreachable shared server: the suite skips, or fails when
 * STATUSQ_REQUIRE_DATABASES=1 (the shared server stands for "RabbitMQ is installed and runs here").
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BrokerError, type Broker, type DispatchMessage } from '@statusq/core/adapter';
import { connectBroker, type RabbitMQConnectOptions } from './index.js';
import { PrivateRabbitMQ, databasesRequired, deleteQueues, rabbitmqUnavailable, uniqueQueueName } from './testing.js';
import { waitFor } from '@statusq/test-fixtures';
import { consumerLog } from './test/consumer-log.js';

const message = (id: number): DispatchMessage => ({ table: 'jobs', id, attempt: 1 });

/** Publishes until RabbitMQ confirms (the broker reconnects in the background meanwhile), at most `timeoutMs`. */
async function publishOnceBack(broker: Broker, messages: DispatchMessage[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (true) {
    try {
      await broker.publish(messages);
      return;
    } catch (error) {
      if (!(error instanceof BrokerError) || error.kind !== 'ConnectionLost' || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** publish() while the node is down: a quick ConnectionLost. */
async function expectQuickConnectionLost(broker: Broker): Promise<void> {
  const started = Date.now();
  const error = await broker.publish([message(999)]).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(BrokerError);
  expect((error as BrokerError).kind).toBe('ConnectionLost');
  expect(Date.now() - started).toBeLessThan(1000);
}

const unavailable = await rabbitmqUnavailable();
if (unavailable !== null) {
  if (databasesRequired()) {
    it('RabbitMQ server is reachable (STATUSQ_REQUIRE_DATABASES=1)', () => {
      throw new Error(unavailable);
    });
  } else {
    it.skip(`[needs rabbitmq] restart suite: ${unavailable}`, () => undefined);
  }
} else {
  describe('RabbitMQ broker through outages of a private node', () => {
    let node: PrivateRabbitMQ;
    const cleanups: (() => Promise<unknown>)[] = [];

    beforeAll(async () => {
      node = await PrivateRabbitMQ.start();
    }, 90_000);

    afterAll(async () => {
      await node?.dispose();
    });

    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    }, 90_000);

    function newQueue(): string {
      const queue = uniqueQueueName();
      cleanups.push(async () => {
        // The node may have been left down by a failed test: start it so the queue can be deleted.
        if ((await rabbitmqUnavailable(node.url)) !== null) await node.start();
        await deleteQueues([queue], node.url);
      });
      return queue;
    }

    async function open(queue: string, options: Partial<RabbitMQConnectOptions> = {}): Promise<Broker> {
      const broker = await connectBroker(node.url, { queue, ...options });
      cleanups.push(() => broker.close());
      return broker;
    }

    it('confirmed messages survive a graceful restart and are consumed after it', async () => {
      const queue = newQueue();
      const publisher = await connectBroker(node.url, { queue });
      await publisher.publish(Array.from({ length: 20 }, (_, i) => message(i)));
      await publisher.close();
      await node.restart();
      const consumer = await open(queue);
      const log = consumerLog(50);
      await consumer.consume(log.options);
      await waitFor('20 deliveries after the restart', () => log.deliveries.length === 20, { timeoutMs: 20_000 });
      expect(new Set(log.deliveries.map((d) => d.message.id)).size).toBe(20);
      for (const delivery of log.deliveries) await delivery.ack();
    });

    for (const outage of ['graceful restart', 'kill -9'] as const) {
      it(`${outage}: the consumer reconnects by itself and keeps receiving; publish during the outage rejects ConnectionLost; unacked deliveries come again`, async () => {
        const queue = newQueue();
        // A window well past a slow start of the node on a loaded machine: this case is about reconnecting.
        const publisher = await open(queue, { reconnectWindowMs: 120_000 });
        const consumer = await open(queue, { reconnectWindowMs: 120_000 });
        const log = consumerLog(10);
        await consumer.consume(log.options);
        await publisher.publish([message(1), message(2)]);
        await waitFor('two deliveries before the outage', () => log.deliveries.length === 2, { timeoutMs: 10_000 });
        // One acked, one left unacked across the outage.
        await log.deliveries[0]!.ack();
        const unacked = log.deliveries[1]!;

        if (outage === 'kill -9') await node.kill();
        else await node.stop();
        await waitFor('the publisher to see the outage', async () => (await publisher.publish([message(999)]).then(() => false, () => true)), { timeoutMs: 10_000 });
        await expectQuickConnectionLost(publisher);
        const stale = await unacked.ack().catch((e: unknown) => e);
        expect((stale as BrokerError).kind).toBe('ConnectionLost');

        await node.start();
        await publishOnceBack(publisher, [message(3)], 30_000);
        await waitFor('a delivery after the restart', () => log.deliveries.some((d) => d.message.id === 3), { timeoutMs: 30_000 });
        // The message left unacked at the outage is delivered again.
        await waitFor('the unacked message again', () => log.deliveries.slice(2).some((d) => d.message.id === 2), { timeoutMs: 30_000 });
        const again = log.deliveries.slice(2).find((d) => d.message.id === 2)!;
        expect(again.redeliveries).toBeGreaterThanOrEqual(1);
        for (const delivery of log.deliveries.slice(2)) await delivery.ack();
        expect(log.errors).toEqual([]);
        await waitFor('an empty queue', async () => (await publisher.depth()) === 0, { timeoutMs: 10_000 });
      });
    }

    it('an outage longer than the reconnect window: onError(ConnectionLost); publish later reconnects on demand', async () => {
      const queue = newQueue();
      const broker = await open(queue, { reconnectWindowMs: 1500 });
      const log = consumerLog(10);
      await broker.consume(log.options);
      await node.stop();
      await waitFor('onError', () => log.errors.length === 1, { timeoutMs: 10_000 });
      expect(log.errors[0]!.kind).toBe('ConnectionLost');
      expect(log.errors[0]!.message).toMatch(/reconnectWindowMs/);
      await expectQuickConnectionLost(broker);
      await node.start();
      await publishOnceBack(broker, [message(1)], 30_000);
      expect(await broker.depth()).toBe(1);
    });
  });
}
