/**
 * What `statusq doctor` asks of a SQLite database (Store.inspection), and the one reader of SQLite's query
 * plans, which the adapter's `./testing` entry hands to the conformance suite as well.
 */
import type { QueryPlan, ServerFacts, Statement, Store, StoreInspection } from '@statusq/core/adapter';
import { sqliteDialect } from './sqlite-dialect.js';

/** Refreshes the planner's statistics (of every table: SQLite's ANALYZE is cheap), so plans reflect the rows now stored. */
export async function analyzeSqlite(store: Store): Promise<void> {
  await store.execute({ sql: 'ANALYZE', params: [] });
}

/**
 * EXPLAIN QUERY PLAN prints one line a step: `SEARCH t USING [COVERING] INDEX name (...)` or
 * `SCAN t [USING INDEX name]` reads the table, `USE TEMP B-TREE FOR ORDER BY` sorts what was read.
 * `asIfLarge` changes nothing: without ANALYZE statistics SQLite's planner already assumes a large table,
 * and a table the doctor looks at is never analyzed by it.
 */
export async function explainOnSqlite(store: Store, { sql, params }: Statement): Promise<QueryPlan> {
  const { rows } = await store.execute({ sql: `EXPLAIN QUERY PLAN ${sql}`, params });
  const text = rows.map((r) => String(r.detail)).join(' | ');
  return { index: /USING (?:COVERING )?INDEX (\S+)/.exec(text)?.[1] ?? null, sorts: /TEMP B-TREE/.test(text), text };
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
    explain: (statement) => explainOnSqlite(store, statement),
  };
}
