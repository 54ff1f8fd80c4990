/**
 * Building the two kinds of queue table the suite runs on: the seed's application table `table_a` (in the
 * adapter's fixture DDL, optionally migrated) and a statusq-managed table (initTable).
 */
import { Queue, initTable, migrateTable, type Store } from '@statusq/core';
import type { ColumnGroup, SqlValue } from '@statusq/core/adapter';
import { formatUtcTime, type TableARow } from '@statusq/test-fixtures';
import type { CheckedTable, FixtureTables, QueryPlans } from './fixtures.js';
import { placeholders } from './rows.js';

const INSERT_CHUNK = 500;

/**
 * Where the tables this module makes keep their claim state (ConformanceOptions.claimState): their own columns,
 * or a claims table beside them. Set by runConformance for each test of the suite; one file, one setting.
 */
let claimState: 'in-table' | 'beside' = 'in-table';

export function setClaimState(state: 'in-table' | 'beside'): void {
  claimState = state;
}

export function claimStateBeside(): boolean {
  return claimState === 'beside';
}

/** The column groups whose columns a claims table holds (migrate --beside keeps them there). */
const CLAIM_STATE_GROUPS: readonly ColumnGroup[] = ['leases', 'retries', 'delays', 'results'];

/**
 * Creates `table_a` with the adapter's fixture DDL (without its own pending index when `ownIndex` is false),
 * inserts `rows`, and migrates when asked.
 */
export async function createTableA(
  fixtures: FixtureTables,
  store: Store,
  rows: readonly TableARow[],
  options: { table?: string; migrate?: readonly ColumnGroup[]; ownIndex?: boolean; beside?: boolean } = {},
): Promise<void> {
  const table = options.table ?? 'table_a';
  for (const sql of fixtures.tableA(table, { ownIndex: options.ownIndex ?? true })) await store.execute({ sql, params: [] });
  await insertTableA(store, rows, table);
  const beside = options.beside ?? (claimStateBeside() && (options.migrate ?? []).some((group) => CLAIM_STATE_GROUPS.includes(group)));
  if (options.migrate || beside) await migrateTable(store, { table, with: options.migrate ?? [], ...(beside && { beside: true }) });
}

/**
 * Creates one of the fixture tables the start-up checks judge (see CheckedTable) and inserts pending rows
 * `[id, k]` (k only where the table has it). False when the database cannot express that table.
 */
export async function createCheckedTable(
  fixtures: FixtureTables,
  store: Store,
  kind: CheckedTable,
  table: string,
  rows: ReadonlyArray<readonly [number, number?]> = [],
): Promise<boolean> {
  const ddl = fixtures.checked[kind];
  if (!ddl) return false;
  for (const sql of ddl(table)) await store.execute({ sql, params: [] });
  const q = (n: string) => store.dialect.quoteIdentifier(n);
  const withK = ['sharedId', 'uniqueId', 'partialUniqueId'].includes(kind);
  const columns = withK ? ['id', 'k', 'date'] : ['id', 'date'];
  const sql = `INSERT INTO ${q(table)} (${columns.map(q).join(', ')}) VALUES (${placeholders(store, columns.length).join(', ')})`;
  if (rows.length > 0) {
    await store.executeBatch(rows.map(([id, k]) => ({ sql, params: [id, ...(withK ? [k ?? 1] : []), '2024-01-01 00:00:00.000'] as SqlValue[] })));
  }
  return true;
}

/** Inserts table_a rows with the store's placeholders, in transactions of 500. */
export async function insertTableA(store: Store, rows: readonly TableARow[], table = 'table_a'): Promise<void> {
  const q = (n: string) => store.dialect.quoteIdentifier(n);
  const sql = `INSERT INTO ${q(table)} (${['id', 'date', 'url', 'kind'].map(q).join(', ')}) VALUES (${placeholders(store, 4).join(', ')})`;
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    const chunk = rows.slice(i, i + INSERT_CHUNK).map((r) => ({ sql, params: [r.id, r.date, r.url, r.kind] as SqlValue[] }));
    await store.executeBatch(chunk);
  }
}

