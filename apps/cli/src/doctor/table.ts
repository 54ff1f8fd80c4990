import { SchemaError, StoreError, type StatusCounts, type Store, type TableConfig } from '@statusq/core';
import { countOrphanedClaims, OPTIONAL_COLUMNS, besideTableName, hasIndex, keyIndexName, type OptionalColumn, configuredColumns, DEFAULT_OPTIONAL_COLUMN_NAMES, derivedName, resolveTable, splitTableName, type ColumnInfo, type ResolvedTable } from '@statusq/core/tools';
import { oneLine } from '../text.js';
import type { Check } from '../doctor-report.js';
import type { CommandLine } from './command-line.js';
import { kindChecks } from './kinds.js';
import { planChecks } from './plans.js';
import { privilegesCheck } from './privileges.js';

/** What each optional column switches on, for the report. */
const OPTIONAL_COLUMN_ROLES: Readonly<Record<OptionalColumn, string>> = {
  claimedAt: 'leases: a crashed worker\'s rows return to the queue',
  workerId: 'fencing: a worker whose lease was taken over changes nothing',
  attemptCount: 'retries',
  nextAttemptAt: 'backoff between retries, and delayed jobs',
  lastError: 'the last failure reason on the row',
  payload: 'a JSON payload per job',
  result: "the handler's return value",
  finishedAt: 'the end time',
  priority: 'priorities: higher first, then the queue order',
  dedupeKey: 'deduplication keys: one live row per key',
  progress: "a running handler's last ctx.progress",
  dispatchedAt: 'dispatch to a broker: statusq relay publishes due rows, work --from consumes them',
  kind: 'kinds: each row names its handler, and a worker with handlers by kind claims only those',
  group: 'groups: fleet-wide limits per group (work --group-concurrency, --group-rate)',
  traceContext: "tracing: a job's run span continues the trace of the request that enqueued it",
};

/**
 * The checks of the user's table. A database error on the way is that check's failure, not an escape. Returns
 * the rows by kind on a table with a kind column (for the report), else null.
 */
export async function checkTable(store: Store, config: TableConfig, statusq: CommandLine, checks: Check[], stalledAfterMs: number): Promise<Record<string, StatusCounts> | null> {
  const q = (name: string) => store.dialect.quoteIdentifier(name);
  const named = configuredColumns(config);
  const migrate = statusq('migrate', '--table', config.table, ...(config.statusColumn ? ['--status-column', config.statusColumn] : []), ...(config.orderColumn ? ['--order-column', config.orderColumn] : []));
  let columns: ColumnInfo[] | null;
  try {
    columns = await store.describeTable(config.table);
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    checks.push({ name: 'table', status: 'fail', detail: `${config.table} could not be described: ${oneLine(error)}` });
    return null;
  }
  if (columns === null) throw new SchemaError(`doctor: table ${JSON.stringify(config.table)} does not exist (statusq init creates a managed table; statusq migrate prepares an existing one)`);
  const byName = new Map(columns.map((c) => [c.name.toLowerCase(), c]));
  const besideName = besideTableName(config.table);
  const besideColumns = await store.describeTable(besideName);
  let table: ResolvedTable | null = null;
  try {
    table = resolveTable(config, columns, (column) => store.orderTimeEncoding(column), besideColumns === null ? null : { table: besideName, columns: besideColumns });
    const type = (name: string) => byName.get(name.toLowerCase())?.type ?? '?';
    checks.push({
      name: 'table',
      status: 'pass',
      detail: `${config.table}: id ${table.id} (${type(table.id)}, unique), status ${table.status} (${type(table.status)}), order ${table.order} (${type(table.order)}, ${table.direction} first)`,
    });
  } catch (error) {
    if (!(error instanceof SchemaError)) throw error;
    checks.push({ name: 'table', status: 'fail', detail: oneLine(error), ...tableFix(config, byName, named, q, migrate) });
  }
  if (table) {
    checks.push(optionalColumnsCheck(table, migrate));
    if (table.beside !== null) checks.push(await claimsTableCheck(store, table, statusq));
    checks.push(...(await planChecks(store, table, migrate)));
    const keyCheck = await keyIndexCheck(store, table, migrate);
    if (keyCheck) checks.push(keyCheck);
    const wakeUps = await store.inspection?.wakeUpCheck?.(table.table);
    if (wakeUps) checks.push({ ...wakeUps, ...(wakeUps.status !== 'pass' && { fix: migrate }) });
  }
  const kinds = table?.features.kinds ? await kindChecks(store, config, stalledAfterMs, statusq) : null;
  if (kinds) checks.push(...kinds.checks);
  checks.push(await privilegesCheck(store, config, columns, table));
  return kinds?.counts ?? null;
}

