import type { Knex } from 'knex';
import { ConfigError, type Store } from '@statusq/core';

/**
 * What schema helpers need to know per dialect, in one table: which knex client generates the DDL, how
 * statusq's own time columns are typed, which index serves the claim, and how to list a table's indexes.
 * knex is used only to generate SQL (it never opens a connection); the statements run on the Store.
 */
export interface DialectDdl {
  knexClient: string;
  /** Adds a statusq time column (claimed_at, next_attempt_at, finished_at, a managed table's date). */
  timeColumn(table: Knex.CreateTableBuilder | Knex.AlterTableBuilder, name: string, knex: Knex): Knex.ColumnBuilder;
  /** SQL default for "now" in that column's representation. */
  nowDefault(knex: Knex): Knex.Raw;
  /**
   * The pending-row index. `partial`: an index on the order column WHERE status IS NULL, which only
   * pending rows enter, so the claim costs the same however many finished rows the table keeps.
   * `composite`: (status, order), used where the planner serves `status IS NULL ORDER BY order` from it.
   */
  pendingIndex: 'partial' | 'composite';
  /** Names of the indexes on a table. */
  listIndexes(store: Store, table: string): Promise<string[]>;
}

const SQLITE_NOW_MS = `(CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER))`;

export const DIALECT_DDL: Record<string, DialectDdl> = {
  sqlite: {
    knexClient: 'better-sqlite3',
    timeColumn: (t, name) => t.bigInteger(name),
    nowDefault: (knex) => knex.raw(SQLITE_NOW_MS),
    // Measured: SQLite serves `status IS NULL ORDER BY date DESC LIMIT n` from (status, date) with no sort,
    // and the same index answers "is anything processing?" for --exit-when-empty.
    pendingIndex: 'composite',
    async listIndexes(store, table) {
      const [schema, name] = table.includes('.') ? table.split('.') : [undefined, table];
      const master = schema ? `${store.dialect.quoteIdentifier(schema)}.sqlite_master` : 'sqlite_master';
      const { rows } = await store.execute({ sql: `SELECT name FROM ${master} WHERE type = 'index' AND tbl_name = ?`, params: [name!] });
      return rows.map((r) => String(r.name));
    },
  },
};

export function ddlFor(store: Store): DialectDdl {
  const ddl = DIALECT_DDL[store.dialect.name];
  if (!ddl) throw new ConfigError(`no schema support for dialect ${store.dialect.name}`);
  return ddl;
}
