/**
 * Test-only: a Broker held in memory, for the relay's and the consumer's own logic (what they do with
 * duplicates, reordering, refused publishes, a subscription that breaks). What a real broker does under a
 * restart or a dropped connection is tested against RabbitMQ and NATS in the broker packages and the
 * conformance suite; this one only delivers what the test tells it to.
 */
import { BrokerError, decodeDispatch, encodeDispatch, type Broker, type ConsumeOptions, type DeadLetter, type DispatchMessage, type Subscription } from '../broker/broker.js';

interface Stored {
  raw: string;
  deliveries: number;
}

export class MemoryBroker implements Broker {
  readonly name = 'memory';
  readonly address = 'memory://';
  readonly published: DispatchMessage[] = [];
  readonly deadLetters: DeadLetter[] = [];
  readonly acked: string[] = [];
  private readonly ready: Stored[] = [];
  private readonly consumers = new Set<{ options: ConsumeOptions; unacked: number }>();
  /** Each publish is delivered this many times (duplicates). */
  copies = 1;
  /** Ready messages are delivered newest first (out of order). */
  reversed = false;
  /** Each ack and dead letter is answered this long after it was sent (a broker across a network). */
  ackDelayMs = 0;
  /** The next publish rejects with this. */
  refuseNextPublish: BrokerError | null = null;
  closed = false;

  async publish(messages: readonly DispatchMessage[]): Promise<void> {
    if (this.refuseNextPublish) {
      const error = this.refuseNextPublish;
      this.refuseNextPublish = null;
      throw error;
    }
    for (const message of messages) {
      this.published.push(message);
      for (let i = 0; i < this.copies; i++) this.ready.push({ raw: encodeDispatch(message), deliveries: 0 });
    }
    this.pump();
  }

  /** A message of another producer, bytes as given. */
  inject(raw: string): void {
    this.ready.push({ raw, deliveries: 0 });
    this.pump();
  }

  async consume(options: ConsumeOptions): Promise<Subscription> {
    const consumer = { options, unacked: 0 };
    this.consumers.add(consumer);
    queueMicrotask(() => this.pump());
    return { close: async () => void this.consumers.delete(consumer) };
  }

  async deadLetter(letter: DeadLetter): Promise<void> {
    if (this.ackDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.ackDelayMs));
    this.deadLetters.push(letter);
  }

  async depth(): Promise<number> {
    return this.ready.length;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  /** Breaks every subscription for good. */
  breakSubscriptions(): void {
    for (const consumer of this.consumers) consumer.options.onError(new BrokerError('ConnectionLost', 'memory broker went away'));
  }

  private pump(): void {
    for (const consumer of this.consumers) {
      while (consumer.unacked < consumer.options.prefetch && this.ready.length > 0) {
        const stored = this.reversed ? this.ready.pop()! : this.ready.shift()!;
        this.deliver(consumer, stored);
      }
    }
  }

  private deliver(consumer: { options: ConsumeOptions; unacked: number }, stored: Stored): void {
    consumer.unacked++;
    let settled = false;
    const settle = (requeue: boolean) => {
      if (settled) return;
      settled = true;
      consumer.unacked--;
      if (requeue) this.ready.push(stored);
      else this.acked.push(stored.raw);
      queueMicrotask(() => this.pump());
    };
    const redeliveries = stored.deliveries++;
    let message: DispatchMessage;
    try {
      message = decodeDispatch(stored.raw);
    } catch (error) {
      consumer.options.onMalformed({ raw: stored.raw, error: (error as Error).message, ack: async () => settle(false) });
      return;
    }
    const ack = async () => {
      if (this.ackDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.ackDelayMs));
      settle(false);
    };
    consumer.options.onDelivery({ message, redeliveries, ack, release: async () => settle(true) });
  }
}
