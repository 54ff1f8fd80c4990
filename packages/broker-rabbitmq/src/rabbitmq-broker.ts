import type { Channel } from 'amqplib';
import { ConfigError } from '@statusq/core';
import { BrokerError, encodeDeadLetter, encodeDispatch, redactUrl, type Broker, type ConsumeOptions, type DeadLetter, type DispatchMessage, type Subscription } from '@statusq/core/adapter';
import { closeConnection, noop, openSession, refusal, type Session, type SessionEvents, type SessionTarget } from './rabbitmq-connection.js';
import { RabbitMQSubscription, type ConsumingBroker } from './rabbitmq-consumer.js';
import { connectionLost, isRefusal, messageOf, nativeCodeOf } from './rabbitmq-errors.js';
import { DEFAULTS, connectionFromUrl, durationOption, type RabbitMQConnectOptions } from './rabbitmq-options.js';
import { ConfirmedPublisher, type PublishingBroker } from './rabbitmq-publisher.js';

type State = 'open' | 'reconnecting' | 'failed' | 'closed';

export async function connectRabbitMQ(url: string, options: RabbitMQConnectOptions): Promise<Broker> {
  const broker = new RabbitMQBroker(url, options);
  await broker.start();
  return broker;
}

/**
 * The Broker on one RabbitMQ connection. Every loss (the connection, the publishing channel or a consumer's
 * channel closing unexpectedly, or a consumer the server cancelled) takes the same single path: the whole
 * connection is dropped and opened again, the queues declared again and every consumer subscribed again.
 * A broker that only has to be robust does not need finer repairs than that.
 */
class RabbitMQBroker implements Broker, ConsumingBroker, PublishingBroker {
  readonly name = 'rabbitmq';
  readonly address: string;
  readonly queue: string;
  readonly deadQueue: string;
  private readonly target: SessionTarget;
  private readonly connectTimeoutMs: number;
  private readonly reconnectWindowMs: number;
  private readonly options: RabbitMQConnectOptions;
  private readonly publishing: ConfirmedPublisher;
  private readonly events: SessionEvents = {
    lose: (session, cause) => this.lose(session, cause),
    warn: (message) => this.warn(message),
    returned: (messageId) => this.publishing.noteReturned(messageId),
  };
  private state: State = 'reconnecting';
  private session: Session | undefined;
  private recovery: Promise<void> | undefined;
  /** The pending pause between two connection attempts, so close() can cut it short. */
  private pause: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
  /** The connection attempt under way, which close() waits for (its socket timeout bounds it). */
  private attempt: Promise<unknown> | undefined;
  private closing: Promise<void> | undefined;
  readonly subscriptions = new Set<RabbitMQSubscription>();

  constructor(url: string, options: RabbitMQConnectOptions) {
    if (typeof options?.queue !== 'string' || options.queue === '') throw new ConfigError('the RabbitMQ broker needs the queue option (a queue name)');
    // RabbitMQ's limit on a queue name is 255 bytes; the dead-letter queue adds ".dead".
    if (Buffer.byteLength(options.queue) > 250) throw new ConfigError(`the queue name ${JSON.stringify(options.queue.slice(0, 40))}... is longer than 250 bytes`);
    if (options.queue.startsWith('amq.')) throw new ConfigError(`the queue name ${JSON.stringify(options.queue)} starts with "amq.", which RabbitMQ reserves`);
    const connection = connectionFromUrl(url);
    this.address = redactUrl(url);
    this.queue = options.queue;
    this.deadQueue = `${options.queue}.dead`;
    this.target = { connection, address: this.address, queue: this.queue, deadQueue: this.deadQueue, tls: options.tls };
    this.options = options;
    this.connectTimeoutMs = durationOption(options.connectTimeoutMs, DEFAULTS.connectTimeoutMs, 'connectTimeoutMs');
    this.reconnectWindowMs = durationOption(options.reconnectWindowMs, DEFAULTS.reconnectWindowMs, 'reconnectWindowMs');
    this.publishing = new ConfirmedPublisher(this, durationOption(options.confirmTimeoutMs, DEFAULTS.confirmTimeoutMs, 'confirmTimeoutMs'));
  }

