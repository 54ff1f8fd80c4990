import type { Knex } from 'knex';
import { ConfigError, type Store } from '@statusq/core/adapter';
import { mysqlDdl } from './mysql-ddl.js';
import { postgresDdl } from './postgres-ddl.js';
import { sqliteDdl } from './sqlite-ddl.js';

/**
 * What schema helpers need to know per dialect: which knex client generates the DDL, how statusq's own
 * time columns are typed, which index serves the claim, and how to list a table's indexes. knex only
 * generates SQL here (it never opens a connection); the statements run on the Store. Each dialect's
 * answers live in its own file.
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
   * `composite`: (status, order), for planners that serve `status IS NULL ORDER BY order` from it.
   */
  pendingIndex: 'partial' | 'composite';
  /** Names of the indexes on a table (`table` may be `schema.table`). */
  listIndexes(store: Store, table: string): Promise<string[]>;
  /**
   * Optional: makes the table wake waiting workers (PostgreSQL: a trigger that NOTIFYs on INSERT and on an
   * UPDATE back to pending). Idempotent; initTable and migrateTable call it when present.
   */
  notifyTrigger?(store: Store, table: string, statusColumn: string): Promise<void>;
}

export const DIALECT_DDL: Readonly<Record<string, DialectDdl>> = {
  sqlite: sqliteDdl,
  postgres: postgresDdl,
  mysql: mysqlDdl,
};

export function ddlFor(store: Store): DialectDdl {
  const ddl = DIALECT_DDL[store.dialect.name];
  if (!ddl) throw new ConfigError(`no schema support for dialect ${store.dialect.name}`);
  return ddl;
}

/** Splits `schema.table` into its parts; the schema is undefined for a bare name. */
export function splitTableName(table: string): [schema: string | undefined, name: string] {
  const dot = table.indexOf('.');
  return dot < 0 ? [undefined, table] : [table.slice(0, dot), table.slice(dot + 1)];
}
