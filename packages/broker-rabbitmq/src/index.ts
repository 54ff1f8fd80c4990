/**
 * @statusq/broker-rabbitmq: statusq's dispatch through RabbitMQ (amqplib). One durable quorum queue per
 * table (`statusq.<table>`, or the queue option) and its dead-letter queue `<queue>.dead`; persistent
 * messages with publisher confirms, manual acks, and a client that reconnects by itself.
 */
import type { Broker } from '@statusq/core/adapter';
import { connectRabbitMQ } from './rabbitmq-broker.js';
import type { RabbitMQConnectOptions } from './rabbitmq-options.js';

export type { RabbitMQConnectOptions } from './rabbitmq-options.js';

/** The URL schemes this package serves (core's connectBroker picks it by them). */
export const schemes = ['amqp', 'amqps'] as const;

/**
 * Connects to RabbitMQ at `url` (amqp://user:password@host:5672/vhost, amqps:// for TLS) and declares the
 * queues. Rejects with BrokerError Unreachable when RabbitMQ does not answer within connectTimeoutMs,
 * Refused for credentials or a queue of other settings, ConfigError for a URL or option it cannot use.
 */
export function connectBroker(url: string, options: RabbitMQConnectOptions): Promise<Broker> {
  return connectRabbitMQ(url, options);
}
