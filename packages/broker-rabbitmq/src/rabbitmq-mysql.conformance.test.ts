/**
 * The broker path's conformance suite through RabbitMQ on MariaDB: a relay and consumer processes racing over
 * one table, kill -9 of each, injected duplicates, polling workers beside consumers, and a private RabbitMQ
 * node restarted and killed mid-run. Child processes import the built packages: build first.
 * (rabbitmq-postgres.conformance.test.ts: the same on PostgreSQL.)
 */
import { runBrokerConformanceWhereReachable } from '@statusq/conformance';
import { mysqlConformance, mysqlUnavailable } from '@statusq/adapter-mysql/testing';
import { databasesRequired, rabbitmqUnavailable } from './testing.js';
import { rabbitmqUnderTest } from './test/rabbitmq-under-test.js';

runBrokerConformanceWhereReachable(mysqlConformance, rabbitmqUnderTest, (await rabbitmqUnavailable()) ?? (await mysqlUnavailable()), databasesRequired());
