import type { DialectDdl } from './dialect-ddl.js';
import { splitTableName } from './dialect-ddl.js';

const CHANNEL = /^[A-Za-z0-9_.]{1,63}$/;

/**
 * The LISTEN/NOTIFY channel of a table: `statusq_<table>`, with a stable hash when that exceeds PostgreSQL's
 * 63-byte identifier limit. The PostgreSQL adapter's `notifyChannel` computes the same name to LISTEN on (its
 * tests check the two agree); the name is validated before it is written into a trigger.
 */
export function postgresNotifyChannel(table: string): string {
  let channel = `statusq_${table}`;
  if (channel.length > 63) {
    let hash = 0;
    for (const ch of table) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
    channel = `${channel.slice(0, 50)}_${hash.toString(36)}`;
  }
  if (!CHANNEL.test(channel)) throw new Error(`invalid notification channel ${JSON.stringify(channel)}`);
  return channel;
}

/** Trigger names; a trigger's name is per table, so every queue table uses the same two. */
const INSERT_TRIGGER = 'statusq_notify_insert';
const UPDATE_TRIGGER = 'statusq_notify_update';

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
  /**
   * Wake-ups for waiting workers: a statement-level trigger NOTIFYs the table's channel after every INSERT,
   * and a row-level one after an UPDATE that puts a row back to pending (retry, release, reaper, requeue).
   * NOTIFY is delivered at commit and deduplicated per transaction, so a batch of inserts sends one message.
   * Installed once: when both triggers exist nothing is changed.
   */
  async notifyTrigger(store, table, statusColumn) {
    const q = (n: string) => store.dialect.quoteIdentifier(n);
    const { rows } = await store.execute({
      sql: 'SELECT tgname AS name FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname IN ($2, $3) AND NOT tgisinternal',
      params: [q(table), INSERT_TRIGGER, UPDATE_TRIGGER],
    });
    if (rows.length === 2) return;
    const channel = postgresNotifyChannel(table);
    const status = q(statusColumn);
    await store.executeBatch([
      // Two migrations at once must not replace the shared function concurrently.
      { sql: `SELECT pg_advisory_xact_lock(hashtext('statusq_notify'))`, params: [] },
      {
        sql: `CREATE OR REPLACE FUNCTION statusq_notify() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN PERFORM pg_notify(TG_ARGV[0], ''); RETURN NULL; END $fn$`,
        params: [],
      },
      { sql: `DROP TRIGGER IF EXISTS ${INSERT_TRIGGER} ON ${q(table)}`, params: [] },
      { sql: `CREATE TRIGGER ${INSERT_TRIGGER} AFTER INSERT ON ${q(table)} FOR EACH STATEMENT EXECUTE PROCEDURE statusq_notify('${channel}')`, params: [] },
      { sql: `DROP TRIGGER IF EXISTS ${UPDATE_TRIGGER} ON ${q(table)}`, params: [] },
      {
        sql: `CREATE TRIGGER ${UPDATE_TRIGGER} AFTER UPDATE OF ${status} ON ${q(table)} FOR EACH ROW WHEN (NEW.${status} IS NULL AND OLD.${status} IS NOT NULL) EXECUTE PROCEDURE statusq_notify('${channel}')`,
        params: [],
      },
    ]);
  },
};
