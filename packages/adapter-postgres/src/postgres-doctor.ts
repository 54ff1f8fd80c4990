/**
 * What `statusq doctor` asks of a PostgreSQL server (Store.inspection), and the one reader of PostgreSQL's
 * query plans, which the adapter's `./testing` entry hands to the conformance suite as well.
 */
import type { ExplainOptions, QueryPlan, ServerFacts, Statement, StatementRunner, Store, StoreInspection } from '@statusq/core/adapter';
import { postgresDialect } from './postgres-dialect.js';

const q = (name: string) => postgresDialect.quoteIdentifier(name);

/** Refreshes the planner's statistics of `table`, so plans reflect the rows now in it. */
export async function analyzePostgresTable(store: Store, table: string): Promise<void> {
  await store.execute({ sql: `ANALYZE ${q(table)}`, params: [] });
}

/**
 * EXPLAIN prints a tree of nodes: `Index [Only] Scan [Backward] using name on t` reads the table through an
 * index, `Seq Scan on t` reads all of it, a `Sort` node sorts what was read.
 */
export function readPostgresPlan(lines: readonly string[]): QueryPlan {
  const text = lines.join('\n');
  const index = /Seq Scan/.test(text) ? null : (/Index (?:Only )?Scan(?: Backward)? using (\S+)/.exec(text)?.[1] ?? null);
  return { index, sorts: /\bSort\b/.test(text), text };
}

/**
 * `asIfLarge`: in one transaction, with sequential scans and sorts priced out (SET LOCAL, gone at its end),
 * so the plan keeps a scan or a sort only where no index can avoid it. JIT off: the inflated costs would
 * otherwise add JIT lines that say nothing about the claim.
 */
export async function explainOnPostgres(store: Store, { sql, params }: Statement, options: ExplainOptions = {}): Promise<QueryPlan> {
  const explain = async (runner: StatementRunner) => readPostgresPlan((await runner.execute({ sql: `EXPLAIN ${sql}`, params })).rows.map((r) => String(r['QUERY PLAN'])));
  if (!options.asIfLarge || !store.transaction) return explain(store);
  return store.transaction(async (tx) => {
    for (const setting of ['enable_seqscan', 'enable_sort', 'jit']) await tx.execute({ sql: `SET LOCAL ${setting} = off`, params: [] });
    return explain(tx);
  });
}

export function postgresInspection(store: Store): StoreInspection {
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
  };
}
