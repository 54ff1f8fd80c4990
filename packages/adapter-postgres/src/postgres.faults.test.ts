/**
 * The conformance suite's fault groups on PostgreSQL: a private server restarted and every connection killed
 * mid-run, the network frozen through a TCP proxy. The read-only cases turn a whole server read-only: they run
 * on a private one of their own (postgres.read-only.test.ts).
 */
import { FAULT_GROUPS } from '@statusq/conformance';
import { postgresConformanceRun } from './test/postgres-conformance-run.js';

postgresConformanceRun(FAULT_GROUPS.filter((group) => group !== 'read-only'));
