/**
 * The conformance suite's fixture tables in MySQL/MariaDB's DDL, and how to read their query plans (the
 * contracts are FixtureTables and QueryPlans in `@statusq/conformance`). Tables are InnoDB in utf8mb4, as
 * statusq's own.
 */
import type { ExplainOptions, Statement, Store } from '@statusq/core/adapter';
import { mysqlDialect } from './mysql-dialect.js';
import { analyzeMysqlTable, explainOnMysql } from './mysql-doctor.js';

const q = (name: string) => mysqlDialect.quoteIdentifier(name);
const TAIL = 'ENGINE=InnoDB DEFAULT CHARSET=utf8mb4';

/** Primary key (id, k), so two rows may share an id. */
const pairs = (table: string) => `CREATE TABLE ${q(table)} (id BIGINT NOT NULL, k TINYINT NOT NULL, date DATETIME(3) NOT NULL, status TINYINT NULL, PRIMARY KEY (id, k)) ${TAIL}`;

export const mysqlFixtures = {
  tableA: (table: string, { ownIndex = true }: { ownIndex?: boolean } = {}) => [
    `CREATE TABLE ${q(table)} (id BIGINT PRIMARY KEY, date DATETIME(3) NOT NULL, url VARCHAR(255) NOT NULL, kind VARCHAR(16) NOT NULL, status TINYINT NULL${
      ownIndex ? `, INDEX ${q(`${table}_status_date`)} (status, date)` : ''
    }) ${TAIL}`,
  ],
  checked: {
    sharedId: (table: string) => [pairs(table)],
    uniqueId: (table: string) => [pairs(table), `CREATE UNIQUE INDEX ${q(`${table}_id`)} ON ${q(table)} (id)`],
    // No partial indexes.
    partialUniqueId: null,
    textStatus: (table: string) => [`CREATE TABLE ${q(table)} (id BIGINT PRIMARY KEY, date DATETIME(3) NOT NULL, status VARCHAR(8) NULL) ${TAIL}`],
    // Every column has a type.
    untypedStatus: null,
    bounded: (table: string) => [
      `CREATE TABLE ${q(table)} (id BIGINT AUTO_INCREMENT PRIMARY KEY, date DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), status TINYINT NULL, payload VARCHAR(10) NULL, result VARCHAR(10) NULL, last_error VARCHAR(20) NULL) ${TAIL}`,
    ],
    // An expression default needs MySQL 8.0.13 or MariaDB 10.2.
    defaultId: (table: string) => [
      `CREATE TABLE ${q(table)} (id CHAR(36) NOT NULL DEFAULT (UUID()) PRIMARY KEY, seq BIGINT NOT NULL AUTO_INCREMENT UNIQUE, date DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), status TINYINT NULL, payload TEXT NULL) ${TAIL}`,
    ],
    assignedId: (table: string) => [`CREATE TABLE ${q(table)} (id INT NOT NULL PRIMARY KEY, date DATETIME(3) NOT NULL, status TINYINT NULL) ${TAIL}`],
  },
};

/** The adapter's own plan reader (mysql-doctor.ts), as the conformance suite's QueryPlans. */
export const mysqlQueryPlans = {
  analyze: analyzeMysqlTable,
  explain: (store: Store, statement: Statement, options?: ExplainOptions) => explainOnMysql(store, statement, options),
};
