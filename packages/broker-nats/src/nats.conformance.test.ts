/**
 * The broker path's conformance suite through NATS JetStream, on MariaDB and on PostgreSQL: a relay and
 * consumer processes racing over one table, kill -9 of each, injected duplicates, polling workers beside
 * consumers, and a private nats-server restarted and killed mid-run (so it is in the chaos tier). One file for
 * both databases: its private servers start one at a time. Child processes import the built packages: build
 * first. STATUSQ_DIALECTS leaves a database out.
 */
import { runBrokerConformanceWhereReachable } from '@statusq/conformance';
import { mysqlConformance, mysqlUnavailable } from '@statusq/adapter-mysql/testing';
import { postgresConformance, postgresUnavailable } from '@statusq/adapter-postgres/testing';
import { dialectSelected } from '../../../scripts/test-tiers.mjs';
import { databasesRequired } from './testing.js';
import { natsConformanceUnavailable, natsUnderTest } from './test/nats-under-test.js';

const nats = await natsConformanceUnavailable();
if (dialectSelected('mysql')) runBrokerConformanceWhereReachable(mysqlConformance, natsUnderTest, nats ?? (await mysqlUnavailable()), databasesRequired());
if (dialectSelected('postgres')) runBrokerConformanceWhereReachable(postgresConformance, natsUnderTest, nats ?? (await postgresUnavailable()), databasesRequired());
