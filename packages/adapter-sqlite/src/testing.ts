/** What tests of statusq on SQLite use (`@statusq/adapter-sqlite/testing`): the conformance suite's fixture tables and plan reader. */
export { sqliteFixtures, sqliteQueryPlans } from './sqlite-fixtures.js';
