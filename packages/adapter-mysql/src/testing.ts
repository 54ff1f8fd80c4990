/**
 * What tests of statusq on MySQL/MariaDB use (`@statusq/adapter-mysql/testing`): the conformance suite's
 * fixture tables and plan reader, throwaway databases, and `mysqlConformance`, everything `runConformance`
 * needs from this adapter: a project's own conformance file is `runConformance(mysqlConformance)`.
 */
import { fileURLToPath } from 'node:url';
import { connect } from './index.js';
import { mysqlFixtures, mysqlQueryPlans } from './mysql-fixtures.js';
import { createDatabase, dropDatabase } from './mysql-test-databases.js';

export { mysqlFixtures, mysqlQueryPlans };
export { BASE_URL, adminQuery, createDatabase, dropDatabase, mysqlUnavailable, urlFor } from './mysql-test-databases.js';

export const mysqlConformance = {
  name: 'mysql',
  /** This package's entry, which the suite's child processes import. */
  adapterModule: fileURLToPath(new URL('./index.js', import.meta.url)),
  /** Each test in a database of its own on STATUSQ_MYSQL_URL's server, dropped afterwards. */
  url: () => createDatabase(),
  dropDatabase: (url: string) => dropDatabase(url),
  createStore: (url: string) => connect(url),
  fixtures: mysqlFixtures,
  queryPlans: mysqlQueryPlans,
};
