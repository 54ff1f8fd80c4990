import amqp, { type ChannelModel, type ConfirmChannel, type Options } from 'amqplib';
import { BrokerError, raceDeadline } from '@statusq/core/adapter';
import { messageOf, replyCode } from './rabbitmq-errors.js';
import type { RabbitMQConnectOptions } from './rabbitmq-options.js';

/**
 * Both queues are durable quorum queues: replicated where there is a cluster, kept across restarts, and
 * counting deliveries (x-delivery-count), which Delivery.redeliveries reports.
 */
const QUEUE_SETTINGS: Options.AssertQueue = { durable: true, arguments: { 'x-queue-type': 'quorum' } };

/** How long close() waits for RabbitMQ's close-ok before it cuts the socket (a frozen network never answers). */
const CLOSE_GRACE_MS = 2000;

/** One connection and the channel publishes go through; replaced whole when either is lost. */
export interface Session {
  readonly connection: ChannelModel;
  publisher: ConfirmChannel | undefined;
  lost: boolean;
}

/** Where every session of a broker connects and what it declares there: fixed for the broker's life. */
export interface SessionTarget {
  readonly connection: Options.Connect;
  readonly address: string;
  readonly queue: string;
  readonly deadQueue: string;
  readonly tls: RabbitMQConnectOptions['tls'];
}

/**
 * What a session reports to its broker, from amqplib's events: passed in rather than imported, so that
 * this module stays below the broker and its publisher.
 */
export interface SessionEvents {
  lose(session: Session, cause: unknown): void;
  warn(message: string): void;
  returned(messageId: string): void;
}

export function noop(): void {}

export async function openSession(target: SessionTarget, events: SessionEvents, timeoutMs: number): Promise<Session> {
  const connection = await amqp.connect(target.connection, {
    timeout: timeoutMs,
    clientProperties: { connection_name: `statusq ${target.queue}` },
    ...(target.tls ?? {}),
  });
  const session: Session = { connection, publisher: undefined, lost: false };
  // 'error' always comes with a 'close', which is where the loss is handled.
  connection.on('error', noop);
  connection.on('close', (error?: Error) => events.lose(session, error ?? new Error('connection closed')));
  connection.on('blocked', (reason: string) => events.warn(`RabbitMQ at ${target.address} blocks publishing: ${reason}`));
  connection.on('unblocked', () => events.warn(`RabbitMQ at ${target.address} accepts publishing again`));
  try {
    await declareQueues(target, connection);
    const publisher = await connection.createConfirmChannel();
    publisher.on('error', noop);
    publisher.on('close', () => events.lose(session, new Error('the publishing channel closed')));
    publisher.on('return', (message: { properties: { messageId?: string } }) => {
      if (message.properties.messageId) events.returned(message.properties.messageId);
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
async function declareQueues(target: SessionTarget, connection: ChannelModel): Promise<void> {
  const channel = await connection.createChannel();
  channel.on('error', noop);
  try {
    for (const queue of [target.queue, target.deadQueue]) {
      try {
        await channel.assertQueue(queue, QUEUE_SETTINGS);
      } catch (error) {
        const code = replyCode(error);
        if (code === 406) {
          throw new BrokerError(
            'Refused',
            `the queue ${queue} on ${target.address} exists with other settings than statusq declares (a durable quorum queue: durable, x-queue-type=quorum, no other arguments); RabbitMQ said: ${messageOf(error)}. Delete it once drained (rabbitmqctl delete_queue ${queue}) and statusq declares it anew, or choose another name with the queue option`,
            406,
            { cause: error },
          );
        }
        if (code === 405) {
          throw new BrokerError('Refused', `the queue ${queue} on ${target.address} is exclusive to another connection: ${messageOf(error)}`, 405, { cause: error });
        }
        throw error;
      }
    }
  } finally {
    await channel.close().catch(noop);
  }
}

export function refusal(target: SessionTarget, error: unknown): BrokerError {
  if (error instanceof BrokerError) return error;
  const code = replyCode(error);
  const fix =
    code === 403
      ? 'check the user name and password in the URL, and that the user may use this virtual host'
      : code === 530
        ? `check the virtual host in the URL (${JSON.stringify(target.connection.vhost)}) exists and the user has permissions on it`
        : 'see the message';
  return new BrokerError('Refused', `RabbitMQ at ${target.address} refused the connection: ${messageOf(error)}; ${fix}`, code, { cause: error });
}

/** Closes a connection, cutting its socket if RabbitMQ does not answer the close in time. */
export async function closeConnection(connection: ChannelModel): Promise<void> {
  try {
    await raceDeadline(connection.close(), CLOSE_GRACE_MS, () => new Error('close timed out'));
  } catch {
    (connection.connection as unknown as { stream?: { destroy(): void } }).stream?.destroy();
  }
}
