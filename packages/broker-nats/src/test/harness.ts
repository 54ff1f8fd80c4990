/** What the broker tests share: bounded waits, a recording consumer, brokers closed after each test. */
import type { Broker, BrokerError, ConsumeOptions, Delivery, MalformedDelivery } from '@statusq/core/adapter';
import { waitFor as waitUntil } from '@statusq/test-fixtures';
import { connectBroker, type NatsBrokerOptions } from '../index.js';

/** test-fixtures' bounded poll, with the timeout these tests pass positionally. */
export function waitFor<T>(what: string, check: () => Promise<T | false | null | undefined> | T | false | null | undefined, timeoutMs = 10_000): Promise<T> {
  return waitUntil(what, check, { timeoutMs, intervalMs: 20 });
}

/** How long `promise` takes to settle, and how: for "rejects within a bound" checks. */
export async function timed<T>(promise: Promise<T>): Promise<{ ms: number; value?: T; error?: unknown }> {
  const started = Date.now();
  try {
    const value = await promise;
    return { ms: Date.now() - started, value };
  } catch (error) {
    return { ms: Date.now() - started, error };
  }
}

/** Records what a subscription receives; acks each delivery at once when `autoAck`. */
export class Recorder {
  readonly deliveries: Delivery[] = [];
  readonly malformed: MalformedDelivery[] = [];
  readonly errors: BrokerError[] = [];
  readonly ackFailures: unknown[] = [];

  constructor(private readonly autoAck = false) {}

  options(prefetch: number): ConsumeOptions {
    return {
      prefetch,
      onDelivery: (delivery) => {
        this.deliveries.push(delivery);
        if (this.autoAck) delivery.ack().catch((error: unknown) => this.ackFailures.push(error));
      },
      onMalformed: (delivery) => this.malformed.push(delivery),
      onError: (error) => this.errors.push(error),
    };
  }

  ids(): Array<string | number> {
    return this.deliveries.map((d) => d.message.id);
  }
}

/** Brokers a test opened, closed afterwards whatever happened. */
export class Brokers {
  private readonly open: Broker[] = [];

  async connect(url: string, options: NatsBrokerOptions): Promise<Broker> {
    const broker = await connectBroker(url, options);
    this.open.push(broker);
    return broker;
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.open.splice(0).map((broker) => broker.close()));
  }
}

export function jobs(count: number, from = 1, table = 'jobs'): Array<{ table: string; id: number; attempt: number }> {
  return Array.from({ length: count }, (_, i) => ({ table, id: from + i, attempt: 1 }));
}
