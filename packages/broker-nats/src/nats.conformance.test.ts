/**
 * The broker path's conformance suite through NATS JetStream, on MariaDB and on PostgreSQL: a relay and
 * consumer processes racing over one table, kill -9 of each, injected duplicates, polling workers beside
 * consumers, and a private nats-server restarted and killed mid-run. Child processes import the built
 * packages: build first.
 */
import { fileURLToPath } from 'node:url';
import { it } from 'vitest';
import { runBrokerConformance, type BrokerUnderTest } from '@statusq/conformance';
import { mysqlConformance, mysqlUnavailable } from '@statusq/adapter-mysql/testing';
import { postgresConformance, postgresUnavailable } from '@statusq/adapter-postgres/testing';
import { NATS_TEST_URL, PrivateNats, databasesRequired, readDeadLetters, deleteQueueStreams, natsUnavailable, privateNatsUnavailable } from './testing.js';

const nats: BrokerUnderTest = {
  name: 'nats',
  brokerModule: fileURLToPath(new URL('../dist/index.js', import.meta.url)),
  url: NATS_TEST_URL,
  dropQueue: (url, queue) => deleteQueueStreams(url, [queue]),
  readDeadLetters,
  privateBroker: async () => {
    const server = await PrivateNats.start();
    return {
      url: server.url,
      restart: () => server.restart(),
      killAndStart: async () => {
        await server.kill();
        await server.start();
      },
      stop: () => server.dispose(),
    };
  },
};

const unavailable = (await natsUnavailable()) ?? (await privateNatsUnavailable()) ?? (await mysqlUnavailable()) ?? (await postgresUnavailable());
if (unavailable === null) {
  runBrokerConformance(mysqlConformance, nats);
  runBrokerConformance(postgresConformance, nats);
} else if (databasesRequired()) {
  it('NATS, MariaDB and PostgreSQL are reachable (STATUSQ_REQUIRE_DATABASES=1)', () => {
    throw new Error(unavailable);
  });
} else {
  it.skip(`[needs nats, mysql and postgres] broker conformance: ${unavailable}`, () => undefined);
}
