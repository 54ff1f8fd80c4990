/**
 * The conformance groups of leases, retries, fencing and the state machine again, on tables whose claim state is in
 * a claims table beside them (`migrate --beside`, ConformanceOptions.claimState): the layout must not change what
 * they prove.
 */
import { fileURLToPath } from 'node:url';
import { BESIDE_GROUPS, runConformance } from '@statusq/conformance';
import { sqliteConformance } from './testing.js';

runConformance({ ...sqliteConformance, name: 'sqlite, claim state beside the table', adapterModule: fileURLToPath(new URL('../dist/index.js', import.meta.url)), groups: BESIDE_GROUPS, claimState: 'beside' });
