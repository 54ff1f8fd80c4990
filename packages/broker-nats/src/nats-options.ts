import { ConfigError } from '@statusq/core';
import type { BrokerConnectOptions } from '@statusq/core/adapter';

export interface NatsBrokerOptions extends BrokerConnectOptions {
  /**
   * How long JetStream waits for an ack before it delivers the message again (to any consumer). Default
   * 30 s. Set on the shared consumer at every connect: give all processes of a table the same value.
   */
  ackWaitMs?: number | undefined;
  /**
   * How long the connection may stay down (nats.js reconnecting by itself) before the broker gives up:
   * every subscription's onError gets BrokerError ConnectionLost and the broker closes. Default 30 s.
   */
  reconnectWindowMs?: number | undefined;
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
export const DEFAULT_ACK_WAIT_MS = 30_000;
export const DEFAULT_RECONNECT_WINDOW_MS = 30_000;

export function durationOption(value: number | undefined, fallback: number, name: string, min: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) throw new ConfigError(`${name} must be an integer of at least ${min} (milliseconds), got ${JSON.stringify(value)}`);
  return value;
}
