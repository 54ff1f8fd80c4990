/**
 * What `statusq doctor` asks of a PostgreSQL server (Store.inspection), and the one reader of PostgreSQL's
 * query plans, which the adapter's `./testing` entry hands to the conformance suite as well.
 */
import type { ExplainOptions, QueryPlan, ServerCheck, ServerFacts, Statement, StatementRunner, Store, StoreInspection } from '@statusq/core/adapter';
import { postgresDialect } from './postgres-dialect.js';
import { WAKE_UP_TRIGGERS } from './postgres-schema.js';
import { estimateRowsOnPostgres } from './postgres-row-estimates.js';

const q = (name: string) => postgresDialect.quoteIdentifier(name);

/** Refreshes the planner's statistics of `table`, so plans reflect the rows now in it. */
export async function analyzePostgresTable(store: Store, table: string): Promise<void> {
  await store.execute({ sql: `ANALYZE ${q(table)}`, params: [] });
}

/** A pattern of `column` as PostgreSQL prints it in a plan: bare when lower-case, else quoted. */
function printed(column: string): string {
  const name = /^[a-z_][a-z0-9_]*$/.test(column) ? column : q(column);
  return `(?:^|[^"\\w])${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?:[^"\\w]|$)`;
}

/**
 * EXPLAIN prints a tree of nodes: `Index [Only] Scan [Backward] using name on t` reads the table through an
 * index, `Seq Scan on t` reads all of it, a `Sort` node sorts what was read. The read is bounded by the
 * status column when an `Index Cond` names it, or when the index is partial on `status IS NULL`
 * (`predicate`: the index's predicate as pg_get_expr prints it); an index on the order column alone is
 * walked whole with the status in a `Filter`.
 */
export function readPostgresPlan(lines: readonly string[], statusColumn?: string, predicate?: string | null): QueryPlan {
  const text = lines.join('\n');
  const index = /Seq Scan/.test(text) ? null : (/Index (?:Only )?Scan(?: Backward)? using (\S+)/.exec(text)?.[1] ?? null);
  const plan: QueryPlan = { index, sorts: /\bSort\b/.test(text), text };
  if (statusColumn === undefined) return plan;
  const column = new RegExp(printed(statusColumn));
  const conditions = lines.filter((line) => /^\s*Index Cond:/.test(line));
  // A partial index on `status IS NULL` (possibly with more conjuncts) holds the pending rows only.
  const pending = predicate != null && new RegExp(`${printed(statusColumn)}IS NULL\\b`).test(predicate.replace(/[()]/g, ' '));
  return { ...plan, bounded: index !== null && (conditions.some((line) => column.test(line)) || pending) };
}

/**
 * The predicate of a partial index (as pg_get_expr prints it), null for a whole-table index. The plan names
 * the index without its schema (quoted where it must be), so it is looked up by name; of two same-named
 * indexes in different schemas, the one without a predicate wins, which can only under-report.
 */
async function indexPredicate(runner: StatementRunner, index: string): Promise<string | null> {
  const name = index.startsWith('"') ? index.slice(1, -1).replaceAll('""', '"') : index;
  const { rows } = await runner.execute({
    sql: 'SELECT pg_get_expr(i.indpred, i.indrelid) AS predicate FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1',
    params: [name],
  });
  const predicates = rows.map((r) => r.predicate);
  return predicates.length > 0 && predicates.every((p) => typeof p === 'string') ? String(predicates[0]) : null;
}

/**
 * `asIfLarge`: in one transaction, with sequential scans and sorts priced out (SET LOCAL, gone at its end),
 * so the plan keeps a scan or a sort only where no index can avoid it. JIT off: the inflated costs would
 * otherwise add JIT lines that say nothing about the claim.
 */
export async function explainOnPostgres(store: Store, { sql, params }: Statement, options: ExplainOptions = {}): Promise<QueryPlan> {
  const explain = async (runner: StatementRunner) => {
    const lines = (await runner.execute({ sql: `EXPLAIN ${sql}`, params })).rows.map((r) => String(r['QUERY PLAN']));
    if (options.statusColumn === undefined) return readPostgresPlan(lines);
    const index = readPostgresPlan(lines).index;
    return readPostgresPlan(lines, options.statusColumn, index === null ? null : await indexPredicate(runner, index));
  };
  if (!options.asIfLarge || !store.transaction) return explain(store);
  return store.transaction(async (tx) => {
    for (const setting of ['enable_seqscan', 'enable_sort', 'jit']) await tx.execute({ sql: `SET LOCAL ${setting} = off`, params: [] });
    return explain(tx);
  });
}

/** Generated columns and identities GENERATED ALWAYS: an INSERT may not give them a value. */
export async function postgresGeneratedColumns(store: Store, table: string): Promise<string[]> {
  const { rows } = await store.execute({
    sql: `SELECT attname AS name FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped AND (attgenerated <> '' OR attidentity = 'a') ORDER BY attnum`,
    params: [q(table)],
  });
  return rows.map((r) => String(r.name));
}

