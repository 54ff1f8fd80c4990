/**
 * The broker path's conformance suite through RabbitMQ, on MariaDB and on PostgreSQL: a relay and consumer
 * processes racing over one table, kill -9 of each, injected duplicates, polling workers beside consumers, and a
 * private RabbitMQ node restarted and killed mid-run. Child processes import the built packages: build first.
 */
import { fileURLToPath } from 'node:url';
import { it } from 'vitest';
import { runBrokerConformance, type BrokerUnderTest } from '@statusq/conformance';
import { mysqlConformance, mysqlUnavailable } from '@statusq/adapter-mysql/testing';
import { postgresConformance, postgresUnavailable } from '@statusq/adapter-postgres/testing';
import { PrivateRabbitMQ, RABBITMQ_TEST_URL, databasesRequired, readDeadLetters, deleteQueues, rabbitmqUnavailable } from './testing.js';

const rabbitmq: BrokerUnderTest = {
  name: 'rabbitmq',
  brokerModule: fileURLToPath(new URL('../dist/index.js', import.meta.url)),
  url: RABBITMQ_TEST_URL,
  dropQueue: (url, queue) => deleteQueues([queue], url),
  readDeadLetters,
  privateBroker: async () => {
    const node = new PrivateRabbitMQ();
    await node.start();
    return {
      url: node.url,
      restart: () => node.restart(),
      killAndStart: async () => {
        await node.kill();
        await node.start();
      },
      stop: () => node.destroy(),
    };
  },
};

const unavailable = (await rabbitmqUnavailable()) ?? (await mysqlUnavailable()) ?? (await postgresUnavailable());
if (unavailable === null) {
  runBrokerConformance(mysqlConformance, rabbitmq);
  runBrokerConformance(postgresConformance, rabbitmq);
} else if (databasesRequired()) {
  it('RabbitMQ, MariaDB and PostgreSQL are reachable (STATUSQ_REQUIRE_DATABASES=1)', () => {
    throw new Error(unavailable);
  });
} else {
  it.skip(`[needs rabbitmq, mysql and postgres] broker conformance: ${unavailable}`, () => undefined);
}
