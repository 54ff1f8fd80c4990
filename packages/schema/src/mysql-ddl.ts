import type { DialectDdl } from './dialect-ddl.js';
import { splitTableName } from './dialect-ddl.js';

export const mysqlDdl: DialectDdl = {
  knexClient: 'mysql2',
  timeColumn: (t, name) => t.datetime(name, { precision: 3 }),
  nowDefault: (knex) => knex.raw('CURRENT_TIMESTAMP(3)'),
  // MySQL/MariaDB have no partial indexes; InnoDB serves `status IS NULL ORDER BY date` from (status, date).
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