/** `notificationCheck`: the store's wake-up probe (PostgresStore.notificationCheck), listed after the server's own checks. */
export function postgresInspection(store: Store, notificationCheck: () => Promise<ServerCheck | null> = async () => null): StoreInspection {
  return {
    async serverFacts(): Promise<ServerFacts> {
      const { rows } = await store.execute({
        sql: `SELECT current_setting('server_version') AS version, current_setting('transaction_isolation') AS isolation, current_setting('TimeZone') AS zone,
                current_setting('max_connections') AS max_connections, current_setting('lock_timeout') AS lock_timeout, current_setting('statement_timeout') AS statement_timeout`,
        params: [],
      });
      const row = rows[0]!;
      return {
        version: `PostgreSQL ${String(row.version)}`,
        isolation: String(row.isolation),
        timeZone: String(row.zone),
        settings: { max_connections: String(row.max_connections), lock_timeout: String(row.lock_timeout), statement_timeout: String(row.statement_timeout) },
      };
    },
    async clockMs(): Promise<number> {
      // clock_timestamp(), not now(): the time of the read, not of the transaction's start.
      const { rows } = await store.execute({ sql: 'SELECT CAST(extract(epoch FROM clock_timestamp()) * 1000 AS double precision) AS ms', params: [] });
      return Number(rows[0]!.ms);
    },
    explain: (statement, options) => explainOnPostgres(store, statement, options),
    estimateRows: (statement) => estimateRowsOnPostgres(store, statement),
    generatedColumns: (table) => postgresGeneratedColumns(store, table),
    wakeUpCheck: (table) => postgresWakeUpCheck(store, table),
    async serverChecks(): Promise<ServerCheck[]> {
      const checks = await postgresServerChecks(store);
      // A standby refuses LISTEN and NOTIFY alike: its own check says all there is to say.
      if (checks.some((check) => check.status === 'fail')) return checks;
      const notify = await notificationCheck();
      return notify === null ? checks : [...checks, notify];
    },
  };
}

/**
 * The server's own state that stops statusq: a hot standby (pg_is_in_recovery) refuses every write and
 * every SELECT ... FOR UPDATE with 25006, and so does a primary with default_transaction_read_only on (how a
 * switchover fences the old primary). A worker waits --read-only-wait for writes, then exits 1.
 */
export async function postgresServerChecks(store: Store): Promise<ServerCheck[]> {
  const { rows } = await store.execute({ sql: `SELECT pg_is_in_recovery() AS standby, current_setting('default_transaction_read_only') AS read_only`, params: [] });
  const row = rows[0]!;
  const standby: ServerCheck =
    row.standby === true
      ? {
          name: 'standby',
          status: 'fail',
          detail: 'the server is a hot standby (pg_is_in_recovery() is true): it refuses writes (25006), so statusq cannot claim here',
          fix: 'point the URL at the primary (the read-write endpoint of the cluster or its pooler), not at a standby',
        }
      : { name: 'standby', status: 'pass', detail: 'the server is a primary (not in recovery)' };
  const readOnly: ServerCheck =
    String(row.read_only) === 'on'
      ? {
          name: 'read_only',
          status: 'fail',
          detail: 'default_transaction_read_only is on for this session: every transaction is read-only (25006), so statusq cannot claim here',
          fix: 'ALTER SYSTEM RESET default_transaction_read_only (or ALTER ROLE/DATABASE ... RESET it) and SELECT pg_reload_conf(), or point the URL at the writable primary',
        }
      : { name: 'read_only', status: 'pass', detail: 'default_transaction_read_only is off: transactions may write' };
  return row.standby === true ? [standby] : [standby, readOnly];
}

/**
 * The table's wake-up triggers (postgres-schema.ts): the settle trigger came later than the other two, so a
 * table migrated before it lacks it, and `queue.waitFor` (`enqueue --wait`) sees its settles only by polling.
 */
async function postgresWakeUpCheck(store: Store, table: string): Promise<ServerCheck> {
  const { rows } = await store.execute({ sql: 'SELECT tgname AS name FROM pg_trigger WHERE tgrelid = to_regclass($1) AND NOT tgisinternal', params: [q(table)] });
  const present = new Set(rows.map((row) => String(row.name)));
  const missing: string[] = [];
  if (!present.has(WAKE_UP_TRIGGERS.insert) || !present.has(WAKE_UP_TRIGGERS.update)) missing.push('idle workers are not woken by new rows and poll');
  // The settle trigger is asked for (migrate --with await): its absence is a choice, said but not warned about.
  const settles = present.has(WAKE_UP_TRIGGERS.settle)
    ? 'and waitFor on settles'
    : 'not waitFor on settles, which reads on its backoff (up to about 1 s late; migrate --with await adds a trigger each settle pays for)';
  if (missing.length === 0) return { name: 'wake-ups', status: 'pass', detail: `NOTIFY triggers wake idle workers on new rows, ${settles}` };
  return { name: 'wake-ups', status: 'warn', detail: `${table} lacks statusq's NOTIFY triggers (made by an older version, or dropped): ${missing.join('; ')}` };
}
