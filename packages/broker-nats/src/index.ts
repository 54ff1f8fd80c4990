/**
 * `@statusq/broker-nats`: statusq's dispatch over NATS JetStream. core's connectBroker() loads it for
 * nats:// URLs; an application may also call connectBroker here directly.
 */
import type { BrokerModule } from '@statusq/core/adapter';
import { connectBroker } from './nats-broker.js';

export const schemes = ['nats'] as const;
export { connectBroker } from './nats-broker.js';
export { DEFAULT_ACK_WAIT_MS, DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_RECONNECT_WINDOW_MS, type NatsBrokerOptions } from './nats-options.js';
export { natsLayout, CONSUMER_NAME, type NatsLayout } from './nats-layout.js';

// Fails the build if the exports stop fitting what core's connectBroker() loads.
({ schemes, connectBroker }) satisfies BrokerModule;
