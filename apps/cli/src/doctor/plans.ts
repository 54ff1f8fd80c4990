import { StoreError, type Store } from '@statusq/core';
import { claimPlanStatements, pendingIndexName, priorityIndexName, splitTableName, type QueryPlan, type ResolvedTable, type Statement } from '@statusq/core/tools';
import { oneLine } from '../text.js';
import type { Check } from '../doctor-report.js';

/** How a plan reads the candidates, and whether that serves the claim: the status column bounds the read, with no sort. */
function planVerdict(plan: QueryPlan, status: string): { served: boolean | null; what: string } {
  if (plan.index === null) return { served: false, what: 'reads the whole table' };
  if (plan.sorts) return { served: false, what: `reads index ${plan.index}, then sorts` };
  if (plan.bounded === false) return { served: false, what: `reads index ${plan.index} unbounded by ${status}, filtering on it: every claim reads the finished rows too` };
  if (plan.bounded === undefined) return { served: null, what: `reads index ${plan.index}, no sort (the adapter does not say whether ${status} bounds the read)` };
  return { served: true, what: `reads index ${plan.index}, no sort` };
}

/**
 * The claim's candidate SELECTs as a worker runs them (the configured order, and aged rows first as --aging
 * adds), explained as for a grown table: statusq's pending index must exist or another index serve them,
 * that is, the status column bounds the read and nothing is sorted. Without Store.inspection only the
 * pending index's name is checked.
 */
export async function planChecks(store: Store, table: ResolvedTable, migrate: string): Promise<Check[]> {
  const inspection = store.inspection;
  const indexName = pendingIndexName(table.table);
  let ddl: string | null = null;
  let indexes: string[] | null = null;
  try {
    if (store.schema) {
      ddl = (await store.schema.createPendingIndex(table.table, { name: indexName, statusColumn: table.status, orderColumn: table.order })).map((s) => s.sql).join('; ');
      const { rows } = await store.execute(store.schema.indexNames(...splitTableName(table.table)));
      indexes = rows.map((r) => String(r.name));
    }
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    return [{ name: 'pending index', status: 'fail', detail: `the indexes of ${table.table} could not be listed: ${oneLine(error)}` }];
  }
  // On a table with a priority column the claim is served by the priority index, built for one order.
  const priorityDdl =
    table.features.priority && store.schema?.createPriorityIndex
      ? (await store.schema.createPriorityIndex(table.table, { name: priorityIndexName(table.table), statusColumn: table.status, orderColumn: table.order, priorityColumn: table.columns.priority!, direction: table.direction })).map((s) => s.sql).join('; ')
      : null;
  const fix = priorityDdl
    ? `${migrate} --with priority --order ${table.direction} (or: ${priorityDdl})`
    : `${migrate}${ddl ? ` (or: ${ddl})` : ''}`;
  const own = indexes?.find((name) => name.toLowerCase() === indexName.toLowerCase());
  if (!inspection) {
    if (own) return [{ name: 'pending index', status: 'pass', detail: own }];
    if (indexes === null) return [];
    return [{ name: 'pending index', status: 'warn', detail: `no ${indexName}; whether another index serves the claim is unchecked (no Store.inspection to read plans)`, fix }];
  }

  const plan = claimPlanStatements(store, table);
  const statements: Array<[string, Statement]> = [['claim plan', plan.ordered]];
  if (plan.aged) statements.push(['claim plan (--aging)', plan.aged]);

  const checks: Check[] = [];
  const verdicts: Array<{ plan: QueryPlan; served: boolean | null } | null> = [];
  for (const [name, statement] of statements) {
    let plan: QueryPlan;
    try {
      plan = await inspection.explain(statement, { asIfLarge: true, statusColumn: table.status });
    } catch (error) {
      // A store may check a locking SELECT's UPDATE privilege even to EXPLAIN it; the privileges check says which.
      verdicts.push(null);
      checks.push({ name, status: 'fail', detail: `EXPLAIN refused: ${oneLine(error)}` });
      continue;
    }
    const { served, what } = planVerdict(plan, table.status);
    verdicts.push({ plan, served });
    // A table served for its configured order but not for aging still works; aging is off unless asked for.
    const status = served === true ? 'pass' : served === null || name !== 'claim plan' ? 'warn' : 'fail';
    // With the pending index in place, migrate has nothing to add: the planner preferred another index on this
    // table's statistics (a small table's, or stale ones), so the fix is the statistics, or the other index.
    const planFix = own && plan.index !== null && plan.index.toLowerCase() !== own.toLowerCase()
      ? `${own} exists, but the planner chose ${plan.index}: refresh the table's statistics (ANALYZE) once it holds its real rows, or drop ${plan.index} if nothing else reads by it`
      : fix;
    checks.push({ name, status, detail: `${what}: ${plan.text.replace(/\s+/g, ' ')}`, ...(served === true ? {} : { fix: planFix }) });
  }

  const [first] = verdicts;
  const index: Check = own
    ? { name: 'pending index', status: 'pass', detail: own }
    : !first
      ? { name: 'pending index', status: 'fail', detail: `no ${indexName}, and the claim's plan could not be read`, fix }
      : first.served === true
        ? { name: 'pending index', status: 'pass', detail: `no ${indexName}, but ${first.plan.index} serves the claim` }
        : first.served === null
          ? { name: 'pending index', status: 'warn', detail: `no ${indexName}; ${first.plan.index} may serve the claim (the adapter does not say whether ${table.status} bounds the read)`, fix }
          : { name: 'pending index', status: 'fail', detail: `no ${indexName} and no other index serves the claim: every claim reads every row, finished ones included`, fix };
  return [index, ...checks];
}
