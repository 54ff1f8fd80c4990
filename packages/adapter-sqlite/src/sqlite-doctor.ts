/**
 * What `statusq doctor` asks of a SQLite database (Store.inspection), and the one reader of SQLite's query
 * plans, which the adapter's `./testing` entry hands to the conformance suite as well.
 */
import { splitTableName, type ExplainOptions, type QueryPlan, type ServerFacts, type Statement, type Store, type StoreInspection } from '@statusq/core/adapter';
import { sqliteDialect } from './sqlite-dialect.js';

/** Refreshes the planner's statistics (of every table: SQLite's ANALYZE is cheap), so plans reflect the rows now stored. */
export async function analyzeSqlite(store: Store): Promise<void> {
  await store.execute({ sql: 'ANALYZE', params: [] });
}

/**
 * EXPLAIN QUERY PLAN prints one line a step: `SEARCH t USING [COVERING] INDEX name (status=? AND date<?)`
 * seeks through the index by the columns in brackets, `SCAN t [USING INDEX name]` walks all of it, `USE TEMP
 * B-TREE FOR ORDER BY` sorts what was read. A SEARCH bounds the read by the status column only when that
 * column leads the bracketed constraints (an index on the order column alone SEARCHes by the aging cutoff).
 */
export function readSqlitePlan(details: readonly string[], statusColumn?: string): QueryPlan {
  const text = details.join(' | ');
  const index = /USING (?:COVERING )?INDEX (\S+)/.exec(text)?.[1] ?? null;
  const plan: QueryPlan = { index, sorts: /TEMP B-TREE/.test(text), text };
  if (statusColumn === undefined) return plan;
  const search = /\bSEARCH \S+ USING (?:COVERING )?INDEX \S+ \(([^)]*)\)/.exec(text);
  const leading = search ? /^([^=<> ]+)\s*(?:=|<|>|IS\b)/i.exec(search[1]!)?.[1] : undefined;
  return { ...plan, bounded: leading !== undefined && leading.toLowerCase() === statusColumn.toLowerCase() };
}

/**
 * `asIfLarge` changes nothing: without ANALYZE statistics SQLite's planner already assumes a large table,
 * and a table the doctor looks at is never analyzed by it.
 */
export async function explainOnSqlite(store: Store, { sql, params }: Statement, options: ExplainOptions = {}): Promise<QueryPlan> {
  const { rows } = await store.execute({ sql: `EXPLAIN QUERY PLAN ${sql}`, params });
  return readSqlitePlan(rows.map((r) => String(r.detail)), options.statusColumn);
}

/** Generated columns are hidden 2 (virtual) and 3 (stored) in table_xinfo; an INSERT may not name them. */
export async function sqliteGeneratedColumns(store: Store, table: string): Promise<string[]> {
  const [schema, name] = splitTableName(table);
  const { rows } = await store.execute({ sql: `SELECT name FROM pragma_table_xinfo(?, ?) WHERE hidden IN (2, 3)`, params: [name, schema ?? 'main'] });
  return rows.map((r) => String(r.name));
}

export function sqliteInspection(store: Store): StoreInspection {
  return {
    async serverFacts(): Promise<ServerFacts> {
      const [version, journal, busy] = await Promise.all([
        store.execute({ sql: 'SELECT sqlite_version() AS version', params: [] }),
        store.execute({ sql: 'PRAGMA journal_mode', params: [] }),
        store.execute({ sql: 'PRAGMA busy_timeout', params: [] }),
      ]);
      return {
        version: `SQLite ${String(version.rows[0]!.version)}`,
        // One writer at a time (BEGIN IMMEDIATE takes the write lock), and readers see committed data.
        isolation: 'serializable',
        // SQLite's 'now' is UTC whatever the host's zone.
        timeZone: 'UTC',
        settings: { journal_mode: String(Object.values(journal.rows[0] ?? {})[0]), busy_timeout_ms: String(Object.values(busy.rows[0] ?? {})[0]) },
      };
    },
    async clockMs(): Promise<number> {
      const { rows } = await store.execute({ sql: `SELECT ${sqliteDialect.now} AS ms`, params: [] });
      return Number(rows[0]!.ms);
    },
    explain: (statement, options) => explainOnSqlite(store, statement, options),
    generatedColumns: (table) => sqliteGeneratedColumns(store, table),
  };
}
