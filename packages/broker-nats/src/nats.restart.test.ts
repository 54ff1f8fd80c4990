/**
 * Outages, on a nats-server of the test's own (PrivateNats: own port, own store directory), never the shared
 * one: a clean restart, a SIGKILL, and a server that stays away past the reconnect window. Each test starts
 * its own server and disposes of it (store directory included), and closes its brokers.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { BrokerError, type Broker, type DispatchMessage } from '@statusq/core/adapter';
import { PrivateNats, databasesRequired, privateNatsUnavailable } from './testing.js';
import { Brokers, Recorder, jobs, timed, waitFor } from './test/harness.js';

const QUEUE = 'statusq.restart.jobs';
/** What a publish during an outage may take before it rejects: it should fail at once, never hang. */
const OUTAGE_PUBLISH_BOUND_MS = 6_000;

/** Publishes once the broker is connected again: until then publish rejects (ConnectionLost), which is what the relay sees too. */
async function publishWhenBack(broker: Broker, messages: readonly DispatchMessage[]): Promise<void> {
  await waitFor(
    'a publish to be confirmed after the server came back',
    () =>
      broker.publish(messages).then(
        () => true,
        (error: unknown) => {
          if (!(error instanceof BrokerError) || !error.retryable) throw error;
          return false;
        },
      ),
    20_000,
  );
}

const noPrivateServer = await privateNatsUnavailable();
if (noPrivateServer !== null) {
  if (databasesRequired()) {
    it('nats-server can be run for private servers (STATUSQ_REQUIRE_DATABASES=1)', () => {
      throw new Error(noPrivateServer);
    });
  } else {
    it.skip(`[needs nats-server] outage cases: ${noPrivateServer}`, () => undefined);
  }
}

describe.runIf(noPrivateServer === null)('NATS broker across server outages (private nats-server)', () => {
  const brokers = new Brokers();
  let server: PrivateNats | undefined;

  afterEach(async () => {
    await brokers.closeAll();
    await server?.dispose();
    server = undefined;
  });

  it('keeps confirmed messages across a restart and delivers them after it', async () => {
    server = await PrivateNats.start();
    const broker = await brokers.connect(server.url, { queue: QUEUE });
    await broker.publish(jobs(20));
    await server.restart();
    const recorder = new Recorder(true);
    await broker.consume(recorder.options(5));
    await waitFor('the 20 messages published before the restart', () => new Set(recorder.ids()).size === 20, 20_000);
    await waitFor('the stream to empty', async () => (await broker.depth().catch(() => null)) === 0);
    expect(recorder.errors).toEqual([]);
  });

  it('keeps consuming after a restart: a pull outstanding across it, an ack of a delivery from before it', async () => {
    server = await PrivateNats.start();
    const broker = await brokers.connect(server.url, { queue: QUEUE });
    const recorder = new Recorder();
    await broker.consume(recorder.options(10));
    await broker.publish(jobs(1, 1));
    await waitFor('the delivery before the restart', () => recorder.deliveries.length === 1);
    const heldAcrossRestart = recorder.deliveries[0]!;
    await server.stop();
    await server.start();
    await publishWhenBack(broker, jobs(5, 2));
    await heldAcrossRestart.ack();
    await waitFor('the 5 messages published after the restart', () => recorder.deliveries.length >= 6, 20_000);
    await Promise.all(recorder.deliveries.slice(1).map((d) => d.ack()));
    expect(new Set(recorder.ids())).toEqual(new Set([1, 2, 3, 4, 5, 6]));
    // The message acked after the restart is not delivered again: the stream is empty.
    await waitFor('the stream to empty', async () => (await broker.depth()) === 0);
    expect(recorder.deliveries.length).toBe(6);
    expect(recorder.errors).toEqual([]);
  });

  it('rejects a publish during the outage within a bound, and publishes again once the server is back', async () => {
    server = await PrivateNats.start();
    const broker = await brokers.connect(server.url, { queue: QUEUE });
    await server.stop();
    const calls: Array<() => Promise<unknown>> = [() => broker.publish(jobs(3)), () => broker.deadLetter({ ...jobs(1)[0]!, error: 'x' }), () => broker.depth()];
    for (const call of calls) {
      const outcome = await timed(call());
      expect(outcome.error).toBeInstanceOf(BrokerError);
      expect(['ConnectionLost', 'NotConfirmed']).toContain((outcome.error as BrokerError).kind);
      expect(outcome.ms).toBeLessThan(OUTAGE_PUBLISH_BOUND_MS);
    }
    await server.start();
    await publishWhenBack(broker, jobs(3));
    expect(await broker.depth()).toBe(3);
  });

  it('survives a SIGKILL of the server: publish rejects while it is down, consuming goes on after it starts again', async () => {
    server = await PrivateNats.start();
    const broker = await brokers.connect(server.url, { queue: QUEUE });
    const recorder = new Recorder(true);
    await broker.consume(recorder.options(4));
    await broker.publish(jobs(3, 1));
    await waitFor('3 deliveries before the kill', () => recorder.deliveries.length === 3);
    await waitFor('the stream to empty before the kill', async () => (await broker.depth()) === 0);
    await server.kill();
    const outcome = await timed(broker.publish(jobs(1, 99)));
    expect(outcome.error).toBeInstanceOf(BrokerError);
    expect(outcome.ms).toBeLessThan(OUTAGE_PUBLISH_BOUND_MS);
    await server.start();
    await publishWhenBack(broker, jobs(3, 4));
    await waitFor('the 3 messages published after the kill', () => [4, 5, 6].every((id) => recorder.ids().includes(id)), 20_000);
    expect(recorder.errors).toEqual([]);
  });

  it('gives up after the reconnect window: onError(ConnectionLost) once, then every call fails at once', async () => {
    server = await PrivateNats.start();
    const broker = await brokers.connect(server.url, { queue: QUEUE, reconnectWindowMs: 1_000 });
    const recorder = new Recorder(true);
    await broker.consume(recorder.options(2));
    await server.stop();
    await waitFor('onError after the reconnect window', () => recorder.errors.length > 0, 10_000);
    expect(recorder.errors).toHaveLength(1);
    expect(recorder.errors[0]).toBeInstanceOf(BrokerError);
    expect(recorder.errors[0]!.kind).toBe('ConnectionLost');
    expect(recorder.errors[0]!.message).toMatch(/reconnectWindowMs/);
    await server.start();
    const outcome = await timed(broker.publish(jobs(1)));
    expect((outcome.error as BrokerError).kind).toBe('ConnectionLost');
    expect(outcome.ms).toBeLessThan(100);
    expect(recorder.errors).toHaveLength(1);
  });
});
