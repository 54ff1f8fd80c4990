import amqp, { type Channel, type ChannelModel, type ConfirmChannel, type ConsumeMessage, type Options } from 'amqplib';
import { ConfigError } from '@statusq/core';
import { BrokerError, decodeDispatch, encodeDeadLetter, encodeDispatch, redactUrl, type Broker, type ConsumeOptions, type DeadLetter, type Delivery, type DispatchMessage, type Subscription } from '@statusq/core/adapter';
import { raceDeadline } from '@statusq/core/adapter';
import { connectionLost, isRefusal, messageOf, nativeCodeOf, replyCode } from './rabbitmq-errors.js';
import { DEFAULTS, connectionFromUrl, durationOption, type RabbitMQConnectOptions } from './rabbitmq-options.js';

/**
 * Both queues are durable quorum queues: replicated where there is a cluster, kept across restarts, and
 * counting deliveries (x-delivery-count), which Delivery.redeliveries reports.
 */
const QUEUE_SETTINGS: Options.AssertQueue = { durable: true, arguments: { 'x-queue-type': 'quorum' } };

/** How long close() waits for RabbitMQ's close-ok before it cuts the socket (a frozen network never answers). */
const CLOSE_GRACE_MS = 2000;

/** One connection and the channel publishes go through; replaced whole when either is lost. */
interface Session {
  readonly connection: ChannelModel;
  publisher: ConfirmChannel | undefined;
  lost: boolean;
}

type State = 'open' | 'reconnecting' | 'failed' | 'closed';

function noop(): void {}

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
class RabbitMQBroker implements Broker {
  readonly name = 'rabbitmq';
  readonly address: string;
  readonly queue: string;
  readonly deadQueue: string;
  private readonly connection: Options.Connect;
  private readonly connectTimeoutMs: number;
  private readonly reconnectWindowMs: number;
  private readonly confirmTimeoutMs: number;
  private readonly options: RabbitMQConnectOptions;
  private state: State = 'reconnecting';
  private session: Session | undefined;
  private recovery: Promise<void> | undefined;
  /** The pending pause between two connection attempts, so close() can cut it short. */
  private pause: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
  /** The connection attempt under way, which close() waits for (its socket timeout bounds it). */
  private attempt: Promise<unknown> | undefined;
  private closing: Promise<void> | undefined;
  private published = 0;
  /** Messages RabbitMQ returned as unroutable (their queue is gone), by message id, until their confirm. */
  private readonly returned = new Set<string>();
  readonly subscriptions = new Set<RabbitMQSubscription>();

  constructor(url: string, options: RabbitMQConnectOptions) {
    if (typeof options?.queue !== 'string' || options.queue === '') throw new ConfigError('the RabbitMQ broker needs the queue option (a queue name)');
    // RabbitMQ's limit on a queue name is 255 bytes; the dead-letter queue adds ".dead".
    if (Buffer.byteLength(options.queue) > 250) throw new ConfigError(`the queue name ${JSON.stringify(options.queue.slice(0, 40))}... is longer than 250 bytes`);
    if (options.queue.startsWith('amq.')) throw new ConfigError(`the queue name ${JSON.stringify(options.queue)} starts with "amq.", which RabbitMQ reserves`);
    this.connection = connectionFromUrl(url);
    this.address = redactUrl(url);
    this.queue = options.queue;
    this.deadQueue = `${options.queue}.dead`;
    this.options = options;
    this.connectTimeoutMs = durationOption(options.connectTimeoutMs, DEFAULTS.connectTimeoutMs, 'connectTimeoutMs');
    this.reconnectWindowMs = durationOption(options.reconnectWindowMs, DEFAULTS.reconnectWindowMs, 'reconnectWindowMs');
    this.confirmTimeoutMs = durationOption(options.confirmTimeoutMs, DEFAULTS.confirmTimeoutMs, 'confirmTimeoutMs');
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
    await this.send(this.queue, messages.map(encodeDispatch), 'publish');
  }