  async start(): Promise<void> {
    try {
      const session = await this.connectWithin(this.connectTimeoutMs);
      this.session = session;
      this.state = 'open';
      if (session.lost) this.recover(new Error('the connection was lost as it opened'));
    } catch (error) {
      this.state = 'closed';
      if (error instanceof BrokerError) throw error;
      throw new BrokerError(
        'Unreachable',
        `RabbitMQ at ${this.address} did not answer within ${this.connectTimeoutMs} ms (last error: ${messageOf(error)}): is it running and listening there? (connectTimeoutMs sets the wait)`,
        nativeCodeOf(error),
        { cause: error },
      );
    }
  }

  async publish(messages: readonly DispatchMessage[]): Promise<void> {
    await this.publishing.send(this.queue, messages.map(encodeDispatch), 'publish');
  }

  async deadLetter(letter: DeadLetter): Promise<void> {
    await this.publishing.send(this.deadQueue, [encodeDeadLetter(letter)], 'publish a dead letter');
  }

  async consume(options: ConsumeOptions): Promise<Subscription> {
    if (!Number.isInteger(options.prefetch) || options.prefetch < 1 || options.prefetch > 65535) {
      throw new ConfigError(`prefetch must be a whole number from 1 to 65535, got ${String(options.prefetch)}`);
    }
    const session = this.current('cannot start consuming');
    const subscription = new RabbitMQSubscription(this, options);
    this.subscriptions.add(subscription);
    try {
      await subscription.start(session);
    } catch (error) {
      this.subscriptions.delete(subscription);
      throw this.failure(session, 'could not start consuming', error);
    }
    return subscription;
  }

  async depth(): Promise<number | null> {
    const session = this.current('cannot read the queue depth');
    let channel: Channel | undefined;
    try {
      channel = await session.connection.createChannel();
      channel.on('error', noop);
      return (await channel.checkQueue(this.queue)).messageCount;
    } catch (error) {
      throw this.failure(session, `could not read the depth of ${this.queue}`, error);
    } finally {
      channel?.close().catch(noop);
    }
  }

  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  get closed(): boolean {
    return this.state === 'closed';
  }

  /** The open session, or a quick ConnectionLost while there is none (the caller tries again later). */
  current(what: string): Session {
    if (this.state === 'closed') throw connectionLost(this.address, `${what}: the broker was closed`);
    const session = this.session;
    if (this.state === 'open' && session && !session.lost) return session;
    // After an outage outlasted the reconnect window nothing reconnects in the background; a caller that
    // comes back starts a new round, so a relay resumes by itself once RabbitMQ is back.
    if (this.state === 'failed') this.recover(new Error('reconnecting on demand after an earlier outage'));
    throw connectionLost(this.address, `${what}: the connection is down (reconnecting)`);
  }

  /** An error of an operation on `session` as a BrokerError: ConnectionLost once the session is lost. */
  failure(session: Session, what: string, error: unknown): BrokerError {
    if (error instanceof BrokerError) return error;
    if (session.lost || this.state === 'closed' || /closed|IllegalOperation/i.test(`${messageOf(error)} ${(error as Error)?.name}`)) {
      return connectionLost(this.address, what, error);
    }
    return new BrokerError(isRefusal(error) ? 'Refused' : 'Unknown', `RabbitMQ at ${this.address}: ${what}: ${messageOf(error)}`, nativeCodeOf(error), { cause: error });
  }

