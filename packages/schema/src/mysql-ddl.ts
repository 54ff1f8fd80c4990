import type { Knex } from 'knex';
import type { DialectDdl } from './dialect-ddl.js';
import { splitTableName } from './dialect-ddl.js';

/**
 * A table statusq creates is InnoDB (row locks, transactions, SKIP LOCKED: MyISAM or MEMORY would make
 * the claim unsafe) and utf8mb4 (payloads are JSON text of any language), whatever the server's or the
 * database's defaults are (MariaDB before 11.6 defaults to latin1). knex sets both only on CREATE TABLE;
 * the builder passes through timeColumn first (the managed table's `date`), so they are set there.
 */
function createOptions(t: Knex.CreateTableBuilder | Knex.AlterTableBuilder): void {
  const builder = t as Knex.CreateTableBuilder & { _method?: string };
  if (builder._method === 'alter') return;
  builder.engine('InnoDB');
  builder.charset('utf8mb4');
}

export const mysqlDdl: DialectDdl = {
  knexClient: 'mysql2',
  timeColumn: (t, name) => {
    createOptions(t);
    // DATETIME(3), not TIMESTAMP: no 2038 limit, no implicit zone conversion (statusq's sessions are UTC).
    return t.datetime(name, { precision: 3 });
  },
  nowDefault: (knex) => knex.raw('CURRENT_TIMESTAMP(3)'),
  // MySQL/MariaDB have no partial indexes; InnoDB serves `status IS NULL ORDER BY date` from (status, date)
  // (checked with EXPLAIN in the adapter's tests, with many finished rows present).
  pendingIndex: 'composite',
  async listIndexes(store, table) {
    const [schema, name] = splitTableName(table);
    const { rows } = await store.execute({
      sql: 'SELECT DISTINCT INDEX_NAME AS name FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?',
      params: [schema ?? null, name],
    });
    return rows.map((r) => String(r.name ?? r.NAME ?? r.INDEX_NAME));
  },
};
