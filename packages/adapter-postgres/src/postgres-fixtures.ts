/**
 * The conformance suite's fixture tables in PostgreSQL's DDL, and how to read PostgreSQL's query plans (the
 * contracts are FixtureTables and QueryPlans in `@statusq/conformance`).
 */
import type { Statement, Store } from '@statusq/core/adapter';
import { postgresDialect } from './postgres-dialect.js';

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
  },
};

/**
 * EXPLAIN prints a tree of nodes: `Index [Only] Scan [Backward] using name on t` reads the table through an
 * index, `Seq Scan on t` reads all of it, a `Sort` node sorts what was read.
 */
export const postgresQueryPlans = {
  analyze: async (store: Store, table: string) => {
    await store.execute({ sql: `ANALYZE ${q(table)}`, params: [] });
  },
  explain: async (store: Store, { sql, params }: Statement) => {
    const { rows } = await store.execute({ sql: `EXPLAIN ${sql}`, params });
    const text = rows.map((r) => String(r['QUERY PLAN'])).join('\n');
    const index = /Seq Scan/.test(text) ? null : (/Index (?:Only )?Scan(?: Backward)? using (\S+)/.exec(text)?.[1] ?? null);
    return { index, sorts: /\bSort\b/.test(text), text };
  },
};
