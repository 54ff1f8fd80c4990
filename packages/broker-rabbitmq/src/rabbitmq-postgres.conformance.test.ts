/**
 * The broker path's conformance suite through RabbitMQ on PostgreSQL (see rabbitmq-mysql.conformance.test.ts).
 */
import { runBrokerConformanceWhereReachable } from '@statusq/conformance';
import { postgresConformance, postgresUnavailable } from '@statusq/adapter-postgres/testing';
import { databasesRequired, rabbitmqUnavailable } from './testing.js';
import { rabbitmqUnderTest } from './test/rabbitmq-under-test.js';

runBrokerConformanceWhereReachable(postgresConformance, rabbitmqUnderTest, (await rabbitmqUnavailable()) ?? (await postgresUnavailable()), databasesRequired());
