/** What tests of statusq on MySQL/MariaDB use (`@statusq/adapter-mysql/testing`): the conformance suite's fixture tables and plan reader. */
export { mysqlFixtures, mysqlQueryPlans } from './mysql-fixtures.js';
