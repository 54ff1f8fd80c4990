import type { Channel } from 'amqplib';
import { BrokerError, raceDeadline } from '@statusq/core/adapter';
import type { Session } from './rabbitmq-connection.js';
import { connectionLost, messageOf, nativeCodeOf } from './rabbitmq-errors.js';

/** What publishing needs of its broker: an interface, so that the broker imports this module and not the other way round. */
export interface PublishingBroker {
  readonly address: string;
  readonly closed: boolean;
  current(what: string): Session;
  lose(session: Session, cause: unknown): void;
}

/** Persistent messages on the session's confirm channel, each publish waiting for RabbitMQ's confirms. */
export class ConfirmedPublisher {
  private published = 0;
  /** Messages RabbitMQ returned as unroutable (their queue is gone), by message id, until their confirm. */
  private readonly returned = new Set<string>();

  constructor(
    private readonly broker: PublishingBroker,
    private readonly confirmTimeoutMs: number,
  ) {}

  /** RabbitMQ sends a return before the message's confirm, which then fails it (see send). */
  noteReturned(messageId: string): void {
    this.returned.add(messageId);
  }

  /** Publishes each body as one persistent message to `queue` and waits for all of RabbitMQ's confirms. */
  async send(queue: string, bodies: readonly string[], what: string): Promise<void> {
    if (bodies.length === 0) return;
    const session = this.broker.current(`cannot ${what}`);
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
                  reject(new BrokerError('NotConfirmed', `RabbitMQ at ${this.broker.address} has no queue ${queue} to put the message in (deleted?); it is declared again as the connection reopens`));
                  this.broker.lose(session, new Error(`queue ${queue} is missing`));
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
        return new BrokerError('NotConfirmed', `RabbitMQ at ${this.broker.address} did not confirm ${bodies.length} message(s) within ${this.confirmTimeoutMs} ms (a memory or disk alarm blocks publishing?)`);
      });
    } catch (error) {
      if (error instanceof BrokerError) throw error;
      if (session.lost || this.broker.closed || /closed/i.test(messageOf(error)) || (error as Error)?.name === 'IllegalOperationError') {
        throw connectionLost(this.broker.address, `the connection closed before RabbitMQ confirmed what was published (${what})`, error);
      }
      throw new BrokerError('NotConfirmed', `RabbitMQ at ${this.broker.address} refused a message (nack) on ${queue}: ${messageOf(error)}`, nativeCodeOf(error), { cause: error });
    }
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
