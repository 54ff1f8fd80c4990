/**
 * The broker path's conformance suite through NATS JetStream on PostgreSQL (see nats-mysql.conformance.test.ts).
 */
import { runBrokerConformanceWhereReachable } from '@statusq/conformance';
import { postgresConformance, postgresUnavailable } from '@statusq/adapter-postgres/testing';
import { databasesRequired } from './testing.js';
import { natsConformanceUnavailable, natsUnderTest } from './test/nats-under-test.js';

runBrokerConformanceWhereReachable(postgresConformance, natsUnderTest, (await natsConformanceUnavailable()) ?? (await postgresUnavailable()), databasesRequired());
