/**
 * The shared conformance suite on PostgreSQL (test/postgres-conformance-run.ts), every group but the fault
 * groups, which run in the chaos tier (postgres.faults.test.ts).
 */
import { NO_FAULT_GROUPS } from '@statusq/conformance';
import { postgresConformanceRun } from './test/postgres-conformance-run.js';

postgresConformanceRun(NO_FAULT_GROUPS);
