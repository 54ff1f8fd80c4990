/**
 * The conformance suite's fault groups on MySQL/MariaDB, with both claim strategies: a private server restarted
 * and every connection killed mid-run, the network frozen through a TCP proxy. The read-only cases turn a whole
 * server read-only: they run on a private one of their own (mysql.read-only.test.ts).
 */
import { FAULT_GROUPS } from '@statusq/conformance';
import { mysqlSuite } from './test/mysql-test-db.js';
import { mysqlConformanceRun } from './test/mysql-conformance-runs.js';

mysqlSuite('mysql', () => {
  for (const strategy of ['native', 'conditional-update'] as const) mysqlConformanceRun(strategy, FAULT_GROUPS.filter((group) => group !== 'read-only'));
});
