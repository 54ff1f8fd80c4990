import type { ClaimRequest, ClaimResult, JobId, Row, Statement, Store } from './store.js';
import type { ResolvedTable } from './table.js';
import { Params, TransitionSql } from './transition-sql.js';

/**
 * The seed's portable claim, available on every store: SELECT candidates, then one guarded
 * `UPDATE ... WHERE id = ? AND status IS NULL` per candidate; the worker owns a row only if its UPDATE
 * changed it. Candidates another worker took first are counted as lost. Under contention most candidates
 * are lost (measured on PostgreSQL: 74% with 8 workers, 90% with 32), which is why adapters add a native
 * claim; this one stays as the baseline and for engines where the native claim misbehaves.
 */
export async function claimConditionalUpdate(store: Store, table: ResolvedTable, request: ClaimRequest): Promise<ClaimResult> {
  const sql = new TransitionSql(table, store.dialect);
  const candidates = await selectCandidates(store, sql, request, '*');
  const rows: Row[] = [];
  let lost = 0;
  for (const candidate of candidates) {
    const id = candidate[table.id] as JobId;
    const claim = sql.claimByIds([id], request.token, false);
    const { affected } = await store.execute(claim);
    if (affected !== 1) {
      lost++;
      continue;
    }
    rows.push(markClaimed(candidate, table, request.token));
  }
  // A claim writes claimed_at from the database clock; read it back only when leases need the real value.
  if (rows.length > 0 && table.features.leases) {
    const fresh = await store.execute(sql.selectByIds(rows.map((r) => r[table.id] as JobId)));
    return { rows: orderLike(rows, fresh.rows, table), lost };
  }
  return { rows, lost };
}

/**
 * The candidate selections of one claim, in the order they are consulted: aged rows first (oldest first)
 * when aging is on and the queue runs newest-first, then the configured order.
 */
export function candidateStatements(sql: TransitionSql, request: ClaimRequest, columns: 'id' | '*', clock?: string): Statement[] {
  const statements: Statement[] = [];
  if (request.agingMs !== undefined && sql.table.direction === 'newest') {
    const p = new Params(sql.dialect);
    statements.push({ sql: sql.candidates(p, { limit: request.limit, columns, agedMs: request.agingMs, clock }), params: p.values });
  }
  const p = new Params(sql.dialect);
  statements.push({ sql: sql.candidates(p, { limit: request.limit, columns, clock }), params: p.values });
  return statements;
}

/** Concatenates candidate lists in order, without duplicates, up to `limit`. */
export function mergeCandidates(lists: readonly Row[][], limit: number, idColumn: string): Row[] {
  const seen = new Set<string>();
  const merged: Row[] = [];
  for (const list of lists) {
    for (const row of list) {
      if (merged.length >= limit) return merged;
      const key = keyOf(row[idColumn]);
      if (seen.has(key)) continue;
      seen.add(key);
      merged.push(row);
    }
  }
  return merged;
}

/** Runs the candidate selections in order, stopping once `limit` candidates are found. */
export async function selectCandidates(store: Pick<Store, 'execute'>, sql: TransitionSql, request: ClaimRequest, columns: 'id' | '*'): Promise<Row[]> {
  const lists: Row[][] = [];
  for (const statement of candidateStatements(sql, request, columns)) {
    lists.push((await store.execute(statement)).rows);
    if (lists.flat().length >= request.limit) break;
  }
  return mergeCandidates(lists, request.limit, sql.table.id);
}

function markClaimed(row: Row, table: ResolvedTable, token: string | null): Row {
  const claimed: Row = { ...row, [table.status]: table.codes.processing };
  if (table.columns.workerId) claimed[table.columns.workerId] = token;
  return claimed;
}

/** Map key for an id of any type (bigint and number ids compare by value). */
export function keyOf(id: unknown): string {
  return typeof id === 'bigint' || typeof id === 'number' ? `n${id}` : `s${String(id)}`;
}

/** `fresh` rows in the order of `ordered` (RETURNING and IN (...) do not promise an order). */
export function orderLike(ordered: readonly Row[], fresh: readonly Row[], table: ResolvedTable): Row[] {
  const byId = new Map(fresh.map((r) => [keyOf(r[table.id]), r]));
  return ordered.map((r) => byId.get(keyOf(r[table.id])) ?? r);
}

/** Comparable form of an order-column value (Date, number, bigint or text). */
function orderKey(value: unknown): number | bigint | string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'string') return value;
  return String(value);
}

/** Sorts claimed rows into queue order (RETURNING promises none), rows without an order value last. */
export function sortByQueueOrder(rows: Row[], table: ResolvedTable): Row[] {
  const sign = table.direction === 'newest' ? -1 : 1;
  return rows.sort((a, b) => {
    const x = orderKey(a[table.order]);
    const y = orderKey(b[table.order]);
    if (x === y) return 0;
    if (x === null) return 1;
    if (y === null) return -1;
    return x < y ? -sign : sign;
  });
}
