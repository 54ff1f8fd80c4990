import { connect, type NatsConnection } from '@nats-io/transport-node';
import { ConfigError } from '@statusq/core';
import { BrokerError, redactUrl } from '@statusq/core/adapter';
import { sleep } from '@statusq/core/adapter';
import { isAuthError, messageOf } from './nats-errors.js';

export const DEFAULT_NATS_PORT = 4222;
const USAGE = 'use nats://host:port, nats://user:password@host:port or nats://token@host:port';

/** A NATS URL taken apart: nats.js takes credentials as options, never from the server address. */
export interface NatsTarget {
  /** host:port, as nats.js wants it. */
  readonly server: string;
  /** The URL with its password or token hidden. */
  readonly address: string;
  readonly user?: string;
  readonly pass?: string;
  readonly token?: string;
}

/**
 * `nats://user:password@host:port` logs in with a user and password, `nats://token@host:port` (a user and
 * no password) with a token, as the nats CLI reads them. One server: nats.js learns the rest of a cluster
 * from the server it reaches.
 */
export function parseNatsUrl(url: string): NatsTarget {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(`invalid NATS URL ${JSON.stringify(redactUrl(url))}: ${USAGE}`);
  }
  const userInfo = parsed.username !== '' && parsed.password === '' ? '***@' : parsed.username !== '' ? `${parsed.username}:***@` : '';
  const address = `${parsed.protocol}//${userInfo}${parsed.host}`;
  if (parsed.protocol !== 'nats:') throw new ConfigError(`the NATS broker serves nats:// URLs, not ${JSON.stringify(address)}`);
  if (parsed.hostname === '') throw new ConfigError(`the NATS URL ${JSON.stringify(address)} names no host: ${USAGE}`);
  if ((parsed.pathname !== '' && parsed.pathname !== '/') || parsed.search !== '' || parsed.hash !== '') {
    throw new ConfigError(`the NATS URL ${JSON.stringify(redactUrl(url))} has a path or query, which NATS does not use: ${USAGE}`);
  }
  let user: string;
  let pass: string;
  try {
    user = decodeURIComponent(parsed.username);
    pass = decodeURIComponent(parsed.password);
  } catch {
    throw new ConfigError(`the credentials in the NATS URL ${JSON.stringify(address)} hold a bad percent-escape: write a literal % as %25`);
  }
  const server = `${parsed.hostname}:${parsed.port || DEFAULT_NATS_PORT}`;
  if (user !== '' && pass !== '') return { server, address, user, pass };
  if (user !== '') return { server, address, token: user };
  return { server, address };
}

export interface OpenOptions {
  connectTimeoutMs: number;
}

/** How often a client pings: a server gone without closing the socket (a frozen network) is noticed after PING_INTERVAL_MS × MAX_PINGS_OUT. */
const PING_INTERVAL_MS = 5_000;
const MAX_PINGS_OUT = 3;

/**
 * Connects, trying again until `connectTimeoutMs` has passed (a broker that starts with the application
 * is fine), then BrokerError Unreachable. Credentials the server refuses are Refused at once: trying again
 * cannot help. Once connected, nats.js reconnects by itself without end; the broker decides when to give up.
 */
export async function openConnection(target: NatsTarget, options: OpenOptions): Promise<NatsConnection> {
  const deadline = Date.now() + options.connectTimeoutMs;
  let last: unknown = new Error('no attempt');
  while (true) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) break;
    try {
      return await connect({
        servers: target.server,
        ...(target.user !== undefined ? { user: target.user, pass: target.pass } : {}),
        ...(target.token !== undefined ? { token: target.token } : {}),
        name: 'statusq',
        timeout: remaining,
        reconnect: true,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 500,
        reconnectJitter: 250,
        pingInterval: PING_INTERVAL_MS,
        maxPingOut: MAX_PINGS_OUT,
      });
    } catch (error) {
      if (isAuthError(error)) {
        throw new BrokerError('Refused', `NATS at ${target.address} refused the connection: ${messageOf(error)} (check the user and password or token in the URL)`, (error as Error).name, { cause: error });
      }
      last = error;
      await sleep(Math.min(250, Math.max(0, deadline - Date.now())));
    }
  }
  throw new BrokerError('Unreachable', `NATS at ${target.address} did not answer within ${options.connectTimeoutMs} ms: ${messageOf(last)}`, last instanceof Error ? last.name : undefined, { cause: last });
}