/** A statusq-managed table with every optional column and the pending index. */
export async function createJobs(store: Store, table = 'jobs'): Promise<Queue> {
  await initTable(store, table, claimStateBeside() ? { beside: true } : {});
  return Queue.open(store, { table });
}

/**
 * `jobs` as a queue looks after a long life: 5,000 rows, all done but the first 20 still pending, and the
 * statistics refreshed, so a plan shows what a claim, a count or a listing costs on a mostly finished table.
 */
export async function createMostlyFinishedJobs(store: Store, queryPlans: QueryPlans): Promise<Queue> {
  const jobs = await createJobs(store);
  await jobs.enqueue(Array.from({ length: 5000 }, (_, n) => ({ n })));
  const q = (name: string) => store.dialect.quoteIdentifier(name);
  await store.execute({ sql: `UPDATE ${q(jobs.table.table)} SET ${q(jobs.table.status)} = ${jobs.table.codes.done} WHERE ${q(jobs.table.id)} > ${store.dialect.placeholder(1)}`, params: [20] });
  await queryPlans.analyze(store, jobs.table.table);
  return jobs;
}

/** Enqueues payloads on a managed table and returns their ids in enqueue order. */
export async function enqueueJobs(queue: Queue, payloads: readonly unknown[]): Promise<string[]> {
  const ids = await queue.enqueue(payloads);
  if (ids.length !== payloads.length || ids.includes(null)) throw new Error(`enqueue returned ${JSON.stringify(ids.map(String))} for ${payloads.length} payloads`);
  return ids.map(String);
}

/** The order column value for `date` in the representation the table uses (epoch ms, text, or native). */
export function timeValue(queue: Queue, date: Date): SqlValue {
  switch (queue.table.orderTime) {
    case 'epochMs':
      return date.getTime();
    case 'text':
      return formatUtcTime(date);
    case 'native':
      return date.toISOString();
  }
}

/** Inserts rows with explicit id, date and payload into a managed table. */
export async function insertJobsAt(queue: Queue, rows: ReadonlyArray<{ id: number; date: Date; payload: unknown }>): Promise<void> {
  const store = queue.store;
  const q = (n: string) => store.dialect.quoteIdentifier(n);
  const sql = `INSERT INTO ${q(queue.table.table)} (${q('id')}, ${q(queue.table.order)}, ${q('payload')}) VALUES (${placeholders(store, 3).join(', ')})`;
  await store.executeBatch(rows.map((r) => ({ sql, params: [r.id, timeValue(queue, r.date), JSON.stringify(r.payload)] })));
}

/** Sets a row's lifecycle columns directly (test setup only; statusq itself never writes them like this). */
export async function forceRowState(
  queue: Queue,
  id: unknown,
  state: { status: number | null; workerId?: string | null; claimedAgoMs?: number | null; attemptCount?: number },
): Promise<void> {
  const store = queue.store;
  const q = (n: string) => store.dialect.quoteIdentifier(n);
  const sets: string[] = [];
  const params: SqlValue[] = [];
  const add = (v: SqlValue) => {
    params.push(v);
    return store.dialect.placeholder(params.length);
  };
  sets.push(`${q(queue.table.status)} = ${add(state.status)}`);
  const cols = queue.table.columns;
  if (queue.table.beside !== null) return forceRowStateBeside(queue, id, state);
  if (cols.workerId && state.workerId !== undefined) sets.push(`${q(cols.workerId)} = ${add(state.workerId)}`);
  if (cols.claimedAt && state.claimedAgoMs !== undefined) {
    sets.push(state.claimedAgoMs === null ? `${q(cols.claimedAt)} = NULL` : `${q(cols.claimedAt)} = ${store.dialect.nowPlusMs(add(-state.claimedAgoMs))}`);
  }
  if (cols.attemptCount && state.attemptCount !== undefined) sets.push(`${q(cols.attemptCount)} = ${add(state.attemptCount)}`);
  const where = `${q(queue.table.id)} = ${add(id as SqlValue)}`;
  const { affected } = await store.execute({ sql: `UPDATE ${q(queue.table.table)} SET ${sets.join(', ')} WHERE ${where}`, params });
  if (affected !== 1) throw new Error(`forceRowState: row ${String(id)} not found`);
}

