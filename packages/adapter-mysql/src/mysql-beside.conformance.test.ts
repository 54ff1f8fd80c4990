/**
 * The conformance groups of leases, retries, fencing and the state machine again on MySQL/MariaDB, on tables whose
 * claim state is in a claims table beside them (`migrate --beside`, ConformanceOptions.claimState), with the native
 * claim and with the conditional-update fallback: the layout must not change what they prove.
 */
import { BESIDE_GROUPS } from '@statusq/conformance';
import { mysqlSuite } from './test/mysql-test-db.js';
import { mysqlConformanceRun } from './test/mysql-conformance-runs.js';

mysqlSuite('mysql', () => {
  mysqlConformanceRun('native', BESIDE_GROUPS, { claimState: 'beside' });
  mysqlConformanceRun('conditional-update', BESIDE_GROUPS, { claimState: 'beside' });
});