  async deadLetter(letter: DeadLetter): Promise<void> {
    await this.send(this.deadQueue, [encodeDeadLetter(letter)], 'publish a dead letter');
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

  /** Publishes each body as one persistent message to `queue` and waits for all of RabbitMQ's confirms. */
  private async send(queue: string, bodies: readonly string[], what: string): Promise<void> {
    if (bodies.length === 0) return;
    const session = this.current(`cannot ${what}`);
    const publisher = session.publisher!;
    let abandoned = false;
    const sending = (async () => {
      const confirms: Promise<void>[] = [];
      for (const body of bodies) {
        if (abandoned) break;
        const messageId = `${process.pid}.${++this.published}`;
        let writable = true;
        confirms.push(
          new Promise<void>((resolve, reject) => {
            writable = publisher.sendToQueue(
              queue,
              Buffer.from(body),
              // mandatory: a message for a queue that no longer exists comes back instead of vanishing.
              { persistent: true, contentType: 'application/json', mandatory: true, messageId },
              (error: unknown) => {
                if (this.returned.delete(messageId)) {
                  reject(new BrokerError('NotConfirmed', `RabbitMQ at ${this.address} has no queue ${queue} to put the message in (deleted?); it is declared again as the connection reopens`));
                  this.lose(session, new Error(`queue ${queue} is missing`));
                } else if (error) reject(error);
                else resolve();
              },
            );
          }),
        );
        // Backpressure: the socket's buffer is full, so wait until it drained (or the channel closed).
        if (!writable) await drained(publisher);
      }
      await Promise.all(confirms);
    })();
    try {
      await raceDeadline(sending, this.confirmTimeoutMs, () => {
        abandoned = true;
        return new BrokerError('NotConfirmed', `RabbitMQ at ${this.address} did not confirm ${bodies.length} message(s) within ${this.confirmTimeoutMs} ms (a memory or disk alarm blocks publishing?)`);
      });
    } catch (error) {
      if (error instanceof BrokerError) throw error;
      if (session.lost || this.state === 'closed' || /closed/i.test(messageOf(error)) || (error as Error)?.name === 'IllegalOperationError') {
        throw connectionLost(this.address, `the connection closed before RabbitMQ confirmed what was published (${what})`, error);
      }
      throw new BrokerError('NotConfirmed', `RabbitMQ at ${this.address} refused a message (nack) on ${queue}: ${messageOf(error)}`, nativeCodeOf(error), { cause: error });
    }
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
        const attempt = this.openSession(Math.max(Math.min(deadline - Date.now(), DEFAULTS.attemptMs), 1));
        this.attempt = attempt.catch(noop);
        return await attempt;
      } catch (error) {
        if (isRefusal(error)) throw this.refusal(error);
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

  private refusal(error: unknown): BrokerError {
    if (error instanceof BrokerError) return error;
    const code = replyCode(error);
    const fix =
      code === 403
        ? 'check the user name and password in the URL, and that the user may use this virtual host'
        : code === 530
          ? `check the virtual host in the URL (${JSON.stringify(this.connection.vhost)}) exists and the user has permissions on it`
          : 'see the message';
    return new BrokerError('Refused', `RabbitMQ at ${this.address} refused the connection: ${messageOf(error)}; ${fix}`, code, { cause: error });
  }

  private async openSession(timeoutMs: number): Promise<Session> {
    const connection = await amqp.connect(this.connection, {
      timeout: timeoutMs,
      clientProperties: { connection_name: `statusq ${this.queue}` },
      ...(this.options.tls ?? {}),
    });
    const session: Session = { connection, publisher: undefined, lost: false };
    // 'error' always comes with a 'close', which is where the loss is handled.
    connection.on('error', noop);
    connection.on('close', (error?: Error) => this.lose(session, error ?? new Error('connection closed')));
    connection.on('blocked', (reason: string) => this.warn(`RabbitMQ at ${this.address} blocks publishing: ${reason}`));
    connection.on('unblocked', () => this.warn(`RabbitMQ at ${this.address} accepts publishing again`));
    try {
      await this.declareQueues(connection);
      const publisher = await connection.createConfirmChannel();
      publisher.on('error', noop);
      publisher.on('close', () => this.lose(session, new Error('the publishing channel closed')));
      publisher.on('return', (message: { properties: { messageId?: string } }) => {
        if (message.properties.messageId) this.returned.add(message.properties.messageId);
      });
      session.publisher = publisher;
      if (session.lost) throw new Error('connection closed while opening');
      return session;
    } catch (error) {
      session.lost = true;
      await closeConnection(connection);
      throw error;
    }
  }

  /** Declares both queues (idempotent), on a channel of their own: a refusal closes that channel. */
  private async declareQueues(connection: ChannelModel): Promise<void> {
    const channel = await connection.createChannel();
    channel.on('error', noop);
    try {
      for (const queue of [this.queue, this.deadQueue]) {
        try {
          await channel.assertQueue(queue, QUEUE_SETTINGS);
        } catch (error) {
          const code = replyCode(error);
          if (code === 406) {
            throw new BrokerError(
              'Refused',
              `the queue ${queue} on ${this.address} exists with other settings than statusq declares (a durable quorum queue: durable, x-queue-type=quorum, no other arguments); RabbitMQ said: ${messageOf(error)}. Delete it once drained (rabbitmqctl delete_queue ${queue}) and statusq declares it anew, or choose another name with the queue option`,
              406,
              { cause: error },
            );
          }
          if (code === 405) {
            throw new BrokerError('Refused', `the queue ${queue} on ${this.address} is exclusive to another connection: ${messageOf(error)}`, 405, { cause: error });
          }
          throw error;
        }
      }
    } finally {
      await channel.close().catch(noop);
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

/**
 * One consumer: a channel of its own with the prefetch, manual acks. Subscribed again on every new session;
 * deliveries of a lost channel are RabbitMQ's again (it redelivers them) and their ack() rejects.
 */
class RabbitMQSubscription implements Subscription {
  closed = false;
  private channel: Channel | undefined;
  private consumerTag: string | undefined;
  /** Deliveries of the current channel not yet acked or released: the channel closes once close() was called and none is left. */
  private unsettled = 0;
  private readonly closedOnPurpose = new WeakSet<Channel>();

  constructor(
    private readonly broker: RabbitMQBroker,
    private readonly options: ConsumeOptions,
  ) {}

  async start(session: Session): Promise<void> {
    const channel = await session.connection.createChannel();
    channel.on('error', noop);
    channel.on('close', () => {
      if (!this.closedOnPurpose.has(channel)) this.broker.lose(session, new Error('a consumer channel closed'));
    });
    await channel.prefetch(this.options.prefetch);
    this.channel = channel;
    this.unsettled = 0;
    const { consumerTag } = await channel.consume(this.broker.queue, (message) => this.receive(session, channel, message), { noAck: false });
    this.consumerTag = consumerTag;
    if (this.closed) await this.closeChannel();
  }

  private receive(session: Session, channel: Channel, message: ConsumeMessage | null): void {
    if (message === null) {
      // RabbitMQ cancelled the consumer: the queue was deleted. Reconnecting declares it again.
      this.broker.lose(session, new Error(`RabbitMQ cancelled the consumer of ${this.broker.queue} (queue deleted?)`));
      return;
    }
    if (this.closed || channel !== this.channel) {
      try {
        channel.nack(message, false, true);
      } catch {
        // The channel is gone: RabbitMQ requeues the message anyway.
      }
      return;
    }
    this.unsettled++;
    let settled: Promise<void> | undefined;
    const settle = (requeue: boolean | 'ack'): Promise<void> => {
      settled ??= this.settle(session, channel, message, requeue);
      return settled;
    };
    const raw = message.content.toString('utf8');
    let dispatch: DispatchMessage;
    try {
      dispatch = decodeDispatch(raw);
    } catch (error) {
      this.callback(() => this.options.onMalformed({ raw, error: messageOf(error), ack: () => settle('ack') }));
      return;
    }
    const deliveryCount = Number(message.properties.headers?.['x-delivery-count'] ?? 0);
    const delivery: Delivery = {
      message: dispatch,
      redeliveries: Number.isFinite(deliveryCount) && deliveryCount > 0 ? deliveryCount : 0,
      ack: () => settle('ack'),
      release: () => settle(true),
    };
    this.callback(() => this.options.onDelivery(delivery));
  }

  private async settle(session: Session, channel: Channel, message: ConsumeMessage, how: boolean | 'ack'): Promise<void> {
    const verb = how === 'ack' ? 'ack' : 'release';
    if (session.lost || channel !== this.channel) {
      throw connectionLost(this.broker.address, `cannot ${verb} the message: its channel closed since (RabbitMQ delivers it again)`);
    }
    try {
      if (how === 'ack') channel.ack(message);
      else channel.nack(message, false, true);
    } catch (error) {
      throw connectionLost(this.broker.address, `cannot ${verb} the message (RabbitMQ delivers it again)`, error);
    }
    this.unsettled--;
    if (this.closed && this.unsettled === 0) await this.closeChannel();
  }

  /** Runs a consumer's callback, which must not throw; if it does, it must not break the channel's reading. */
  private callback(call: () => void): void {
    try {
      call();
    } catch (error) {
      this.broker.warn(`a consumer callback threw: ${messageOf(error)}`);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.broker.subscriptions.delete(this);
    const channel = this.channel;
    if (channel && this.consumerTag !== undefined) {
      // Stop deliveries but keep the channel while deliveries are out, so that their acks still count.
      await channel.cancel(this.consumerTag).catch(noop);
    }
    if (this.unsettled === 0) await this.closeChannel();
  }

  fail(error: BrokerError): void {
    this.closed = true;
    this.channel = undefined;
    this.callback(() => this.options.onError(error));
  }

  private async closeChannel(): Promise<void> {
    const channel = this.channel;
    if (!channel) return;
    this.channel = undefined;
    this.closedOnPurpose.add(channel);
    await channel.close().catch(noop);
  }
}

function drained(channel: Channel): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      channel.off('drain', done);
      channel.off('close', done);
      resolve();
    };
    channel.once('drain', done);
    channel.once('close', done);
  });
}

/** Closes a connection, cutting its socket if RabbitMQ does not answer the close in time. */
async function closeConnection(connection: ChannelModel): Promise<void> {
  try {
    await raceDeadline(connection.close(), CLOSE_GRACE_MS, () => new Error('close timed out'));
  } catch {
    (connection.connection as unknown as { stream?: { destroy(): void } }).stream?.destroy();
  }
}
