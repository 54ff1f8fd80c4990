import { jetstream, jetstreamManager, type Consumer, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ConfigError } from '@statusq/core';
import { BrokerError, encodeDeadLetter, encodeDispatch, type Broker, type ConsumeOptions, type DeadLetter, type DispatchMessage, type Subscription } from '@statusq/core/adapter';
import { openConnection, parseNatsUrl, type NatsTarget } from './nats-connection.js';
import { isAuthError, isJetStreamDisabled, isNoResponders, isNotFound, isTimeout, messageOf, toBrokerError, toSetupError } from './nats-errors.js';
import { natsLayout, type NatsLayout } from './nats-layout.js';
import { DEFAULT_ACK_WAIT_MS, DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_RECONNECT_WINDOW_MS, durationOption, type NatsBrokerOptions } from './nats-options.js';
import { ensureLayout, type SetupOptions } from './nats-setup.js';
import { PullSubscription, type PullSource } from './nats-subscription.js';
import { REQUEST_TIMEOUT_MS, within } from './nats-timeouts.js';

/** What unlessDropped() gives when the connection dropped before the answer came. */
const DROPPED = Symbol('dropped');

/** Opens `url` (nats://[user:password@]host[:port]) for `options.queue`: see the package README for the layout. */
export async function connectBroker(url: string, options: NatsBrokerOptions): Promise<Broker> {
  const layout = natsLayout(options.queue);
  const target = parseNatsUrl(url);
  const connectTimeoutMs = durationOption(options.connectTimeoutMs, DEFAULT_CONNECT_TIMEOUT_MS, 'connectTimeoutMs', 1);
  const setup: SetupOptions = {
    ackWaitMs: durationOption(options.ackWaitMs, DEFAULT_ACK_WAIT_MS, 'ackWaitMs', 100),
    onWarning: options.onWarning ?? (() => undefined),
  };
  const reconnectWindowMs = durationOption(options.reconnectWindowMs, DEFAULT_RECONNECT_WINDOW_MS, 'reconnectWindowMs', 0);
  const nc = await openConnection(target, { connectTimeoutMs });
  try {
    let jsm: JetStreamManager;
    try {
      jsm = await jetstreamManager(nc, { timeout: REQUEST_TIMEOUT_MS });
    } catch (error) {
      if (isJetStreamDisabled(error)) {
        throw new BrokerError('Refused', `NATS at ${target.address} has JetStream disabled (${messageOf(error)}): start nats-server with -js (or a jetstream {} block in its configuration), or enable JetStream for this account`, 'JetStreamNotEnabled', { cause: error });
      }
      throw toSetupError(error, `checking JetStream on NATS at ${target.address}`);
    }
    await ensureLayout(jsm, layout, setup);
    return new NatsBroker(nc, jsm, target, layout, setup, reconnectWindowMs);
  } catch (error) {
    await nc.close().catch(() => undefined);
    throw error;
  }
}