  /**
   * Opens a session, trying again (100 ms doubling to 2 s apart) until `windowMs` have passed. A refusal
   * (credentials, the queue's settings) is thrown at once as BrokerError Refused: trying again cannot fix it.
   */
  private async connectWithin(windowMs: number): Promise<Session> {
    const deadline = Date.now() + windowMs;
    let delay: number = DEFAULTS.firstRetryMs;
    while (true) {
      if (this.state === 'closed') throw connectionLost(this.address, 'the broker was closed');
      try {
        const attempt = openSession(this.target, this.events, Math.max(Math.min(deadline - Date.now(), DEFAULTS.attemptMs), 1));
        this.attempt = attempt.catch(noop);
        return await attempt;
      } catch (error) {
        if (isRefusal(error)) throw refusal(this.target, error);
        const remaining = deadline - Date.now();
        // close() may have come while the attempt ran.
        if (remaining <= 0 || (this.state as State) === 'closed') throw error;
        await this.sleep(Math.min(delay, remaining));
        delay = Math.min(delay * 2, DEFAULTS.maxRetryMs);
      } finally {
        this.attempt = undefined;
      }
    }
  }

  /** Handles the loss of `session` (or a channel of it) once: drop it and reconnect, unless it is stale. */
  lose(session: Session, cause: unknown): void {
    if (session.lost) return;
    session.lost = true;
    // A channel closed but the connection may be up: drop it whole, which requeues its unacked messages.
    void closeConnection(session.connection);
    if (session !== this.session || this.state !== 'open') return;
    this.session = undefined;
    this.state = 'reconnecting';
    this.recover(cause);
  }

  private recover(cause: unknown): void {
    if (this.recovery || this.state === 'closed') return;
    this.state = 'reconnecting';
    this.recovery = this.reconnect(cause).finally(() => {
      this.recovery = undefined;
      // Lost again between the last check and now: another round.
      if (this.state === 'reconnecting') this.recover(new Error('the connection was lost again while reconnecting'));
    });
  }

  private async reconnect(cause: unknown): Promise<void> {
    while (true) {
      let session: Session;
      try {
        session = await this.connectWithin(this.reconnectWindowMs);
      } catch (error) {
        if (this.state === 'closed') return;
        this.state = 'failed';
        const failure =
          error instanceof BrokerError && error.kind === 'Refused'
            ? error
            : connectionLost(this.address, `lost the connection (${messageOf(cause)}) and could not reconnect within ${this.reconnectWindowMs} ms (reconnectWindowMs)`, error);
        const broken = [...this.subscriptions];
        this.subscriptions.clear();
        for (const subscription of broken) subscription.fail(failure);
        return;
      }
      if (this.state === 'closed') {
        session.lost = true;
        await closeConnection(session.connection);
        return;
      }
      this.session = session;
      this.state = 'open';
      try {
        for (const subscription of this.subscriptions) await subscription.start(session);
      } catch (error) {
        cause = error;
        session.lost = true;
        void closeConnection(session.connection);
      }
      if (!session.lost) return;
      // Lost again while subscribing: the next round subscribes everyone again.
      this.state = 'reconnecting';
      this.session = undefined;
    }
  }

  /** Tells the application through onWarning, if it listens. */
  warn(message: string): void {
    try {
      this.options.onWarning?.(message);
    } catch {
      // A warning listener that throws must not break the broker.
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pause = undefined;
        resolve();
      }, ms);
      this.pause = { timer, resolve };
    });
  }

  private async shutdown(): Promise<void> {
    this.state = 'closed';
    if (this.pause) {
      clearTimeout(this.pause.timer);
      this.pause.resolve();
      this.pause = undefined;
    }
    for (const subscription of this.subscriptions) subscription.closed = true;
    this.subscriptions.clear();
    const session = this.session;
    this.session = undefined;
    if (session) {
      session.lost = true;
      await closeConnection(session.connection);
    }
    // A connection attempt under way ends by its socket timeout at the latest; one that succeeds sees the
    // closed state and closes its connection.
    await this.attempt;
    await this.recovery?.catch(noop);
  }
}
