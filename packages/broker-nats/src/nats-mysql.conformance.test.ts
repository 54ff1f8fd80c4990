/**
 * The broker path's conformance suite through NATS JetStream on MariaDB: a relay and consumer processes racing
 * over one table, kill -9 of each, injected duplicates, polling workers beside consumers, and a private
 * nats-server restarted and killed mid-run. Child processes import the built packages: build first.
 * (nats-postgres.conformance.test.ts: the same on PostgreSQL.)
 */
import { runBrokerConformanceWhereReachable } from '@statusq/conformance';
import { mysqlConformance, mysqlUnavailable } from '@statusq/adapter-mysql/testing';
import { databasesRequired } from './testing.js';
import { natsConformanceUnavailable, natsUnderTest } from './test/nats-under-test.js';

runBrokerConformanceWhereReachable(mysqlConformance, natsUnderTest, (await natsConformanceUnavailable()) ?? (await mysqlUnavailable()), databasesRequired());
