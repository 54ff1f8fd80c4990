/**
 * The shared conformance suite on MySQL/MariaDB with the native skip-locked claim, every group but the fault
 * groups (mysql.faults.test.ts, the chaos tier). The conditional-update fallback runs the same groups in
 * mysql-fallback.conformance.test.ts, a file of its own so the two run side by side.
 */
import { NO_FAULT_GROUPS } from '@statusq/conformance';
import { mysqlSuite } from './test/mysql-test-db.js';
import { mysqlConformanceRun } from './test/mysql-conformance-runs.js';

mysqlSuite('mysql', () => {
  mysqlConformanceRun('native', NO_FAULT_GROUPS);
});
