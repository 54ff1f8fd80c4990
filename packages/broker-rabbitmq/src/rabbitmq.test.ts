/**
 * The broker against the shared RabbitMQ (STATUSQ_TEST_AMQP_URL, default amqp://guest:guest@127.0.0.1:5672):
 * every test on queues of its own, deleted afterwards. Unreachable: the suite skips, or fails when
 * STATUSQ_REQUIRE_DATABASES=1. Restarts and kills run on a private node (rabbitmq.restart.test.ts).
 */
import { spawn } from 'node:child_process';
import amqp from 'amqplib';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, connectBroker as coreConnectBroker } from '@statusq/core';
import { BrokerError, type Broker, type DispatchMessage } from '@statusq/core/adapter';
import * as rabbitmq from './index.js';
import { connectBroker, schemes, type RabbitMQConnectOptions } from './index.js';
import { RABBITMQ_TEST_URL, databasesRequired, deleteQueues, rabbitmqUnavailable, uniqueQueueName } from './testing.js';
import { waitFor } from '@statusq/test-fixtures';
import { consumerLog } from './test/consumer-log.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A fresh queue name, its queues deleted after the test (after the brokers it opened are closed). */
function newQueue(): string {
  const queue = uniqueQueueName();
  cleanups.push(() => deleteQueues([queue]));
  return queue;
}

async function open(queue: string, options: Partial<RabbitMQConnectOptions> = {}, url = RABBITMQ_TEST_URL): Promise<Broker> {
  const broker = await connectBroker(url, { queue, ...options });
  cleanups.push(() => broker.close());
  return broker;
}

/** A plain amqplib channel on the shared server, closed after the test. */
async function rawChannel(): Promise<amqp.Channel> {
  const connection = await amqp.connect(RABBITMQ_TEST_URL, { timeout: 5000 });
  cleanups.push(() => connection.close().catch(() => undefined));
  return connection.createChannel();
}

const message = (id: number): DispatchMessage => ({ table: 'jobs', id, attempt: 1 });

