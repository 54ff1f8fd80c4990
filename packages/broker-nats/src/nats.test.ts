/**
 * The broker against the shared NATS server (STATUSQ_TEST_NATS_URL, default nats://127.0.0.1:4222), each
 * test on queues of its own whose streams it deletes. Unreachable: the suite skips, or fails when
 * STATUSQ_REQUIRE_DATABASES=1. Connecting (names, URLs, refusals, private servers) is in nats.connect.test.ts;
 * restarts and kills are in nats.restart.test.ts.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectBroker as coreConnectBroker } from '@statusq/core';
import { BrokerError, encodeDeadLetter } from '@statusq/core/adapter';
import * as natsBroker from './index.js';
import { CONSUMER_NAME, connectBroker, natsLayout } from './index.js';
import { DEFAULT_NATS_PORT, openConnection, parseNatsUrl } from './nats-connection.js';
import { NATS_TEST_URL, TestQueues, databasesRequired, natsUnavailable } from './testing.js';
import { Brokers, Recorder, jobs, timed, waitFor } from './test/harness.js';
import { TcpProxy, routeThrough } from '@statusq/conformance';

const unavailable = await natsUnavailable();

if (unavailable !== null) {
  if (databasesRequired()) {
    it('NATS server is reachable (STATUSQ_REQUIRE_DATABASES=1)', () => {
      throw new Error(unavailable);
    });
  } else {
    it.skip(`[needs nats] broker suite: ${unavailable}`, () => undefined);
  }
} else {
  describe('NATS broker on the shared server', () => {
    const queues = new TestQueues();
    const brokers = new Brokers();
    let raw: NatsConnection | undefined;

    /** A plain connection of the test's own, for what no broker method does (foreign messages, streams set up by hand). */
    async function rawConnection(): Promise<NatsConnection> {
      raw ??= await openConnection(parseNatsUrl(NATS_TEST_URL), { connectTimeoutMs: 5_000 });
      return raw;
    }

    afterEach(async () => {
      await brokers.closeAll();
      await queues.deleteAll();
    });

    afterAll(async () => {
      await raw?.close();
    });

    it('NATS server is reachable', () => {
      expect(unavailable).toBeNull();
    });

    it('publishes and consumes a round trip, and acks once however often ack() is called', async () => {
      const queue = queues.create();
      const broker = await brokers.connect(NATS_TEST_URL, { queue });
      expect(broker.name).toBe('nats');
      expect(broker.address).toBe(NATS_TEST_URL);
      const messages = [
        { table: 'jobs', id: 1, attempt: 1 },
        { table: 'app.jobs', id: '9007199254740993', attempt: 3 },
      ];
      await broker.publish(messages);
      await broker.publish([]);
      const recorder = new Recorder();
      const subscription = await broker.consume(recorder.options(10));
      await waitFor('two deliveries', () => recorder.deliveries.length === 2);
      expect(recorder.deliveries.map((d) => d.message)).toEqual(messages);
      expect(recorder.deliveries.map((d) => d.redeliveries)).toEqual([0, 0]);
      for (const delivery of recorder.deliveries) {
        await delivery.ack();
        await delivery.ack();
        await delivery.release();
      }
      expect(await broker.depth()).toBe(0);
      await subscription.close();
      await subscription.close();
      expect(recorder.errors).toEqual([]);
    });

    it('spreads 100 messages over 4 consumers, each delivered once when acked', async () => {
      const queue = queues.create();
      const publisher = await brokers.connect(NATS_TEST_URL, { queue });
      const recorders = [new Recorder(true), new Recorder(true), new Recorder(true), new Recorder(true)];
      for (const recorder of recorders) {
        const broker = await brokers.connect(NATS_TEST_URL, { queue });
        await broker.consume(recorder.options(5));
      }
      await publisher.publish(jobs(100));
      const all = () => recorders.flatMap((r) => r.ids());
      await waitFor('100 deliveries', () => all().length >= 100, 20_000);
      await waitFor('the stream to empty', async () => (await publisher.depth()) === 0);
      expect(all().length).toBe(100);
      expect(new Set(all()).size).toBe(100);
      expect(recorders.flatMap((r) => r.deliveries.map((d) => d.redeliveries)).every((n) => n === 0)).toBe(true);
      expect(recorders.filter((r) => r.deliveries.length > 0).length).toBeGreaterThan(1);
      expect(recorders.flatMap((r) => [...r.errors, ...r.ackFailures])).toEqual([]);
    });

    it('holds no more than prefetch deliveries unacked, and pulls again as they are acked', async () => {
      const queue = queues.create();
      const broker = await brokers.connect(NATS_TEST_URL, { queue });
      await broker.publish(jobs(10));
      const recorder = new Recorder();
      await broker.consume(recorder.options(3));
      const jsm = await jetstreamManager(await rawConnection());
      const layout = natsLayout(queue);
      // The server's own count: 3 delivered and unacked, 7 waiting, no pull outstanding for more; and the 3 here.
      // (The server counts a message as delivered as it sends it: the consumer may not have it yet.)
      await waitFor('3 unacked on the server, no pull waiting, and 3 delivered here', async () => {
        const info = await jsm.consumers.info(layout.stream, layout.consumer);
        return info.num_ack_pending === 3 && info.num_pending === 7 && info.num_waiting === 0 && recorder.deliveries.length >= 3;
      });
      expect(recorder.deliveries.length).toBe(3);
      await recorder.deliveries[0]!.ack();
      await waitFor('a fourth delivery', () => recorder.deliveries.length === 4);
      await Promise.all(recorder.deliveries.slice(1).map((d) => d.ack()));
      await waitFor('all 10 delivered', () => {
        for (const d of recorder.deliveries) void d.ack();
        return recorder.deliveries.length === 10;
      });
      await Promise.all(recorder.deliveries.map((d) => d.ack()));
      expect(await broker.depth()).toBe(0);
    });

    it('delivers a released message again, counting the redelivery', async () => {
      const queue = queues.create();
      const broker = await brokers.connect(NATS_TEST_URL, { queue });
      await broker.publish(jobs(1, 42));
      const recorder = new Recorder();
      await broker.consume(recorder.options(1));
      await waitFor('the first delivery', () => recorder.deliveries.length === 1);
      await recorder.deliveries[0]!.release();
      await waitFor('the redelivery', () => recorder.deliveries.length === 2);
      const again = recorder.deliveries[1]!;
      expect(again.message.id).toBe(42);
      expect(again.redeliveries).toBeGreaterThanOrEqual(1);
      await again.ack();
      expect(await broker.depth()).toBe(0);
    });

    it('delivers what a closed consumer left unacked to another after the ack wait', async () => {
      const queue = queues.create();
      const first = await brokers.connect(NATS_TEST_URL, { queue, ackWaitMs: 1_000 });
      await first.publish(jobs(3));
      const gone = new Recorder();
      const subscription = await first.consume(gone.options(3));
      await waitFor('3 deliveries to the first consumer', () => gone.deliveries.length === 3);
      await subscription.close();
      await first.close();
      const second = await brokers.connect(NATS_TEST_URL, { queue, ackWaitMs: 1_000 });
      const recorder = new Recorder(true);
      await second.consume(recorder.options(3));
      await waitFor('the 3 messages again, on the second consumer', () => recorder.deliveries.length === 3, 10_000);
      expect(recorder.ids().sort()).toEqual([1, 2, 3]);
      expect(recorder.deliveries.every((d) => d.redeliveries >= 1)).toBe(true);
      await waitFor('the stream to empty', async () => (await second.depth()) === 0);
      await expect(gone.deliveries[0]!.ack()).rejects.toMatchObject({ kind: 'ConnectionLost' });
    });

    it('stops waiting for an ack\'s confirmation when the connection drops under it, and goes on through the new connection', async () => {
      const queue = queues.create();
      const route = routeThrough(NATS_TEST_URL, DEFAULT_NATS_PORT);
      const proxy = await TcpProxy.start(route.upstream);
      try {
        const broker = await brokers.connect(route.via({ host: '127.0.0.1', port: proxy.port }), { queue, ackWaitMs: 1_000 });
        await broker.publish(jobs(1, 7));
        const recorder = new Recorder();
        await broker.consume(recorder.options(1));
        await waitFor('the delivery', () => recorder.deliveries.length === 1);
        // The ack goes into a network that passes nothing on, which is then cut: its confirmation can never come.
        proxy.freeze();
        const ack = timed(recorder.deliveries[0]!.ack());
        expect(proxy.dropAll()).toBe(1);
        proxy.thaw();
        const outcome = await ack;
        expect(outcome.error).toBeInstanceOf(BrokerError);
        expect((outcome.error as BrokerError).kind).toBe('ConnectionLost');
        expect((outcome.error as BrokerError).message).toMatch(/connection dropped before the server confirmed the ack/);
        // Well short of the 5 s request timeout it used to wait out, holding the delivery's prefetch slot.
        expect(outcome.ms).toBeLessThan(2_000);
        // The ack was lost with the connection: the message comes again (after the ack wait), through the new one.
        await waitFor('the redelivery', () => recorder.deliveries.length === 2, 10_000);
        expect(recorder.deliveries[1]!.message.id).toBe(7);
        await recorder.deliveries[1]!.ack();
        expect(await broker.depth()).toBe(0);
        expect(proxy.accepted).toBeGreaterThanOrEqual(2);
        expect(recorder.errors).toEqual([]);
      } finally {
        await brokers.closeAll();
        await proxy.close();
      }
    });

    it('holds an ack made while the connection is down until it is back, rather than lose it to the reconnect', async () => {
      const queue = queues.create();
      const route = routeThrough(NATS_TEST_URL, DEFAULT_NATS_PORT);
      let proxy = await TcpProxy.start(route.upstream);
      const listen = { host: '127.0.0.1', port: proxy.port };
      try {
        const broker = await brokers.connect(route.via(listen), { queue });
        await broker.publish(jobs(1, 7));
        const recorder = new Recorder();
        await broker.consume(recorder.options(1));
        await waitFor('the delivery', () => recorder.deliveries.length === 1);
        // Nothing listens now: every attempt to reconnect is refused, and each one empties nats.js's outbound buffer.
        await proxy.close();
        // An empty publish sends nothing, and fails at once while the connection is down.
        await waitFor('the broker to see the connection down', () => broker.publish([]).then(() => false, (error: unknown) => /reconnecting/.test(String(error))));
        const ack = timed(recorder.deliveries[0]!.ack());
        proxy = await TcpProxy.start(route.upstream, listen);
        const outcome = await ack;
        expect(outcome.error).toBeUndefined();
        // Sent once the connection was back: the server has it, so the message is gone rather than waiting to come again.
        expect(outcome.ms).toBeLessThan(4_000);
        expect(await broker.depth()).toBe(0);
        expect(recorder.deliveries).toHaveLength(1);
        expect(recorder.errors).toEqual([]);
      } finally {
        await brokers.closeAll();
        await proxy.close();
      }
    });

    it('reports a message that is not a dispatch as malformed, and acks it', async () => {
      const queue = queues.create();
      const broker = await brokers.connect(NATS_TEST_URL, { queue });
      const js = jetstream(await rawConnection());
      await js.publish(natsLayout(queue).dispatchSubject, 'not json at all');
      await js.publish(natsLayout(queue).dispatchSubject, JSON.stringify({ table: 'jobs', id: 1 }));
      await broker.publish(jobs(1, 7));
      const recorder = new Recorder(true);
      await broker.consume(recorder.options(5));
      await waitFor('two malformed and one delivery', () => recorder.malformed.length === 2 && recorder.deliveries.length === 1);
      expect(recorder.malformed.map((m) => m.raw)).toEqual(['not json at all', '{"table":"jobs","id":1}']);
      expect(recorder.malformed[0]!.error).toMatch(/not JSON/);
      expect(recorder.malformed[1]!.error).toMatch(/attempt/);
      await Promise.all(recorder.malformed.map((m) => m.ack()));
      await waitFor('the stream to empty', async () => (await broker.depth()) === 0);
    });

    it('publishes dead letters to <queue>.dead, on a stream of their own that keeps them', async () => {
      const queue = queues.create();
      const broker = await brokers.connect(NATS_TEST_URL, { queue });
      const letter = { table: 'jobs', id: 5, attempt: 3, error: 'boom: it failed' };
      await broker.deadLetter(letter);
      const layout = natsLayout(queue);
      const jsm = await jetstreamManager(await rawConnection());
      const stored = await jsm.streams.getMessage(layout.deadStream, { last_by_subj: layout.deadSubject });
      expect(stored?.subject).toBe(`${queue}.dead`);
      expect(stored?.string()).toBe(encodeDeadLetter(letter));
      expect((await jsm.streams.info(layout.deadStream)).config.retention).toBe(RetentionPolicy.Limits);
      expect(await broker.depth()).toBe(0);
    });

    it('counts waiting and unacked messages as depth', async () => {
      const queue = queues.create();
      const broker = await brokers.connect(NATS_TEST_URL, { queue });
      expect(await broker.depth()).toBe(0);
      await broker.publish(jobs(5));
      expect(await broker.depth()).toBe(5);
      const recorder = new Recorder();
      await broker.consume(recorder.options(2));
      await waitFor('two deliveries', () => recorder.deliveries.length === 2);
      expect(await broker.depth()).toBe(5);
      await recorder.deliveries[0]!.ack();
      expect(await broker.depth()).toBe(4);
    });

    it('sets up idempotently, two at once, and takes the latest ack wait', async () => {
      const queue = queues.create();
      await Promise.all([brokers.connect(NATS_TEST_URL, { queue }), brokers.connect(NATS_TEST_URL, { queue })]);
      await brokers.connect(NATS_TEST_URL, { queue, ackWaitMs: 7_000 });
      const layout = natsLayout(queue);
      const jsm = await jetstreamManager(await rawConnection());
      const consumer = await jsm.consumers.info(layout.stream, layout.consumer);
      expect(consumer.config.ack_wait).toBe(7_000 * 1e6);
      expect(consumer.config).toMatchObject({ max_deliver: -1, ack_policy: 'explicit', filter_subject: layout.dispatchSubject, durable_name: CONSUMER_NAME });
      expect(consumer.config.deliver_subject).toBeUndefined();
      const stream = await jsm.streams.info(layout.stream);
      expect(stream.config).toMatchObject({ retention: RetentionPolicy.Workqueue, storage: StorageType.File, subjects: [layout.dispatchSubject] });
    });

    it('refuses a stream that exists with another retention, saying what differs', async () => {
      const queue = queues.create();
      const layout = natsLayout(queue);
      const jsm = await jetstreamManager(await rawConnection());
      await jsm.streams.add({ name: layout.stream, subjects: [layout.dispatchSubject], retention: RetentionPolicy.Limits, storage: StorageType.Memory });
      const error = await connectBroker(NATS_TEST_URL, { queue }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BrokerError);
      expect((error as BrokerError).kind).toBe('Refused');
      expect((error as BrokerError).message).toMatch(new RegExp(`stream ${layout.stream} exists with retention "limits"; statusq needs "workqueue".*nats stream rm ${layout.stream}`));
    });

    it('recreates the consumer when it is deleted under a running subscription', async () => {
      const queue = queues.create();
      const broker = await brokers.connect(NATS_TEST_URL, { queue });
      const recorder = new Recorder(true);
      await broker.consume(recorder.options(2));
      const layout = natsLayout(queue);
      const jsm = await jetstreamManager(await rawConnection());
      await jsm.consumers.delete(layout.stream, layout.consumer);
      await broker.publish(jobs(3));
      await waitFor('3 deliveries after the consumer came back', () => recorder.deliveries.length === 3, 30_000);
      expect(recorder.errors).toEqual([]);
    });

    it('recreates the stream when it is deleted under a running subscription; publish fails NotConfirmed meanwhile', async () => {
      const queue = queues.create();
      const broker = await brokers.connect(NATS_TEST_URL, { queue });
      const recorder = new Recorder(true);
      await broker.consume(recorder.options(2));
      const layout = natsLayout(queue);
      const jsm = await jetstreamManager(await rawConnection());
      await jsm.streams.delete(layout.stream);
      const refused: BrokerError[] = [];
      await waitFor(
        'a publish confirmed once the consumer recreated the stream',
        () =>
          broker.publish(jobs(3)).then(
            () => true,
            (error: unknown) => {
              if (!(error instanceof BrokerError) || error.kind !== 'NotConfirmed') throw error;
              refused.push(error);
              return false;
            },
          ),
        30_000,
      );
      await waitFor('3 deliveries from the recreated stream', () => recorder.deliveries.length === 3, 30_000);
      expect(recorder.errors).toEqual([]);
      for (const error of refused) expect(error.message).toMatch(/no stream takes/);
    });

    it('rejects every call on a closed broker as ConnectionLost; close is idempotent', async () => {
      const queue = queues.create();
      const broker = await connectBroker(NATS_TEST_URL, { queue });
      const recorder = new Recorder();
      await broker.consume(recorder.options(1));
      await broker.close();
      await broker.close();
      await expect(broker.publish(jobs(1))).rejects.toMatchObject({ kind: 'ConnectionLost' });
      await expect(broker.deadLetter({ ...jobs(1)[0]!, error: 'x' })).rejects.toMatchObject({ kind: 'ConnectionLost' });
      await expect(broker.depth()).rejects.toMatchObject({ kind: 'ConnectionLost' });
      await expect(broker.consume(recorder.options(1))).rejects.toMatchObject({ kind: 'ConnectionLost' });
      expect(recorder.errors).toEqual([]);
    });

    it("is what core's connectBroker loads for nats:// (queue statusq.<table>)", async () => {
      const table = `t${Date.now().toString(36)}`;
      const queue = `statusq.${table}`;
      queues.adopt(queue);
      const broker = await coreConnectBroker(NATS_TEST_URL, { table, broker: natsBroker });
      try {
        await broker.publish(jobs(1, 1, table));
        expect(await broker.depth()).toBe(1);
      } finally {
        await broker.close();
      }
      const jsm = await jetstreamManager(await rawConnection());
      expect((await jsm.streams.info(`statusq_${table}`)).config.subjects).toEqual([`${queue}.dispatch`]);
    });
  });
}
