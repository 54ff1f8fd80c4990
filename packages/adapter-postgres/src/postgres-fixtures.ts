/**
 * The conformance suite's fixture tables in PostgreSQL's DDL, and how to read PostgreSQL's query plans (the
 * contracts are FixtureTables and QueryPlans in `@statusq/conformance`).
 */
import type { ExplainOptions, Statement, Store } from '@statusq/core/adapter';
import { postgresDialect } from './postgres-dialect.js';
import { analyzePostgresTable, explainOnPostgres } from './postgres-doctor.js';

const q = (name: string) => postgresDialect.quoteIdentifier(name);

/** Primary key (id, k), so two rows may share an id. */
const pairs = (table: string) => `CREATE TABLE ${q(table)} (id BIGINT NOT NULL, k SMALLINT NOT NULL, date TIMESTAMPTZ(3) NOT NULL, status SMALLINT NULL, PRIMARY KEY (id, k))`;

export const postgresFixtures = {
  tableA: (table: string, { ownIndex = true }: { ownIndex?: boolean } = {}) => [
    `CREATE TABLE ${q(table)} (id BIGINT PRIMARY KEY, date TIMESTAMPTZ(3) NOT NULL, url TEXT NOT NULL, kind TEXT NOT NULL, status SMALLINT NULL)`,
    ...(ownIndex ? [`CREATE INDEX ${q(`${table}_pending`)} ON ${q(table)} (date) WHERE status IS NULL`] : []),
  ],
  checked: {
    sharedId: (table: string) => [pairs(table)],
    uniqueId: (table: string) => [pairs(table), `CREATE UNIQUE INDEX ${q(`${table}_id`)} ON ${q(table)} (id)`],
    partialUniqueId: (table: string) => [pairs(table), `CREATE UNIQUE INDEX ${q(`${table}_id`)} ON ${q(table)} (id) WHERE k = 1`],
    textStatus: (table: string) => [`CREATE TABLE ${q(table)} (id BIGINT PRIMARY KEY, date TIMESTAMPTZ(3) NOT NULL, status VARCHAR(8) NULL)`],
    // Every column has a type.
    untypedStatus: null,
    bounded: (table: string) => [
      `CREATE TABLE ${q(table)} (id BIGSERIAL PRIMARY KEY, date TIMESTAMPTZ(3) NOT NULL DEFAULT now(), status SMALLINT NULL, payload VARCHAR(10) NULL, result VARCHAR(10) NULL, last_error VARCHAR(20) NULL)`,
    ],
    defaultId: (table: string) => [
      `CREATE TABLE ${q(table)} (id TEXT PRIMARY KEY DEFAULT gen_random_uuid()::text, seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE, date TIMESTAMPTZ(3) NOT NULL DEFAULT now(), status SMALLINT NULL, payload TEXT NULL)`,
    ],
    assignedId: (table: string) => [`CREATE TABLE ${q(table)} (id INTEGER NOT NULL PRIMARY KEY, date TIMESTAMPTZ(3) NOT NULL, status SMALLINT NULL)`],
  },
};

/** The adapter's own plan reader (postgres-doctor.ts), as the conformance suite's QueryPlans. */
export const postgresQueryPlans = {
  analyze: analyzePostgresTable,
  explain: (store: Store, statement: Statement, options?: ExplainOptions) => explainOnPostgres(store, statement, options),
};
