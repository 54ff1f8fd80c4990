import type { Channel, ConsumeMessage } from 'amqplib';
import { decodeDispatch, type BrokerError, type ConsumeOptions, type Delivery, type DispatchMessage, type Subscription } from '@statusq/core/adapter';
import { noop, type Session } from './rabbitmq-connection.js';
import { connectionLost, messageOf } from './rabbitmq-errors.js';

/** What a subscription needs of its broker: an interface, so that the broker imports this module and not the other way round. */
export interface ConsumingBroker {
  readonly address: string;
  readonly queue: string;
  readonly subscriptions: Set<RabbitMQSubscription>;
  lose(session: Session, cause: unknown): void;
  warn(message: string): void;
}

/**
 * One consumer: a channel of its own with the prefetch, manual acks. Subscribed again on every new session;
 * deliveries of a lost channel are RabbitMQ's again (it redelivers them) and their ack() rejects.
 */
export class RabbitMQSubscription implements Subscription {
  closed = false;
  private channel: Channel | undefined;
  private consumerTag: string | undefined;
  /** Deliveries of the current channel not yet acked or released: the channel closes once close() was called and none is left. */
  private unsettled = 0;
  private readonly closedOnPurpose = new WeakSet<Channel>();

  constructor(
    private readonly broker: ConsumingBroker,
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
