import type { ConnectionOptions as TlsOptions } from 'node:tls';
import type { Options } from 'amqplib';
import { ConfigError } from '@statusq/core';
import { redactUrl, type BrokerConnectOptions } from '@statusq/core/adapter';
import { parseServerUrl } from '@statusq/core/adapter';

export interface RabbitMQConnectOptions extends BrokerConnectOptions {
  /**
   * How long the client keeps reconnecting after it lost the connection (100 ms doubling to 2 s between
   * tries) before it gives up and tells consumers through onError. Default 30 s.
   */
  reconnectWindowMs?: number | undefined;
  /** How long publish() waits for the broker's confirms before BrokerError NotConfirmed. Default 30 s. */
  confirmTimeoutMs?: number | undefined;
  /** TLS settings for amqps:// (a private CA, a client certificate). */
  tls?: TlsOptions | undefined;
}

export const DEFAULTS = {
  connectTimeoutMs: 10_000,
  reconnectWindowMs: 30_000,
  confirmTimeoutMs: 30_000,
  firstRetryMs: 100,
  maxRetryMs: 2000,
  /** One connection attempt (socket and handshake): a host that swallows packets is tried again, and close() never waits longer than this for an attempt. */
  attemptMs: 5000,
} as const;

const USAGE = 'use amqp://user:password@host:5672/vhost (amqps:// for TLS)';

/** The URL query parameters amqplib understands and statusq passes on; anything else is a typo. */
const URL_PARAMETERS = ['heartbeat', 'frameMax', 'channelMax', 'maxFrameSize', 'locale'] as const;

/** What amqplib's connect takes, from a statusq broker URL; a ConfigError for anything it cannot use. */
export function connectionFromUrl(url: string): Options.Connect {
  const parsed = parseServerUrl(url, USAGE);
  const shown = JSON.stringify(redactUrl(url));
  const protocol = parsed.protocol.slice(0, -1).toLowerCase();
  if (protocol !== 'amqp' && protocol !== 'amqps') throw new ConfigError(`unsupported broker URL ${shown}: ${USAGE}`);
  if (parsed.hostname === '') throw new ConfigError(`broker URL ${shown} names no host: ${USAGE}`);
  if (parsed.hash !== '') throw new ConfigError(`broker URL ${shown} has a #fragment, which means nothing here: ${USAGE}`);
  const path = parsed.pathname;
  if (path.slice(1).includes('/')) throw new ConfigError(`broker URL ${shown}: the virtual host is one path segment (write a / inside its name as %2F)`);
  const connection: Options.Connect = {
    protocol,
    hostname: parsed.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: parsed.port === '' ? (protocol === 'amqps' ? 5671 : 5672) : Number(parsed.port),
    // As amqplib reads a URL: guest/guest only when the URL names no user and no password.
    ...(parsed.username === '' && parsed.password === ''
      ? { username: 'guest', password: 'guest' }
      : { username: decodeURIComponent(parsed.username), password: decodeURIComponent(parsed.password) }),
    // RabbitMQ's default virtual host is "/", which an empty path stands for.
    vhost: path === '' || path === '/' ? '/' : decodeURIComponent(path.slice(1)),
  };
  for (const [name, value] of parsed.searchParams) {
    if (!(URL_PARAMETERS as readonly string[]).includes(name)) {
      throw new ConfigError(`unknown parameter ${JSON.stringify(name)} in broker URL ${shown}: the parameters are ${URL_PARAMETERS.join(', ')}`);
    }
    if (name === 'locale') {
      connection.locale = value;
      continue;
    }
    if (!/^\d+$/.test(value)) throw new ConfigError(`the parameter ${name} in broker URL ${shown} must be a whole number, got ${JSON.stringify(value)}`);
    (connection as Record<string, unknown>)[name] = Number(value);
  }
  return connection;
}

/** A positive duration option, or its default; a ConfigError for anything else. */
export function durationOption(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) throw new ConfigError(`${name} must be a positive number of milliseconds, got ${String(value)}`);
  return value;
}
