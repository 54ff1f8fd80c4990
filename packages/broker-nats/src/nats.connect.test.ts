/**
 * Connecting to NATS, before any message moves: queue names and URLs checked with no server, options refused
 * before connecting, and what a server that will not take the broker answers (none listening, no JetStream,
 * bad credentials). A refusal must come at once and say why, with no password in it, so that a misconfigured
 * worker stops at its start instead of hanging. The server cases start a private nats-server; the broker on the
 * shared server is in nats.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '@statusq/core';
import { BrokerError, type BrokerModule } from '@statusq/core/adapter';
import * as natsBroker from './index.js';
import { CONSUMER_NAME, connectBroker, natsLayout } from './index.js';
import { parseNatsUrl } from './nats-connection.js';
import { NATS_TEST_URL, PrivateNats, databasesRequired, freePort, privateNatsUnavailable } from './testing.js';
import { timed } from './test/harness.js';

const noPrivateServer = await privateNatsUnavailable();

describe('queue names and URLs (no server)', () => {
  it('maps the queue to subjects and stream names, dots to underscores', () => {
    expect(natsLayout('statusq.app.jobs')).toEqual({
      queue: 'statusq.app.jobs',
      stream: 'statusq_app_jobs',
      dispatchSubject: 'statusq.app.jobs.dispatch',
      deadStream: 'statusq_app_jobs_dead',
      deadSubject: 'statusq.app.jobs.dead',
      consumer: CONSUMER_NAME,
    });
  });

  it('refuses queue names that cannot be a subject prefix or a stream name', () => {
    for (const queue of ['', 'a..b', '.a', 'a.', 'a*b', 'a.>', 'a b', 'a/b', 'a\\b', '$JS.x', 'a\tb', 'x'.repeat(201)]) {
      expect(() => natsLayout(queue), queue).toThrow(ConfigError);
    }
  });

  it('takes credentials from the URL and hides them in the address', () => {
    expect(parseNatsUrl('nats://bob:s3cret@example.org:4333')).toEqual({ server: 'example.org:4333', address: 'nats://bob:***@example.org:4333', user: 'bob', pass: 's3cret' });
    expect(parseNatsUrl('nats://tok3n@example.org')).toEqual({ server: 'example.org:4222', address: 'nats://***@example.org', token: 'tok3n' });
    expect(parseNatsUrl('nats://[::1]:4222/')).toEqual({ server: '[::1]:4222', address: 'nats://[::1]:4222' });
    for (const url of ['nats://', 'nats://host/db', 'nats://host?x=1', 'amqp://host', 'not a url']) expect(() => parseNatsUrl(url), url).toThrow(ConfigError);
  });

  it('refuses bad options before connecting', async () => {
    await expect(connectBroker(NATS_TEST_URL, { queue: 'statusq.x', ackWaitMs: 0 })).rejects.toThrow(ConfigError);
    await expect(connectBroker(NATS_TEST_URL, { queue: 'statusq.x', connectTimeoutMs: -1 })).rejects.toThrow(ConfigError);
    await expect(connectBroker(NATS_TEST_URL, { queue: 'statusq.x', reconnectWindowMs: 1.5 })).rejects.toThrow(ConfigError);
    await expect(connectBroker(NATS_TEST_URL, { queue: 'bad queue' })).rejects.toThrow(ConfigError);
  });

  it('is a BrokerModule for nats://', () => {
    expect(natsBroker.schemes).toEqual(['nats']);
    expect(natsBroker satisfies BrokerModule).toBeTruthy();
  });

  it('reports an unreachable server as Unreachable within the connect timeout', async () => {
    const port = await freePort();
    const outcome = await timed(connectBroker(`nats://bob:pw@127.0.0.1:${port}`, { queue: 'statusq.unreachable', connectTimeoutMs: 1_000 }));
    expect(outcome.error).toBeInstanceOf(BrokerError);
    expect((outcome.error as BrokerError).kind).toBe('Unreachable');
    expect((outcome.error as BrokerError).message).toContain(`nats://bob:***@127.0.0.1:${port}`);
    expect((outcome.error as BrokerError).message).not.toContain('pw');
    expect(outcome.ms).toBeLessThan(4_000);
  });
});

describe.runIf(noPrivateServer === null)('private servers (no JetStream, credentials)', () => {
  it('refuses a server without JetStream, saying to enable -js', async () => {
    const server = await PrivateNats.start({ jetstream: false });
    try {
      const error = await connectBroker(server.url, { queue: 'statusq.nojs', connectTimeoutMs: 5_000 }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BrokerError);
      expect((error as BrokerError).kind).toBe('Refused');
      expect((error as BrokerError).message).toMatch(/JetStream disabled.*-js/);
    } finally {
      await server.dispose();
    }
  });

  it('refuses bad credentials at once and connects with good ones', async () => {
    const server = await PrivateNats.start({ args: ['--user', 'bob', '--pass', 's3cret'] });
    try {
      for (const url of [`nats://bob:wrong@127.0.0.1:${server.port}`, server.url]) {
        const outcome = await timed(connectBroker(url, { queue: 'statusq.auth', connectTimeoutMs: 5_000 }));
        expect(outcome.error, url).toBeInstanceOf(BrokerError);
        expect((outcome.error as BrokerError).kind, url).toBe('Refused');
        expect((outcome.error as BrokerError).message).not.toContain('wrong');
        expect(outcome.ms).toBeLessThan(3_000);
      }
      const broker = await connectBroker(`nats://bob:s3cret@127.0.0.1:${server.port}`, { queue: 'statusq.auth' });
      expect(broker.address).toBe(`nats://bob:***@127.0.0.1:${server.port}`);
      await broker.close();
    } finally {
      await server.dispose();
    }
  });
});

if (noPrivateServer !== null) {
  if (databasesRequired()) {
    it('nats-server can be run for private servers (STATUSQ_REQUIRE_DATABASES=1)', () => {
      throw new Error(noPrivateServer);
    });
  } else {
    it.skip(`[needs nats-server] private-server cases: ${noPrivateServer}`, () => undefined);
  }
}
