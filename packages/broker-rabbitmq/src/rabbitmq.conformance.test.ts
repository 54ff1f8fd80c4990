/**
 * The broker path's conformance suite through RabbitMQ, on MariaDB and on PostgreSQL: a relay and consumer
 * processes racing over one table, kill -9 of each, injected duplicates, polling workers beside consumers, and a
 * private RabbitMQ node restarted and killed mid-run (so it is in the chaos tier). One file for both databases:
 * its private nodes start one at a time (a node's restart takes both cores for seconds). Child processes import
 * the built packages: build first. STATUSQ_DIALECTS leaves a database out.
 */
import { runBrokerConformanceWhereReachable } from '@statusq/conformance';
import { mysqlConformance, mysqlUnavailable } from '@statusq/adapter-mysql/testing';
import { postgresConformance, postgresUnavailable } from '@statusq/adapter-postgres/testing';
import { dialectSelected } from '../../../scripts/test-tiers.mjs';
import { databasesRequired, rabbitmqUnavailable } from './testing.js';
import { rabbitmqUnderTest } from './test/rabbitmq-under-test.js';

const rabbitmq = await rabbitmqUnavailable();
if (dialectSelected('mysql')) runBrokerConformanceWhereReachable(mysqlConformance, rabbitmqUnderTest, rabbitmq ?? (await mysqlUnavailable()), databasesRequired());
if (dialectSelected('postgres')) runBrokerConformanceWhereReachable(postgresConformance, rabbitmqUnderTest, rabbitmq ?? (await postgresUnavailable()), databasesRequired());
