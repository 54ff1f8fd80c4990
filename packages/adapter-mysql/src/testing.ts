/**
 * What tests of statusq on MySQL/MariaDB use (`@statusq/adapter-mysql/testing`): the conformance suite's
 * fixture tables and plan reader, and `mysqlConformance`, what `runConformance` needs from this adapter
 * besides a throwaway database per test (`url`, `dropDatabase`), which the project supplies.
 */
import { fileURLToPath } from 'node:url';
import { connect } from './index.js';
import { mysqlFixtures, mysqlQueryPlans } from './mysql-fixtures.js';

export { mysqlFixtures, mysqlQueryPlans };

export const mysqlConformance = {
  name: 'mysql',
  /** This package's entry, which the suite's child processes import. */
  adapterModule: fileURLToPath(new URL('./index.js', import.meta.url)),
  createStore: (url: string) => connect(url),
  fixtures: mysqlFixtures,
  queryPlans: mysqlQueryPlans,
};
