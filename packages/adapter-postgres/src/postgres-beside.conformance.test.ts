/**
 * The conformance groups of leases, retries, fencing and the state machine again, on tables whose claim state is in
 * a claims table beside them (`migrate --beside`, ConformanceOptions.claimState): the layout must not change what
 * they prove.
 */
import { BESIDE_GROUPS } from '@statusq/conformance';
import { postgresConformanceRun } from './test/postgres-conformance-run.js';

postgresConformanceRun(BESIDE_GROUPS, { name: 'postgres, claim state beside the table', claimState: 'beside' });
