import type { SchemaSupport } from '@statusq/core/adapter';
import { knexStatements } from '@statusq/schema';
import { sqliteDialect } from './sqlite-dialect.js';

const statements = knexStatements({
  client: 'better-sqlite3',
  // Epoch milliseconds: compared as numbers, no parsing, and julianday('now') carries ms precision.
  kinds: { time: (t, name) => t.bigInteger(name) },
  // SQLite takes an expression as a column default only in parentheses.
  nowDefault: `(${sqliteDialect.now})`,
  // Measured: SQLite serves `status IS NULL ORDER BY date DESC LIMIT n` from (status, date) with no sort,
  // and the same index answers "is anything processing?" for --exit-when-empty.
  pendingIndex: 'composite',
  // Partial indexes (3.8+): keyless and settled rows never enter the key index.
  keyIndex: { kind: 'partial' },
});

/** `initTable` / `migrateTable` on SQLite. */
export const sqliteSchema: SchemaSupport = {
  ...statements,
  indexNames(schema, name) {
    const master = schema ? `${sqliteDialect.quoteIdentifier(schema)}.sqlite_master` : 'sqlite_master';
    return { sql: `SELECT name FROM ${master} WHERE type = 'index' AND tbl_name = ?`, params: [name] };
  },
};
