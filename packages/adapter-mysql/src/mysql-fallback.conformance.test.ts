/**
 * The shared conformance suite on MySQL/MariaDB with the portable conditional-update claim forced at the
 * adapter (the fallback of servers without SKIP LOCKED), every group but the fault groups
 * (mysql.faults.test.ts, the chaos tier).
 */
import { NO_FAULT_GROUPS } from '@statusq/conformance';
import { mysqlSuite } from './test/mysql-test-db.js';
import { mysqlConformanceRun } from './test/mysql-conformance-runs.js';

mysqlSuite('mysql', () => {
  mysqlConformanceRun('conditional-update', NO_FAULT_GROUPS);
});