/** The fix for a table resolveTable refused, where one statement or command is it. */
function tableFix(config: TableConfig, byName: ReadonlyMap<string, ColumnInfo>, named: { id: string; status: string }, q: (name: string) => string, migrate: string): { fix?: string } {
  const id = byName.get(named.id.toLowerCase());
  if (!byName.has(named.status.toLowerCase())) return { fix: `${migrate} (adds the status column; every existing row is then pending)` };
  if (id && !id.unique) {
    const [, name] = splitTableName(config.table);
    return { fix: `make ${id.name} the primary key, or CREATE UNIQUE INDEX ${q(derivedName(`${name}_${id.name}_unique`, config.table))} ON ${q(config.table)} (${q(id.name)})` };
  }
  return {};
}

function optionalColumnsCheck(table: ResolvedTable, migrate: string): Check {
  const present = OPTIONAL_COLUMNS.filter((key) => table.columns[key] !== undefined);
  const absent = OPTIONAL_COLUMNS.filter((key) => table.columns[key] === undefined);
  const on = present.map((key) => `${table.columns[key]} (${OPTIONAL_COLUMN_ROLES[key]})`);
  const detail = `${on.length > 0 ? `on: ${on.join(', ')}` : 'none: the seed\'s status-only queue'}${absent.length > 0 ? `; absent: ${absent.map((key) => DEFAULT_OPTIONAL_COLUMN_NAMES[key]).join(', ')}` : ''}`;
  // Without a lease, the rows of a worker that dies stay processing until someone requeues them by hand.
  if (!table.features.leases) {
    return { name: 'optional columns', status: 'warn', detail: `${detail}; without claimed_at a crashed worker's rows stay processing until requeue --force`, fix: `${migrate} --with leases,retries` };
  }
  return { name: 'optional columns', status: 'pass', detail };
}

/**
 * The claims table of a table whose claim state is beside it: its rows whose row the application deleted are
 * never claimed, only kept; prune removes them.
 */
async function claimsTableCheck(store: Store, table: ResolvedTable, statusq: CommandLine): Promise<Check> {
  const orphans = await countOrphanedClaims(store, table);
  const detail = `${table.beside} holds the claim state of ${table.table}, keyed by ${table.id}`;
  if (orphans === 0) return { name: 'claims table', status: 'pass', detail };
  return {
    name: 'claims table',
    status: 'warn',
    detail: `${detail}; ${orphans} of its rows belong to rows ${table.table} no longer has (deleted by the application): never claimed, only kept`,
    fix: `${statusq('prune', '--table', table.table, '--status', 'done', '--older-than', '30d')} (removes them after its batches)`,
  };
}

/**
 * A table with a dedupe_key column needs its key index, or keyed enqueues are refused (Queue.assertKeyIndex):
 * said here before the first one fails. Null on a table without the column, or a store that cannot list indexes.
 */
async function keyIndexCheck(store: Store, table: ResolvedTable, migrate: string): Promise<Check | null> {
  if (!table.features.dedupe || !store.schema) return null;
  const name = keyIndexName(table.table);
  try {
    if (await hasIndex(store, store.schema, table.table, name)) return { name: 'key index', status: 'pass', detail: `${name}: one pending or processing row per ${table.columns.dedupeKey}` };
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    return { name: 'key index', status: 'fail', detail: `the indexes of ${table.table} could not be listed: ${oneLine(error)}` };
  }
  return { name: 'key index', status: 'fail', detail: `${table.columns.dedupeKey} has no key index ${name}: enqueues with a key are refused, since without it two enqueuers could both insert`, fix: `${migrate} --with dedupe` };
}