describe('configuration (no server needed)', () => {
  it('serves amqp and amqps', () => {
    expect(schemes).toEqual(['amqp', 'amqps']);
  });

  it.each([
    ['amqp://guest:guest@127.0.0.1:99999', /port/],
    ['amqp://guest:guest@127.0.0.1:5672/?heartbeats=5', /unknown parameter "heartbeats"/],
    ['amqp://guest:guest@127.0.0.1:5672/?heartbeat=soon', /whole number/],
    ['amqp://guest:guest@127.0.0.1:5672/a/b', /virtual host/],
    ['nats://127.0.0.1:4222', /amqp:\/\//],
  ])('%s is a ConfigError', async (url, why) => {
    const error = await connectBroker(url, { queue: 'statusq.never' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(why);
  });

  it('a missing queue or a bad duration is a ConfigError', async () => {
    await expect(connectBroker(RABBITMQ_TEST_URL, { queue: '' })).rejects.toBeInstanceOf(ConfigError);
    await expect(connectBroker(RABBITMQ_TEST_URL, { queue: 'q', reconnectWindowMs: -1 })).rejects.toBeInstanceOf(ConfigError);
  });

  it('hides the password in errors', async () => {
    const error = await connectBroker('amqp://guest:s3cret-pw@127.0.0.1:99999', { queue: 'q' }).catch((e: unknown) => e);
    expect((error as Error).message).not.toContain('s3cret-pw');
  });
});

const unavailable = await rabbitmqUnavailable();
if (unavailable !== null) {
  if (databasesRequired()) {
    it('RabbitMQ server is reachable (STATUSQ_REQUIRE_DATABASES=1)', () => {
      throw new Error(unavailable);
    });
  } else {
    it.skip(`[needs rabbitmq] broker suite: ${unavailable}`, () => undefined);
  }
} else {
  describe('RabbitMQ broker', () => {
    it('RabbitMQ server is reachable', () => {
      expect(unavailable).toBeNull();
    });

    it('core connectBroker loads this package by the URL scheme', async () => {
      const queue = newQueue();
      const broker = await coreConnectBroker(RABBITMQ_TEST_URL, { table: 'jobs', queue, broker: rabbitmq });
      cleanups.push(() => broker.close());
      expect(broker.name).toBe('rabbitmq');
      expect(broker.address).toBe('amqp://guest:***@127.0.0.1:5672');
    });

    it('declares a durable quorum queue and its dead-letter queue', async () => {
      const queue = newQueue();
      await open(queue);
      const channel = await rawChannel();
      channel.on('error', () => undefined);
      // Declaring a classic queue of the name is refused: it exists as a quorum queue.
      await expect(channel.assertQueue(queue, { durable: true })).rejects.toThrow(/x-queue-type.*quorum/);
      const second = await rawChannel();
      await expect(second.checkQueue(`${queue}.dead`)).resolves.toMatchObject({ queue: `${queue}.dead` });
    });

    it('round trip: publish (confirmed), consume, ack', async () => {
      const queue = newQueue();
      const broker = await open(queue);
      await broker.publish([{ table: 'public.jobs', id: '9007199254740993', attempt: 2 }]);
      const log = consumerLog();
      const subscription = await broker.consume(log.options);
      await waitFor('the delivery', () => log.deliveries.length === 1, { timeoutMs: 10_000 });
      const [delivery] = log.deliveries;
      expect(delivery!.message).toEqual({ table: 'public.jobs', id: '9007199254740993', attempt: 2 });
      expect(delivery!.redeliveries).toBe(0);
      await delivery!.ack();
      await delivery!.ack(); // idempotent
      await delivery!.release(); // settled already: a no-op
      await subscription.close();
      await subscription.close();
      expect(await broker.depth()).toBe(0);
      expect(log.errors).toEqual([]);
    });

    it('100 messages to 4 consumers: each delivered once when acked', async () => {
      const queue = newQueue();
      const publisher = await open(queue);
      const seen: number[] = [];
      const logs = [];
      for (let i = 0; i < 4; i++) {
        const broker = await open(queue);
        const log = consumerLog(5);
        log.options.onDelivery = (delivery) => {
          seen.push(Number(delivery.message.id));
          log.deliveries.push(delivery);
          void delivery.ack();
        };
        await broker.consume(log.options);
        logs.push(log);
      }
      await publisher.publish(Array.from({ length: 100 }, (_, i) => message(i)));
      await waitFor('100 deliveries', () => seen.length >= 100, { timeoutMs: 20_000 });
      expect(new Set(seen).size).toBe(100);
      expect(seen.length).toBe(100);
      // Spread over the consumers, not one taking all (prefetch 5 each).
      expect(logs.filter((log) => log.deliveries.length > 0).length).toBeGreaterThan(1);
      await waitFor('an empty queue', async () => (await publisher.depth()) === 0, { timeoutMs: 10_000 });
      expect(logs.flatMap((log) => log.errors)).toEqual([]);
    });

    it('release gives the message back: redelivered with redeliveries >= 1', async () => {
      const queue = newQueue();
      const broker = await open(queue);
      await broker.publish([message(7)]);
      const log = consumerLog(1);
      await broker.consume(log.options);
      await waitFor('the first delivery', () => log.deliveries.length === 1, { timeoutMs: 10_000 });
      await log.deliveries[0]!.release();
      await waitFor('the redelivery', () => log.deliveries.length === 2, { timeoutMs: 10_000 });
      expect(log.deliveries[1]!.message.id).toBe(7);
      expect(log.deliveries[1]!.redeliveries).toBeGreaterThanOrEqual(1);
      await log.deliveries[1]!.ack();
    });

    it("a consumer's connection closing with unacked deliveries: redelivered to another, the old ack rejects ConnectionLost", async () => {
      const queue = newQueue();
      const first = await open(queue);
      const firstLog = consumerLog(10);
      await first.consume(firstLog.options);
      await first.publish([message(1), message(2), message(3)]);
      await waitFor('three deliveries to the first consumer', () => firstLog.deliveries.length === 3, { timeoutMs: 10_000 });
      const second = await open(queue);
      const secondLog = consumerLog(10);
      await second.consume(secondLog.options);
      await first.close();
      await waitFor('the redeliveries to the second consumer', () => secondLog.deliveries.length === 3, { timeoutMs: 10_000 });
      expect(secondLog.deliveries.map((d) => d.message.id).sort()).toEqual([1, 2, 3]);
      expect(secondLog.deliveries.every((d) => d.redeliveries >= 1)).toBe(true);
      const stale = await firstLog.deliveries[0]!.ack().catch((e: unknown) => e);
      expect(stale).toBeInstanceOf(BrokerError);
      expect((stale as BrokerError).kind).toBe('ConnectionLost');
      for (const delivery of secondLog.deliveries) await delivery.ack();
      await waitFor('an empty queue', async () => (await second.depth()) === 0, { timeoutMs: 10_000 });
    });

    it('a body that is no DispatchMessage goes to onMalformed, and its ack removes it', async () => {
      const queue = newQueue();
      const broker = await open(queue);
      const channel = await rawChannel();
      channel.sendToQueue(queue, Buffer.from('not json at all'));
      channel.sendToQueue(queue, Buffer.from('{"table":"jobs","id":1}'));
      const log = consumerLog();
      await broker.consume(log.options);
      await waitFor('two malformed deliveries', () => log.malformed.length === 2, { timeoutMs: 10_000 });
      expect(log.malformed[0]!.raw).toBe('not json at all');
      expect(log.malformed[0]!.error).toMatch(/not JSON/);
      expect(log.malformed[1]!.error).toMatch(/attempt/);
      for (const delivery of log.malformed) await delivery.ack();
      expect(log.deliveries).toEqual([]);
      await waitFor('an empty queue', async () => (await broker.depth()) === 0, { timeoutMs: 10_000 });
    });

    it('deadLetter lands in <queue>.dead, persistent, as JSON', async () => {
      const queue = newQueue();
      const broker = await open(queue);
      await broker.deadLetter({ table: 'jobs', id: 42, attempt: 5, error: 'boom' });
      const channel = await rawChannel();
      let got: amqp.GetMessage | false = false;
      await waitFor('the dead letter', async () => (got = await channel.get(`${queue}.dead`, { noAck: true })) !== false, { timeoutMs: 10_000 });
      const letter = got as unknown as amqp.GetMessage;
      expect(JSON.parse(letter.content.toString())).toEqual({ table: 'jobs', id: 42, attempt: 5, error: 'boom' });
      expect(letter.properties.deliveryMode).toBe(2);
      expect(letter.properties.contentType).toBe('application/json');
      expect(await broker.depth()).toBe(0);
    });

    it('depth counts the messages waiting', async () => {
      const queue = newQueue();
      const broker = await open(queue);
      expect(await broker.depth()).toBe(0);
      await broker.publish([message(1), message(2), message(3)]);
      await waitFor('depth 3', async () => (await broker.depth()) === 3, { timeoutMs: 10_000 });
    });

    it('publishes a large batch under backpressure, all confirmed', async () => {
      const queue = newQueue();
      const broker = await open(queue);
      await broker.publish(Array.from({ length: 5000 }, (_, i) => message(i)));
      await waitFor('depth 5000', async () => (await broker.depth()) === 5000, { timeoutMs: 20_000 });
    });

    it('a port nobody listens on: Unreachable within the connect timeout, naming the address', async () => {
      const started = Date.now();
      const error = await connectBroker('amqp://guest:secret@127.0.0.1:1', { queue: 'statusq.never', connectTimeoutMs: 500 }).catch((e: unknown) => e);
      expect(Date.now() - started).toBeLessThan(3000);
      expect(error).toBeInstanceOf(BrokerError);
      expect((error as BrokerError).kind).toBe('Unreachable');
      expect((error as Error).message).toContain('amqp://guest:***@127.0.0.1:1');
      expect((error as Error).message).not.toContain('secret');
    });

    it('a wrong password: Refused at once, not retried', async () => {
      const url = new URL(RABBITMQ_TEST_URL);
      url.password = 'wrong-password';
      const started = Date.now();
      const error = await connectBroker(url.toString(), { queue: 'statusq.never', connectTimeoutMs: 10_000 }).catch((e: unknown) => e);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(error).toBeInstanceOf(BrokerError);
      expect((error as BrokerError).kind).toBe('Refused');
      expect((error as Error).message).toMatch(/ACCESS.REFUSED/);
      expect((error as Error).message).not.toContain('wrong-password');
    });

    it('a classic queue of the same name: Refused, saying what differs and what to do', async () => {
      const queue = newQueue();
      const channel = await rawChannel();
      await channel.assertQueue(queue, { durable: true });
      const error = await connectBroker(RABBITMQ_TEST_URL, { queue }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BrokerError);
      expect((error as BrokerError).kind).toBe('Refused');
      expect((error as Error).message).toContain(queue);
      expect((error as Error).message).toMatch(/quorum/);
      expect((error as Error).message).toMatch(/delete_queue/);
    });

    it('the queue deleted under a running broker: publish fails, then the broker declares it again and the consumer resumes', async () => {
      const queue = newQueue();
      const broker = await open(queue);
      const log = consumerLog();
      await broker.consume(log.options);
      const channel = await rawChannel();
      await channel.deleteQueue(queue);
      const deadline = Date.now() + 20_000;
      const failures: string[] = [];
      while (true) {
        const error = await broker.publish([message(5)]).then(() => undefined, (e: unknown) => e);
        if (error === undefined) break;
        expect(error).toBeInstanceOf(BrokerError);
        failures.push((error as BrokerError).kind);
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(failures.every((kind) => kind === 'NotConfirmed' || kind === 'ConnectionLost')).toBe(true);
      await waitFor('a delivery on the declared-again queue', () => log.deliveries.some((d) => d.message.id === 5), { timeoutMs: 20_000 });
      for (const delivery of log.deliveries) await delivery.ack().catch(() => undefined);
      expect(log.errors).toEqual([]);
    });

    it('a process that connected, published, consumed and closed exits by itself (no timer left)', async () => {
      const queue = newQueue();
      const entry = new URL('../dist/index.js', import.meta.url).href;
      const script = `
        const { connectBroker } = await import(${JSON.stringify(entry)});
        const broker = await connectBroker(${JSON.stringify(RABBITMQ_TEST_URL)}, { queue: ${JSON.stringify(queue)} });
        await broker.publish([{ table: 'jobs', id: 1, attempt: 1 }]);
        await new Promise((resolve, reject) => {
          broker.consume({ prefetch: 1, onDelivery: (d) => d.ack().then(resolve, reject), onMalformed: reject, onError: reject }).catch(reject);
        });
        await broker.close();
      `;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'inherit', 'inherit'] });
      const exited = await Promise.race([
        new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))),
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 15_000)),
      ]);
      if (exited === 'hung') child.kill('SIGKILL');
      expect(exited).toBe(0);
    });

    it('close is idempotent, and operations after it reject ConnectionLost', async () => {
      const queue = newQueue();
      const broker = await connectBroker(RABBITMQ_TEST_URL, { queue });
      await Promise.all([broker.close(), broker.close()]);
      const error = await broker.publish([message(1)]).catch((e: unknown) => e);
      expect((error as BrokerError).kind).toBe('ConnectionLost');
    });
  });
}