class NatsBroker implements Broker, PullSource {
  readonly name = 'nats';
  readonly address: string;
  private readonly js: JetStreamClient;
  private connected = true;
  /** Set once the broker gave up (reconnect window passed, or the server closed the connection for good). */
  private lost: BrokerError | undefined;
  private closing: Promise<void> | undefined;
  private giveUpTimer: NodeJS.Timeout | undefined;
  private readonly subscriptions = new Set<PullSubscription>();
  /** Called when the connection drops: publishes and acks waiting for their confirmations stop waiting. */
  private readonly onDisconnect = new Set<() => void>();
  /** Resolved when the connection is back (or the broker gave up or closed): what waits for a reconnect. */
  private reconnectWaiters: Array<() => void> = [];
  private lastRepairWarning: string | undefined;
  private readonly status: AsyncIterable<{ type: string }> & { stop?: () => void };
  private readonly watching: Promise<void>;

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    target: NatsTarget,
    private readonly layout: NatsLayout,
    private readonly setup: SetupOptions,
    private readonly reconnectWindowMs: number,
  ) {
    this.address = target.address;
    this.js = jetstream(nc, { timeout: REQUEST_TIMEOUT_MS });
    this.status = nc.status() as AsyncIterable<{ type: string }> & { stop?: () => void };
    this.watching = this.watch();
    void nc.closed().then((error) => {
      const reason = error instanceof Error ? `: ${messageOf(error)}` : '';
      this.giveUp(new BrokerError('ConnectionLost', `the connection to NATS at ${this.address} closed${reason}`, error instanceof Error ? error.name : undefined, { cause: error }));
    });
  }

  private async watch(): Promise<void> {
    try {
      for await (const event of this.status) {
        if (event.type === 'disconnect') {
          this.connected = false;
          for (const subscription of this.subscriptions) subscription.dropPull();
          for (const dropped of this.onDisconnect) dropped();
          this.giveUpTimer ??= setTimeout(() => {
            this.giveUp(new BrokerError('ConnectionLost', `NATS at ${this.address} stayed unreachable for ${this.reconnectWindowMs} ms (reconnectWindowMs); gave up reconnecting`));
          }, this.reconnectWindowMs);
        } else if (event.type === 'reconnect') {
          this.connected = true;
          clearTimeout(this.giveUpTimer);
          this.giveUpTimer = undefined;
          this.wakeReconnectWaiters();
        }
      }
    } catch {
      // The status stream ends with the connection, which nc.closed() reports.
    }
  }

  /** Ends every subscription with `error` and closes the connection, so that later calls fail at once instead of waiting on reconnects. */
  private giveUp(error: BrokerError): void {
    clearTimeout(this.giveUpTimer);
    this.giveUpTimer = undefined;
    if (this.lost || this.closing) return;
    this.lost = error;
    this.connected = false;
    for (const subscription of this.subscriptions) subscription.fail(error);
    this.subscriptions.clear();
    this.wakeReconnectWaiters();
    for (const dropped of this.onDisconnect) dropped();
    void this.nc.close().catch(() => undefined);
  }

  private wakeReconnectWaiters(): void {
    for (const wake of this.reconnectWaiters.splice(0)) wake();
  }

  /**
   * Resolves once the connection is up, at once when it is; while nats.js reconnects, when it is back, the
   * broker gives up (the reconnect window bounds the wait) or `signal` aborts.
   */
  whenConnected(signal?: AbortSignal): Promise<void> {
    if (this.connected || this.lost || this.closing || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        signal?.removeEventListener('abort', done);
        this.reconnectWaiters = this.reconnectWaiters.filter((waiter) => waiter !== done);
        resolve();
      };
      this.reconnectWaiters.push(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** A BrokerError for `what` when the connection cannot carry it now; undefined when it can. */
  private unusable(what: string): BrokerError | undefined {
    if (this.closing) return new BrokerError('ConnectionLost', `${what}: the broker (NATS at ${this.address}) is closed`);
    if (this.lost) return new BrokerError('ConnectionLost', `${what}: ${this.lost.message}`, this.lost.nativeCode, { cause: this.lost });
    if (!this.connected) return new BrokerError('ConnectionLost', `${what}: the connection to NATS at ${this.address} is down (reconnecting)`);
    return undefined;
  }

  /**
   * `answer`, or DROPPED as soon as the connection drops first. The server replies to a request on the
   * connection that sent it, so the reply of one in flight at a drop never comes (nats.js would wait out the
   * request's timeout, holding the caller that long).
   */
  private async unlessDropped<T>(answer: Promise<T>): Promise<T | typeof DROPPED> {
    let dropped: (() => void) | undefined;
    const disconnected = new Promise<typeof DROPPED>((resolve) => {
      dropped = () => resolve(DROPPED);
      this.onDisconnect.add(dropped);
    });
    return Promise.race([answer, disconnected]).finally(() => this.onDisconnect.delete(dropped!));
  }

  async publish(messages: readonly DispatchMessage[]): Promise<void> {
    await this.publishConfirmed(this.layout.dispatchSubject, messages.map(encodeDispatch));
  }

  async deadLetter(letter: DeadLetter): Promise<void> {
    await this.publishConfirmed(this.layout.deadSubject, [encodeDeadLetter(letter)]);
  }

  /** Sends every body at once and waits for all PubAcks: one round trip for a batch, not one per message. */
  private async publishConfirmed(subject: string, bodies: readonly string[]): Promise<void> {
    const what = `publishing ${bodies.length} message(s) to ${subject} on NATS at ${this.address}`;
    const down = this.unusable(what);
    if (down) throw down;
    if (bodies.length === 0) return;
    const results = await this.unlessDropped(Promise.allSettled(bodies.map((body) => this.js.publish(subject, body, { timeout: REQUEST_TIMEOUT_MS }))));
    if (results === DROPPED) {
      throw new BrokerError('ConnectionLost', `${what}: the connection dropped before every PubAck came back (some messages may be stored all the same)`);
    }
    const failed = results.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
    if (failed.length === 0) return;
    const first = failed[0];
    const summary = `${failed.length} of ${bodies.length} message(s) to ${subject} on NATS at ${this.address} not confirmed`;
    if (!this.connected || this.lost) throw toBrokerError(first, 'ConnectionLost', `${summary}, the connection went down`);
    if (isNoResponders(first)) {
      throw new BrokerError('NotConfirmed', `${summary}: no stream takes ${subject} (JetStream starting, or the stream ${this.layout.stream} was deleted: a consumer or the next start recreates it)`, 'NoResponders', { cause: first });
    }
    if (isTimeout(first)) throw new BrokerError('NotConfirmed', `${summary}: no PubAck within ${REQUEST_TIMEOUT_MS} ms`, 'TimeoutError', { cause: first });
    throw toBrokerError(first, 'NotConfirmed', summary);
  }

  async consume(options: ConsumeOptions): Promise<Subscription> {
    if (!Number.isSafeInteger(options.prefetch) || options.prefetch < 1) throw new ConfigError(`prefetch must be a positive integer, got ${JSON.stringify(options.prefetch)}`);
    const what = `consuming ${this.layout.dispatchSubject} on NATS at ${this.address}`;
    // A consumer starting during a reconnect waits for it rather than failing its start.
    await this.whenConnected();
    const down = this.unusable(what);
    if (down) throw down;
    let consumer: Consumer;
    try {
      consumer = await this.js.consumers.get(this.layout.stream, this.layout.consumer);
    } catch (error) {
      if (!isNotFound(error)) throw toBrokerError(error, 'ConnectionLost', what);
      await this.repair();
      try {
        consumer = await this.js.consumers.get(this.layout.stream, this.layout.consumer);
      } catch (again) {
        throw toBrokerError(again, 'ConnectionLost', what);
      }
    }
    const subscription = new PullSubscription(this, consumer, options);
    this.subscriptions.add(subscription);
    subscription.start();
    return {
      close: async () => {
        this.subscriptions.delete(subscription);
        await subscription.close();
      },
    };
  }

  /**
   * Puts the streams and the consumer back (someone deleted them under running processes). Only a stream or
   * consumer that exists with settings statusq cannot use, or credentials refused, end the subscription;
   * anything else (JetStream busy, a store still being removed) is left to the next try, with a warning.
   */
  async repair(): Promise<boolean> {
    try {
      await ensureLayout(this.jsm, this.layout, this.setup);
      this.lastRepairWarning = undefined;
      return true;
    } catch (error) {
      const failure = toSetupError(error, `recreating the streams of ${this.layout.queue} on NATS at ${this.address}`);
      if (failure.kind === 'Refused' && (failure.nativeCode === 'StreamConfig' || failure.nativeCode === 'ConsumerConfig' || isAuthError(error))) throw failure;
      if (failure.message !== this.lastRepairWarning) {
        this.lastRepairWarning = failure.message;
        this.setup.onWarning(`${failure.message}; trying again`);
      }
      return false;
    }
  }

  /**
   * Waits, within the request timeout, for a connection that is down to be back, then throws if it cannot
   * carry `what`. nats.js empties its outbound buffer as it dials again, so an ack or a nak handed to it while
   * the connection is down is lost, and the ack's confirmation waited for in vain.
   */
  private async untilUsable(what: string): Promise<void> {
    if (!this.connected) await this.whenConnected(AbortSignal.timeout(REQUEST_TIMEOUT_MS));
    const down = this.unusable(what);
    if (down) throw down;
  }

  /** Acks and waits for the server to confirm it, so that a settled row's message is not delivered again. */
  async confirmAck(msg: JsMsg): Promise<void> {
    const what = `acking message ${msg.seq} of ${this.layout.stream} on NATS at ${this.address}`;
    await this.untilUsable(what);
    let confirmed: boolean | typeof DROPPED;
    try {
      confirmed = await this.unlessDropped(msg.ackAck({ timeout: REQUEST_TIMEOUT_MS }));
    } catch (error) {
      throw toBrokerError(error, 'ConnectionLost', isTimeout(error) ? `${what}: no confirmation within ${REQUEST_TIMEOUT_MS} ms` : what);
    }
    // Failing now frees the delivery's slot at once; the message comes again if the ack was lost with the connection.
    if (confirmed === DROPPED) throw new BrokerError('ConnectionLost', `${what}: the connection dropped before the server confirmed the ack (JetStream delivers the message again if the ack was lost)`);
  }

  /** Naks (JetStream redelivers at once, to any consumer) and flushes, so that a close right after cannot drop it. */
  async release(msg: JsMsg): Promise<void> {
    const what = `releasing message ${msg.seq} of ${this.layout.stream} on NATS at ${this.address}`;
    await this.untilUsable(what);
    try {
      msg.nak();
      await within(this.nc.flush(), REQUEST_TIMEOUT_MS, () => new BrokerError('ConnectionLost', `${what}: the server did not answer within ${REQUEST_TIMEOUT_MS} ms`));
    } catch (error) {
      throw toBrokerError(error, 'ConnectionLost', what);
    }
  }

  /** A work-queue stream keeps a message until it is acked: its count is what waits or runs unacked. */
  async depth(): Promise<number | null> {
    const what = `reading the depth of ${this.layout.stream} on NATS at ${this.address}`;
    const down = this.unusable(what);
    if (down) throw down;
    try {
      const info = await this.jsm.streams.info(this.layout.stream);
      return info.state.messages;
    } catch (error) {
      if (isNotFound(error)) return null;
      throw toBrokerError(error, isTimeout(error) ? 'ConnectionLost' : 'Unknown', what);
    }
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    clearTimeout(this.giveUpTimer);
    this.giveUpTimer = undefined;
    const subscriptions = [...this.subscriptions];
    this.subscriptions.clear();
    this.wakeReconnectWaiters();
    await Promise.all(subscriptions.map((subscription) => subscription.close()));
    this.status.stop?.();
    await this.nc.close().catch(() => undefined);
    await this.watching;
  }
}