/**
 * Writes `token` as the claim token of rows `ids` behind statusq's back (a takeover, a dead worker's claims), where
 * the table keeps it: its worker_id column, or its claims table's. `onlyProcessing`: rows in processing only.
 */
export async function retoken(queue: Queue, ids: readonly unknown[], token: string, onlyProcessing = false): Promise<number> {
  const store = queue.store;
  const d = store.dialect;
  const q = (n: string) => d.quoteIdentifier(n);
  const t = queue.table;
  const list = ids.map((_, i) => d.placeholder(i + 2)).join(', ');
  const processing = `${q(t.table)}.${q(t.status)} = ${t.codes.processing}`;
  const sql =
    t.beside === null
      ? `UPDATE ${q(t.table)} SET ${q(t.columns.workerId!)} = ${d.placeholder(1)} WHERE ${q(t.id)} IN (${list})${onlyProcessing ? ` AND ${processing}` : ''}`
      : `UPDATE ${q(t.beside)} SET ${q(t.columns.workerId!)} = ${d.placeholder(1)} WHERE ${q(t.id)} IN (${list})` +
        (onlyProcessing ? ` AND EXISTS (SELECT 1 FROM ${q(t.table)} WHERE ${q(t.table)}.${q(t.id)} = ${q(t.beside)}.${q(t.id)} AND ${processing})` : '');
  return (await store.execute({ sql, params: [token, ...(ids as SqlValue[])] })).affected;
}

/** forceRowState on a table whose claim state is in a claims table: the status in the table, the rest beside it. */
async function forceRowStateBeside(queue: Queue, id: unknown, state: Parameters<typeof forceRowState>[2]): Promise<void> {
  const store = queue.store;
  const d = store.dialect;
  const q = (n: string) => d.quoteIdentifier(n);
  const t = queue.table;
  const { affected } = await store.execute({ sql: `UPDATE ${q(t.table)} SET ${q(t.status)} = ${d.placeholder(1)} WHERE ${q(t.id)} = ${d.placeholder(2)}`, params: [state.status, id as SqlValue] });
  if (affected !== 1) throw new Error(`forceRowState: row ${String(id)} not found`);
  const side = q(t.beside!);
  const { rows } = await store.execute({ sql: `SELECT 1 AS one FROM ${side} WHERE ${q(t.id)} = ${d.placeholder(1)}`, params: [id as SqlValue] });
  if (rows.length === 0) await store.execute({ sql: `INSERT INTO ${side} (${q(t.id)}) VALUES (${d.placeholder(1)})`, params: [id as SqlValue] });
  const sets: string[] = [];
  const params: SqlValue[] = [];
  const add = (v: SqlValue) => {
    params.push(v);
    return d.placeholder(params.length);
  };
  if (t.columns.workerId && state.workerId !== undefined) sets.push(`${q(t.columns.workerId)} = ${add(state.workerId)}`);
  if (t.columns.claimedAt && state.claimedAgoMs !== undefined) {
    sets.push(state.claimedAgoMs === null ? `${q(t.columns.claimedAt)} = NULL` : `${q(t.columns.claimedAt)} = ${d.nowPlusMs(add(-state.claimedAgoMs))}`);
  }
  if (t.columns.attemptCount && state.attemptCount !== undefined) sets.push(`${q(t.columns.attemptCount)} = ${add(state.attemptCount)}`);
  if (sets.length > 0) await store.execute({ sql: `UPDATE ${side} SET ${sets.join(', ')} WHERE ${q(t.id)} = ${add(id as SqlValue)}`, params });
}
