import type { SchemaSupport, SettleWakeUpSpec, Statement } from '@statusq/core/adapter';
import { knexStatements } from '@statusq/schema';
import { notifyChannel, postgresDialect, settleChannel } from './postgres-dialect.js';

const statements = knexStatements({
  client: 'pg',
  kinds: { time: (t, name) => t.timestamp(name, { useTz: true, precision: 3 }) },
  nowDefault: 'CURRENT_TIMESTAMP(3)',
  // Measured on PostgreSQL: a (status, date) index did not serve `WHERE status IS NULL ORDER BY date DESC`
  // (full scan and sort on every claim); a partial index on date WHERE status IS NULL made the same
  // skip-locked batch claim 2.7x faster (23,600 vs 8,700 jobs/s).
  pendingIndex: 'partial',
  keyIndex: { kind: 'partial' },
});

/** Trigger names; a trigger's name is per table, so every queue table uses the same three. */
export const WAKE_UP_TRIGGERS = { insert: 'statusq_notify_insert', update: 'statusq_notify_update', settle: 'statusq_notify_settle' } as const;
const { insert: INSERT_TRIGGER, update: UPDATE_TRIGGER, settle: SETTLE_TRIGGER } = WAKE_UP_TRIGGERS;
/** The trigger functions every queue table's triggers share: new work, and a row settled (its id as payload). */
const NOTIFY_FUNCTION = 'statusq_notify';
const SETTLE_FUNCTION = 'statusq_notify_settle';
/**
 * A settle's payload names its row by id, as text, up to this many bytes; a longer id sends an empty payload
 * (a waiter then reads every row it awaits), since a payload past PostgreSQL's 8,000 bytes would fail the
 * settle's own UPDATE.
 */
const SETTLE_PAYLOAD_MAX_BYTES = 1000;
/** Taken by whoever creates or drops the shared function, so an install and a drop never interleave. */
const NOTIFY_LOCK = `SELECT pg_advisory_xact_lock(hashtext('${NOTIFY_FUNCTION}'))`;

