/**
 * What `statusq doctor` asks of a MySQL/MariaDB server (Store.inspection), and the one reader of its query
 * plans, which the adapter's `./testing` entry hands to the conformance suite as well.
 */
import { splitTableName, type ExplainOptions, type QueryPlan, type Row, type ServerFacts, type Statement, type Store, type StoreInspection } from '@statusq/core/adapter';
import { mysqlDialect } from './mysql-dialect.js';
import type { MysqlBinlogPlan } from './mysql-binlog.js';
import type { MysqlServerInfo, MysqlServerSettings } from './mysql-pool.js';
import { mysqlServerChecks } from './mysql-server-checks.js';
import type { MysqlClaimGate } from './mysql-claim-gate.js';
import { estimateRowsOnMysql } from './mysql-row-estimates.js';

const q = (name: string) => mysqlDialect.quoteIdentifier(name);

/** Refreshes the planner's statistics of `table`, so plans reflect the rows now in it. */
export async function analyzeMysqlTable(store: Store, table: string): Promise<void> {
  await store.execute({ sql: `ANALYZE TABLE ${q(table)}`, params: [] });
}

/** Access types that look up a key or a range of it, as opposed to `index` (the whole index) or `ALL`. */
const SEEKS = new Set(['const', 'eq_ref', 'ref', 'ref_or_null', 'range']);

/**
 * EXPLAIN prints a row a table read: `key` is the index it reads through, `type` ALL a read of the whole
 * table and `index` a walk of the whole index, and `Extra` says `Using filesort` (or `Using temporary`) when
 * the rows are sorted after reading. A candidate SELECT reads one table, so a plan of more rows is not
 * served by one index. The read is bounded by the status column when the access type seeks and the key
 * starts with that column (`leading`: the first column of each index, from SHOW INDEX); an index on the
 * order column alone seeks only by the aging cutoff.
 */
export function readMysqlPlan(rows: readonly Row[], statusColumn?: string, leading?: ReadonlyMap<string, string>): QueryPlan {
  const text = rows.map((r) => `${String(r.table)}: type ${String(r.type)}, key ${String(r.key)}, ${String(r.Extra)}`).join(' | ');
  // The statement's own table is the one row of the outer SELECT; a dependent subquery's rows (a claims table's
  // lookups by key, TransitionSql.read) come after it and say nothing of how the table is read.
  const outer = rows.filter((r) => r.select_type === undefined || /^(SIMPLE|PRIMARY)$/i.test(String(r.select_type)));
  const [only] = outer;
  const index = outer.length === 1 && only!.type !== 'ALL' && only!.key ? String(only!.key) : null;
  const plan: QueryPlan = { index, sorts: outer.some((r) => /filesort|temporary/i.test(String(r.Extra))), text };
  if (statusColumn === undefined) return plan;
  const first = index === null ? undefined : leading?.get(index.toLowerCase());
  return { ...plan, bounded: index !== null && SEEKS.has(String(only!.type)) && first !== undefined && first.toLowerCase() === statusColumn.toLowerCase() };
}

/** The first table a SELECT reads, as core quotes it (`name` or `schema`.`name`). */
const FROM_TABLE = /\bFROM\s+(`(?:[^`]|``)+`(?:\.`(?:[^`]|``)+`)?)/;

/**
 * `asIfLarge`: MySQL has no switch that prices table scans out, and on a small table whose rows are mostly
 * pending it rightly reads the whole table and sorts. FORCE INDEX over every index of the table is that
 * switch for one statement ("a table scan is used only if there is no way to use one of the named
 * indexes"), so the plan keeps a scan or a filesort only where no index can avoid it.
 */
export async function explainOnMysql(store: Store, { sql, params }: Statement, options: ExplainOptions = {}): Promise<QueryPlan> {
  let statement = sql;
  const from = options.asIfLarge || options.statusColumn !== undefined ? FROM_TABLE.exec(sql) : null;
  const leading = new Map<string, string>();
  if (from) {
    const { rows } = await store.execute({ sql: `SHOW INDEX FROM ${from[1]}`, params: [] });
    for (const r of rows) if (Number(r.Seq_in_index) === 1) leading.set(String(r.Key_name).toLowerCase(), String(r.Column_name));
    if (options.asIfLarge && leading.size > 0) {
      const at = from.index + from[0].length;
      const indexes = [...new Set(rows.map((r) => String(r.Key_name)))];
      statement = `${sql.slice(0, at)} FORCE INDEX (${indexes.map(q).join(', ')})${sql.slice(at)}`;
    }
  }
  return readMysqlPlan((await store.execute({ sql: `EXPLAIN ${statement}`, params })).rows, options.statusColumn, leading);
}

/** Generated (virtual, stored or persistent) columns: an INSERT may not give them a value. */
export async function mysqlGeneratedColumns(store: Store, table: string): Promise<string[]> {
  const [schema, name] = splitTableName(table);
  // MySQL leaves GENERATION_EXPRESSION empty for an ordinary column, MariaDB leaves it NULL.
  const { rows } = await store.execute({
    sql: `SELECT COLUMN_NAME AS name FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COALESCE(GENERATION_EXPRESSION, '') <> '' ORDER BY ORDINAL_POSITION`,
    params: [schema, name],
  });
  return rows.map((r) => String(r.name));
}

async function isolationOf(store: Store, server: MysqlServerInfo): Promise<string> {
  const { rows } = await store.execute({ sql: `SELECT @@${server.isolationVariable} AS level`, params: [] });
  return String(rows[0]!.level);
}

export function mysqlInspection(store: Store, server: MysqlServerInfo, settings: MysqlServerSettings, binlog: MysqlBinlogPlan, claimGate?: MysqlClaimGate, claimPipeline?: { readonly pipelineRefusal: string | null }): StoreInspection {
  return {
    async serverFacts(): Promise<ServerFacts> {
      const { rows } = await store.execute({
        sql: 'SELECT @@session.time_zone AS zone, @@global.time_zone AS server_zone, @@system_time_zone AS system_zone, @@innodb_lock_wait_timeout AS lock_wait, @@max_connections AS max_connections',
        params: [],
      });
      const row = rows[0]!;
      const serverZone = String(row.server_zone) === 'SYSTEM' ? `SYSTEM (${String(row.system_zone)})` : String(row.server_zone);
      return {
        version: `${server.flavor === 'mariadb' ? 'MariaDB' : 'MySQL'} ${server.version}`,
        isolation: await isolationOf(store, server),
        timeZone: String(row.zone),
        settings: { 'server time_zone': serverZone, innodb_lock_wait_timeout: String(row.lock_wait), max_connections: String(row.max_connections) },
      };
    },
    async clockMs(): Promise<number> {
      // The session zone is UTC, so UNIX_TIMESTAMP reads NOW(3) as the instant it is.
      const { rows } = await store.execute({ sql: 'SELECT UNIX_TIMESTAMP(NOW(3)) * 1000 AS ms', params: [] });
      return Number(rows[0]!.ms);
    },
    explain: (statement, options) => explainOnMysql(store, statement, options),
    estimateRows: (statement) => estimateRowsOnMysql(store, statement),
    generatedColumns: (table) => mysqlGeneratedColumns(store, table),
    serverChecks: () => mysqlServerChecks({ server, settings, binlog, claimGate, claimPipeline, runner: store }),
  };
}
