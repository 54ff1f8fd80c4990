/**
 * The conformance suite's fixture tables in SQLite's DDL, and how to read SQLite's query plans (the
 * contracts are FixtureTables and QueryPlans in `@statusq/conformance`). Times are text in the
 * 'YYYY-MM-DD HH:MM:SS.SSS' form, which sorts as time.
 */
import type { ExplainOptions, Statement, Store } from '@statusq/core/adapter';
import { sqliteDialect } from './sqlite-dialect.js';
import { analyzeSqlite, explainOnSqlite } from './sqlite-doctor.js';

const q = (name: string) => sqliteDialect.quoteIdentifier(name);

/** Primary key (id, k), so two rows may share an id. */
const pairs = (table: string) => `CREATE TABLE ${q(table)} (id INTEGER NOT NULL, k INTEGER NOT NULL, date TEXT NOT NULL, status INTEGER NULL, PRIMARY KEY (id, k))`;

export const sqliteFixtures = {
  tableA: (table: string, { ownIndex = true }: { ownIndex?: boolean } = {}) => [
    `CREATE TABLE ${q(table)} (id INTEGER PRIMARY KEY, date TEXT NOT NULL, url TEXT NOT NULL, kind TEXT NOT NULL, status INTEGER NULL)`,
    ...(ownIndex ? [`CREATE INDEX ${q(`${table}_status_date`)} ON ${q(table)} (status, date)`] : []),
  ],
  checked: {
    sharedId: (table: string) => [pairs(table)],
    uniqueId: (table: string) => [pairs(table), `CREATE UNIQUE INDEX ${q(`${table}_id`)} ON ${q(table)} (id)`],
    partialUniqueId: (table: string) => [pairs(table), `CREATE UNIQUE INDEX ${q(`${table}_id`)} ON ${q(table)} (id) WHERE k = 1`],
    textStatus: (table: string) => [`CREATE TABLE ${q(table)} (id INTEGER PRIMARY KEY, date TEXT NOT NULL, status VARCHAR(8) NULL)`],
    // No declared type: a value is stored as it was bound, so the integers statusq writes stay integers.
    untypedStatus: (table: string) => [`CREATE TABLE ${q(table)} (id INTEGER PRIMARY KEY, date TEXT NOT NULL, status)`],
    // SQLite stores text of any length whatever the declared size (the conformance run says enforcesTextLength: false).
    bounded: (table: string) => [
      `CREATE TABLE ${q(table)} (id INTEGER PRIMARY KEY, date TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')), status INTEGER NULL, payload VARCHAR(10) NULL, result VARCHAR(10) NULL, last_error VARCHAR(20) NULL)`,
    ],
    // A TEXT primary key: the rowid beside it is the column SQLite numbers.
    defaultId: (table: string) => [
      `CREATE TABLE ${q(table)} (id TEXT PRIMARY KEY DEFAULT (lower(hex(randomblob(16)))), date TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')), status INTEGER NULL, payload TEXT NULL)`,
    ],
    // Only a column declared exactly INTEGER PRIMARY KEY is the rowid, which SQLite numbers.
    assignedId: (table: string) => [`CREATE TABLE ${q(table)} (id BIGINT NOT NULL PRIMARY KEY, date TEXT NOT NULL, status INTEGER NULL)`],
  },
};

/** The adapter's own plan reader (sqlite-doctor.ts), as the conformance suite's QueryPlans. */
export const sqliteQueryPlans = {
  analyze: (store: Store) => analyzeSqlite(store),
  explain: (store: Store, statement: Statement, options?: ExplainOptions) => explainOnSqlite(store, statement, options),
};