/** `initTable` / `migrateTable` on PostgreSQL, with the triggers that wake `waitForWork`. */
export const postgresSchema: SchemaSupport = {
  ...statements,
  indexNames: (schema, name) => ({
    sql: 'SELECT indexname AS name FROM pg_indexes WHERE schemaname = COALESCE($1, current_schema()) AND tablename = $2',
    params: [schema, name],
  }),
  /**
   * Wake-ups for waiting workers: a statement-level trigger NOTIFYs the table's channel after every INSERT,
   * and a row-level one after an UPDATE that puts a row back to pending (retry, release, reaper, requeue).
   * NOTIFY is delivered at commit and deduplicated per transaction, so a batch of inserts sends one message.
   *
   * And for Queue.waitFor: a row-level trigger NOTIFYs the table's settle channel (settleChannel, not the
   * workers': a settle must not wake idle workers) with the row's id when its status becomes final (any value
   * but NULL and the processing code), so a waiter reads only its own row again. Its WHEN is judged per row
   * without calling the function, so claims and heartbeats pay nothing; a settle pays its function call and a
   * NOTIFY, whose commit takes the server's one notification-queue lock: a no-op burn-down ran about a fifth slower
   * with it (docs/benchmarks.md), so it is made only when asked (`settles`, the column group `await`). A status
   * compared as text, so an application's text status column takes the trigger too. Installed once: when the
   * triggers asked for exist nothing is changed, and a migrate adds those missing.
   */
  async installWakeUps(store, table, statusColumn, settles) {
    const q = (name: string) => store.dialect.quoteIdentifier(name);
    const { rows } = await store.execute({
      sql: 'SELECT tgname AS name FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname IN ($2, $3, $4) AND NOT tgisinternal',
      params: [q(table), INSERT_TRIGGER, UPDATE_TRIGGER, SETTLE_TRIGGER],
    });
    const present = new Set(rows.map((row) => String(row.name)));
    const wanted = settles === null ? [INSERT_TRIGGER, UPDATE_TRIGGER] : [INSERT_TRIGGER, UPDATE_TRIGGER, SETTLE_TRIGGER];
    if (wanted.every((name) => present.has(name))) return;
    // The channels the store LISTENs on; notifyChannel and settleChannel validate them before they are written into a trigger.
    const channel = notifyChannel(table);
    const settled = settleChannel(table);
    const status = q(statusColumn);
    const workers: Statement[] = [
      {
        sql: `CREATE OR REPLACE FUNCTION ${NOTIFY_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN PERFORM pg_notify(TG_ARGV[0], ''); RETURN NULL; END $fn$`,
        params: [],
      },
      { sql: `DROP TRIGGER IF EXISTS ${INSERT_TRIGGER} ON ${q(table)}`, params: [] },
      { sql: `CREATE TRIGGER ${INSERT_TRIGGER} AFTER INSERT ON ${q(table)} FOR EACH STATEMENT EXECUTE PROCEDURE ${NOTIFY_FUNCTION}('${channel}')`, params: [] },
      { sql: `DROP TRIGGER IF EXISTS ${UPDATE_TRIGGER} ON ${q(table)}`, params: [] },
      {
        sql: `CREATE TRIGGER ${UPDATE_TRIGGER} AFTER UPDATE OF ${status} ON ${q(table)} FOR EACH ROW WHEN (NEW.${status} IS NULL AND OLD.${status} IS NOT NULL) EXECUTE PROCEDURE ${NOTIFY_FUNCTION}('${channel}')`,
        params: [],
      },
    ];
    // Two migrations at once must not replace the shared functions concurrently.
    await store.executeBatch([{ sql: NOTIFY_LOCK, params: [] }, ...workers, ...(settles === null ? [] : settleTrigger(q(table), status, settled, settles))]);
  },
  /**
   * The table (its triggers go with it), then each shared trigger function once no trigger of any table uses
   * it: a function still serving another queue stays. Under the install's lock, so an `init` running at the
   * same time either sees a function gone and creates it, or has its triggers counted here.
   */
  dropTable: async (table) => [
    { sql: `DROP TABLE IF EXISTS ${postgresDialect.quoteIdentifier(table)}`, params: [] },
    {
      sql:
        `DO $drop$ BEGIN PERFORM pg_advisory_xact_lock(hashtext('${NOTIFY_FUNCTION}')); ` +
        [NOTIFY_FUNCTION, SETTLE_FUNCTION]
          .map((fn) => `IF to_regprocedure('${fn}()') IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgfoid = to_regprocedure('${fn}()')::oid) THEN DROP FUNCTION ${fn}(); END IF; `)
          .join('') +
        `END $drop$`,
      params: [],
    },
  ],
};

/** Queue.waitFor's trigger (the column group `await`): each settle of the table NOTIFYs `channel` with the row's id. */
function settleTrigger(table: string, status: string, channel: string, settles: SettleWakeUpSpec): Statement[] {
  const processing = String(settles.processingCode);
  // The id column's name reaches the function as a trigger argument, read from the row as JSON: one function for every table.
  const idArgument = settles.idColumn === null ? '' : settles.idColumn.replaceAll("'", "''");
  return [
    {
      sql:
        `CREATE OR REPLACE FUNCTION ${SETTLE_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $fn$ DECLARE id text; BEGIN ` +
        `IF TG_ARGV[1] <> '' THEN id := to_jsonb(NEW) ->> TG_ARGV[1]; END IF; ` +
        `IF id IS NULL OR octet_length(id) > ${SETTLE_PAYLOAD_MAX_BYTES} THEN id := ''; END IF; ` +
        `PERFORM pg_notify(TG_ARGV[0], id); RETURN NULL; END $fn$`,
      params: [],
    },
    { sql: `DROP TRIGGER IF EXISTS ${SETTLE_TRIGGER} ON ${table}`, params: [] },
    {
      sql:
        `CREATE TRIGGER ${SETTLE_TRIGGER} AFTER UPDATE OF ${status} ON ${table} FOR EACH ROW ` +
        `WHEN (NEW.${status} IS NOT NULL AND NEW.${status}::text <> '${processing}' AND NEW.${status} IS DISTINCT FROM OLD.${status}) ` +
        `EXECUTE PROCEDURE ${SETTLE_FUNCTION}('${channel}', '${idArgument}')`,
      params: [],
    },
  ];
}
