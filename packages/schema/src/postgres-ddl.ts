import type { DialectDdl } from './dialect-ddl.js';
import { splitTableName } from './dialect-ddl.js';

export const postgresDdl: DialectDdl = {
  knexClient: 'pg',
  timeColumn: (t, name) => t.timestamp(name, { useTz: true, precision: 3 }),
  nowDefault: (knex) => knex.raw('CURRENT_TIMESTAMP(3)'),
  // Measured on PostgreSQL: a (status, date) index did not serve `WHERE status IS NULL ORDER BY date DESC`
  // (full scan and sort on every claim); a partial index on date WHERE status IS NULL made the same
  // skip-locked batch claim 2.7x faster (23,600 vs 8,700 jobs/s).
  pendingIndex: 'partial',
  async listIndexes(store, table) {
    const [schema, name] = splitTableName(table);
    const { rows } = await store.execute({
      sql: 'SELECT indexname AS name FROM pg_indexes WHERE schemaname = COALESCE($1, current_schema()) AND tablename = $2',
      params: [schema ?? null, name],
    });
    return rows.map((r) => String(r.name));
  },
};
