import type { DialectDdl } from './dialect-ddl.js';
import { splitTableName } from './dialect-ddl.js';

const SQLITE_NOW_MS = `(CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER))`;

export const sqliteDdl: DialectDdl = {
  knexClient: 'better-sqlite3',
  // Epoch milliseconds: compared as numbers, no parsing, and julianday('now') carries ms precision.
  timeColumn: (t, name) => t.bigInteger(name),
  nowDefault: (knex) => knex.raw(SQLITE_NOW_MS),
  // Measured: SQLite serves `status IS NULL ORDER BY date DESC LIMIT n` from (status, date) with no sort,
  // and the same index answers "is anything processing?" for --exit-when-empty.
  pendingIndex: 'composite',
  async listIndexes(store, table) {
    const [schema, name] = splitTableName(table);
    const master = schema ? `${store.dialect.quoteIdentifier(schema)}.sqlite_master` : 'sqlite_master';
    const { rows } = await store.execute({ sql: `SELECT name FROM ${master} WHERE type = 'index' AND tbl_name = ?`, params: [name] });
    return rows.map((r) => String(r.name));
  },
};
