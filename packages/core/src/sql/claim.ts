import { StoreError } from '../protocol/errors.js';
import type { ClaimIdsOnServer, ClaimRequest, ClaimResult, ClaimStrategy, JobId, NativeClaim, Row, SqlValue, Statement, StatementRunner, Store } from '../store/store.js';
import type { ResolvedTable } from '../protocol/table.js';
import { splitToFit } from './statement-size.js';
import { Params, TransitionSql } from './transition-sql.js';
import { executeOne, runInTransaction, runStatement } from './side-writes.js';

/** The column a candidate SELECT carries the database's clock in (NativeClaim.clockWithCandidates); not a column of the table. */
export const CLAIM_CLOCK = 'statusq_claim_clock';

/**
 * The one claim pipeline: the store's native claim when it declares one and `strategy` is native, else the
 * portable conditional update. Adapters supply only the dialect hooks (Store.nativeClaim).
 */
export function claimRows(store: Store, table: ResolvedTable, request: ClaimRequest, strategy: ClaimStrategy): Promise<ClaimResult> {
  const native = strategy === 'native' ? store.nativeClaim : undefined;
  return native ? claimNative(store, native, table, request) : claimConditionalUpdate(store, table, request);
}

/**
 * The native claim. Without aging, a store with a one-statement claim takes the batch in one round trip
 * (`nativeClaim.oneStatement`: an UPDATE of the ids its locking subquery selects, with RETURNING). Otherwise, in one
 * transaction: the candidate selections, each locking what it finds and skipping what others hold; one
 * guarded UPDATE of the merged ids; the claimed rows from RETURNING, built from the locked candidates with
 * the clock they carried (`nativeClaim.clockWithCandidates`), or read back. Nobody else can change a locked row before the commit, so
 * every candidate is claimed and none is lost.
 */
async function claimNative(store: Store, native: NativeClaim, table: ResolvedTable, request: ClaimRequest): Promise<ClaimResult> {
  native.beforeClaim?.(table);
  const sql = new TransitionSql(table, store.dialect);
  // A claim that writes a claims table too is two statements, and its rows are read after both (see claimByIds).
  const beside = table.beside !== null;
  if (native.oneStatement && !beside && !agesFirst(sql, request)) {
    const { rows } = await store.execute(oneStatementClaim(sql, native, request));
    return { rows: sortByQueueOrder(rows, table), candidatesLost: 0 };
  }
  if (!store.transaction) throw new StoreError('Unknown', `the ${store.dialect.name} store declares a native claim that needs a transaction, but has none`, 'NO_TRANSACTION');
  const returning = store.capabilities.returning && !beside;
  const admitted = (tx: StatementRunner, body: () => Promise<() => Promise<Row[]>>) => (native.admit ? native.admit(table, tx, body) : body());
  const onServer = !returning && !beside && !agesFirst(sql, request) && native.idsOnServer ? await native.idsOnServer(table) : null;
  const buildRows = !returning && !beside && native.clockWithCandidates === true;
  if (onServer) {
    // A transaction without defer (a wrapper of the store's that forwards only execute) takes the two-packet
    // claim, reading back the claimed rows rather than asking whether they could be built.
    const finish = await store.transaction((tx) => admitted(tx, () => (tx.defer ? claimOnServer(tx.defer, onServer) : claimInTransaction(tx, false))));
    return { rows: await finish(), candidatesLost: 0 };
  }
  const writesKnown = buildRows && native.claimWritesAreKnown !== undefined && (await native.claimWritesAreKnown(table));
  const finish = await store.transaction((tx) => admitted(tx, () => claimInTransaction(tx, writesKnown)));
  return { rows: await finish(), candidatesLost: 0 };

  /**
   * The claim in one packet with its COMMIT: the ids of the locked candidates never leave the server. One round
   * trip where reading the candidates first made two (one worker of 64 slots, one adapter's server 5 ms away: the claim
   * from about 18 ms to 12, half of it the server and the proxy; docs/benchmarks.md, "Claim round trips").
   */
  async function claimOnServer(defer: NonNullable<StatementRunner['defer']>, ids: ClaimIdsOnServer): Promise<() => Promise<Row[]>> {
    const p = new Params(sql.dialect);
    const candidates = sql.candidates(p, { limit: request.limit, columns: 'id' }) + native.lockCandidates;
    void defer({ sql: ids.collect(candidates), params: p.values });
    const claimedRows = ids.rowsOf(sql.q.table);
    void defer(sql.claimJoined(claimedRows, request.token));
    const read = defer(sql.selectJoined(claimedRows));
    return async () => {
      const { rows } = await read;
      // Every row read was locked by this transaction before its UPDATE, so each is claimed; the status (and
      // token) check is a guard all the same.
      return sortByQueueOrder(ownedInOrder(rows, rows, table, request.token), table);
    };
  }

  /** The claim's statements; resolves to what gives the claimed rows once the transaction committed. */
  async function claimInTransaction(tx: StatementRunner, writesKnown: boolean): Promise<() => Promise<Row[]>> {
    const claimed = (rows: Row[]) => () => Promise.resolve(rows);
    const statements = candidateStatements(sql, request, { columns: buildRows ? 'row' : 'id', lock: native.lockCandidates, clock: buildRows ? CLAIM_CLOCK : undefined });
    const candidates = await selectCandidates(tx, statements, request.limit, table.id);
    if (candidates.length === 0) return claimed([]);
    // By primary key, ascending, over rows this transaction already holds: claimers never lock in opposite orders.
    const ids = sortIds(candidates.map((r) => r[table.id] as JobId));
    // A batch's ids may not fit one statement (store.statementLimit): then several UPDATEs in this same
    // transaction, each over an ascending run of the ids, so the lock order stays ascending.
    if (returning) {
      const rows: Row[] = [];
      for (const run of splitToFit(ids, (some) => sql.claimByIds(some, request.token, true), store.statementLimit)) rows.push(...(await tx.execute(run.statement)).rows);
      return claimed(ownedInOrder(candidates, rows, table, request.token));
    }
    const clock = buildRows ? claimClock(candidates[0]!) : undefined;
    const clockValue = clock instanceof Date ? clock.toISOString() : clock;
    const updates = splitToFit(ids, (some) => sql.claimByIds(some, request.token, false, clockValue, true), store.statementLimit).map((run) => run.statement);
    const built = (affected: number) => writesKnown && affected === ids.length;
    if (buildRows && tx.defer) {
      // The UPDATE travels with the COMMIT (one round trip for both), and where the claim's writes are not known
      // the rows are read back in that same packet, inside the transaction; the counts are read once committed.
      const counts = updates.map((update) => tx.defer!(update));
      const reads = writesKnown ? [] : splitToFit(ids, (some) => sql.selectByIds(some), store.statementLimit).map((run) => tx.defer!(run.statement));
      return async () => {
        const affected = (await Promise.all(counts)).reduce((sum, result) => sum + result.affected, 0);
        if (built(affected)) return candidates.map((row) => asClaimed(row, table, request.token, clock!));
        if (!writesKnown) return ownedInOrder(candidates, (await Promise.all(reads)).flatMap((result) => result.rows), table, request.token);
        // Every candidate was locked by this transaction, so the UPDATE changed each; had it not, the committed
        // rows are read now: those holding this claim's token are this claim's.
        return ownedInOrder(candidates, await selectByIds(store, sql, ids, store), table, request.token);
      };
    }
    let affected = 0;
    for (const update of updates) affected += (await runStatement(tx, update)).affected;
    if (built(affected)) return claimed(candidates.map((row) => asClaimed(row, table, request.token, clock!)));
    return claimed(ownedInOrder(candidates, await selectByIds(tx, sql, ids, store), table, request.token));
  }
}

/** The one-statement native claim of up to `request.limit` rows (without aging). */
export function oneStatementClaim(sql: TransitionSql, native: NativeClaim, request: ClaimRequest): Statement {
  if (!native.oneStatement) throw new StoreError('Unknown', `the ${sql.dialect.name} store has no one-statement claim`, 'NO_ONE_STATEMENT_CLAIM');
  const p = new Params(sql.dialect);
  const set = sql.claimAssignments(p, request.token);
  const candidates = sql.candidates(p, { limit: request.limit, columns: 'id' }) + native.lockCandidates;
  return { sql: native.oneStatement({ table: sql.q.table, id: sql.q.id, set, candidates, returning: sql.rowColumns }), params: p.values, reusable: p.fixedText };
}

/**
 * The seed's portable claim, available on every store: SELECT candidates, then one guarded
 * `UPDATE ... WHERE id = ? AND status IS NULL` per candidate; the worker owns a row only if its UPDATE
 * changed it. Candidates another worker took first are counted as lost. Under contention most candidates
 * are lost (measured on one adapter's server: 74% with 8 workers, 90% with 32), which is why adapters add a native
 * claim; this one stays as the baseline and for engines where the native claim misbehaves.
 */
export async function claimConditionalUpdate(store: Store, table: ResolvedTable, request: ClaimRequest): Promise<ClaimResult> {
  const sql = new TransitionSql(table, store.dialect);
  const candidates = await selectCandidates(store, candidateStatements(sql, request, { columns: 'row' }), request.limit, table.id);
  const rows: Row[] = [];
  let candidatesLost = 0;
  let interruptedBy: unknown;
  for (const candidate of candidates) {
    const id = candidate[table.id] as JobId;
    const claim = sql.claimByIds([id], request.token, false);
    let affected: number;
    try {
      ({ affected } = await executeOne(store, claim));
    } catch (error) {
      // The rows claimed before this error are ours: hand them over with it (ClaimResult.interruptedBy).
      if (rows.length === 0) throw error;
      interruptedBy = error;
      break;
    }
    if (affected !== 1) {
      candidatesLost++;
      continue;
    }
    rows.push(markClaimed(candidate, table, request.token));
  }
  // A claim writes claimed_at from the database clock; read it back only when leases need the real value.
  if (rows.length > 0 && table.features.leases) {
    try {
      const fresh = await selectByIds(store, sql, rows.map((r) => r[table.id] as JobId), store);
      return { rows: orderLike(rows, fresh, table), candidatesLost, ...(interruptedBy !== undefined && { interruptedBy }) };
    } catch (error) {
      // Claimed, but not read back: the rows as the candidate SELECT saw them still name the jobs.
      return { rows, candidatesLost, interruptedBy: interruptedBy ?? error };
    }
  }
  return { rows, candidatesLost, ...(interruptedBy !== undefined && { interruptedBy }) };
}

/** The rows of `ids`, in as many SELECTs as the store's statement limit needs (see splitToFit). */
async function selectByIds(runner: StatementRunner, sql: TransitionSql, ids: readonly JobId[], store: Store): Promise<Row[]> {
  const rows: Row[] = [];
  for (const run of splitToFit(ids, (some) => sql.selectByIds(some), store.statementLimit)) rows.push(...(await runner.execute(run.statement)).rows);
  return rows;
}

/**
 * Aging changes the claim: aged rows first (oldest first), before the configured order. Oldest-first without
 * priorities needs no aging (the oldest rows come first anyway); with priorities it bounds a low priority's wait.
 */
function agesFirst(sql: TransitionSql, request: ClaimRequest): boolean {
  return request.agingMs !== undefined && (sql.table.direction === 'newest' || sql.table.features.priority);
}

/**
 * The candidate selections of one claim, in the order they are consulted: aged rows first (oldest first)
 * when aging is on and the queue runs newest-first, then the configured order. `lock` is appended to each
 * (NativeClaim.lockCandidates); `clock` names a column carrying the database's time beside the rows.
 */
export function candidateStatements(sql: TransitionSql, request: ClaimRequest, options: { columns: 'id' | 'row'; lock?: string | undefined; clock?: string | undefined }): Statement[] {
  const { columns, clock, lock = '' } = options;
  const statements: Statement[] = [];
  if (agesFirst(sql, request)) {
    const p = new Params(sql.dialect);
    statements.push({ sql: sql.candidates(p, { limit: request.limit, columns, agedMs: request.agingMs, clock }) + lock, params: p.values });
  }
  const p = new Params(sql.dialect);
  statements.push({ sql: sql.candidates(p, { limit: request.limit, columns, clock }) + lock, params: p.values });
  return statements;
}

/**
 * The candidate SELECTs a claim of `table` on `store` runs, built as this pipeline builds them: `ordered` in the
 * configured order, and `aged` (oldest first) where aging changes the order (a newest-first or priority queue),
 * else null. What `statusq doctor` EXPLAINs to tell whether an index serves the claim; `limit` is the batch it
 * plans for.
 */
export function claimPlanStatements(store: Store, table: ResolvedTable, limit = 50): { ordered: Statement; aged: Statement | null } {
  const native = store.nativeClaim;
  const sql = new TransitionSql(table, store.dialect);
  // Whole rows (with the clock) only where a native claim builds its rows from the candidates (claimInTransaction).
  const columns = native && !store.capabilities.returning && native.clockWithCandidates && table.beside === null ? 'row' : 'id';
  const options = { columns, lock: native?.lockCandidates ?? '' } as const;
  const ordered = candidateStatements(sql, { limit, token: null }, options)[0]!;
  const agedRequest = { limit, token: null, agingMs: 3_600_000 };
  return { ordered, aged: agesFirst(sql, agedRequest) ? candidateStatements(sql, agedRequest, options)[0]! : null };
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

/** Runs the candidate selections in order, stopping once `limit` candidates are found, and merges them. */
async function selectCandidates(runner: StatementRunner, statements: readonly Statement[], limit: number, idColumn: string): Promise<Row[]> {
  const lists: Row[][] = [];
  let found = 0;
  for (const statement of statements) {
    const { rows } = await runner.execute(statement);
    lists.push(rows);
    found += rows.length;
    if (found >= limit) break;
  }
  return mergeCandidates(lists, limit, idColumn);
}

/** The database's clock as the candidate SELECT read it: a Date, or the dialect's own representation of `now`. */
function claimClock(candidate: Row): Date | SqlValue {
  const clock = candidate[CLAIM_CLOCK];
  if (clock instanceof Date || typeof clock === 'number' || typeof clock === 'bigint' || typeof clock === 'string') return clock;
  throw new StoreError('Unknown', `the claim's database clock came back as ${clock === null ? 'null' : typeof clock}`, 'CLAIM_CLOCK');
}

function markClaimed(row: Row, table: ResolvedTable, token: string | null): Row {
  const claimed: Row = { ...row, [table.status]: table.codes.processing };
  if (table.columns.workerId) claimed[table.columns.workerId] = token;
  if (table.columns.dispatchedAt) claimed[table.columns.dispatchedAt] = null;
  return claimed;
}

/** A locked candidate as the claim's UPDATE left it (the UPDATE changed every candidate and nothing else). */
function asClaimed(candidate: Row, table: ResolvedTable, token: string | null, clock: Date | SqlValue): Row {
  const { [CLAIM_CLOCK]: _clock, ...row } = markClaimed(candidate, table, token);
  if (table.columns.claimedAt) row[table.columns.claimedAt] = clock;
  return row;
}

/**
 * The claimed rows as they are after the UPDATE, in candidate (queue) order. Every candidate was locked by
 * this transaction, so every one was claimed; the status (and token) check is a guard all the same.
 */
function ownedInOrder(candidates: readonly Row[], fresh: readonly Row[], table: ResolvedTable, token: string | null): Row[] {
  const byId = new Map(fresh.map((r) => [keyOf(r[table.id]), r]));
  const owned: Row[] = [];
  for (const candidate of candidates) {
    const row = byId.get(keyOf(candidate[table.id]));
    if (!row || Number(row[table.status]) !== table.codes.processing) continue;
    if (table.columns.workerId && token !== null && row[table.columns.workerId] !== token) continue;
    owned.push(row);
  }
  return owned;
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

/** Ids in ascending order (numbers and numeric strings by value), the order the claim's UPDATE locks them in. */
export function sortIds(ids: readonly JobId[]): JobId[] {
  return [...ids].sort(compareIds);
}

function compareIds(a: JobId, b: JobId): number {
  const x = asBigInt(a);
  const y = asBigInt(b);
  if (x !== null && y !== null) return x < y ? -1 : x > y ? 1 : 0;
  const s = String(a);
  const t = String(b);
  return s < t ? -1 : s > t ? 1 : 0;
}

function asBigInt(id: JobId): bigint | null {
  if (typeof id === 'bigint') return id;
  if (typeof id === 'number') return Number.isInteger(id) ? BigInt(id) : null;
  return /^-?\d+$/.test(id) ? BigInt(id) : null;
}

/** Comparable form of an order-column value (Date, number, bigint or text). */
function orderKey(value: unknown): number | bigint | string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'string') return value;
  return String(value);
}

/** Sorts claimed rows into queue order (RETURNING promises none): priority first where there is one, rows without an order value last. */
export function sortByQueueOrder(rows: Row[], table: ResolvedTable): Row[] {
  const sign = table.direction === 'newest' ? -1 : 1;
  const priority = table.columns.priority;
  return rows.sort((a, b) => {
    if (priority !== undefined) {
      const byPriority = Number(b[priority] ?? 0) - Number(a[priority] ?? 0);
      if (byPriority !== 0) return byPriority;
    }
    const x = orderKey(a[table.order]);
    const y = orderKey(b[table.order]);
    if (x === y) return 0;
    if (x === null) return 1;
    if (y === null) return -1;
    return x < y ? -sign : sign;
  });
}

/**
 * How a claim under a limit that decides row by row (limits/group-limits.ts) takes its candidates: a condition
 * that skips what is known to be over the limit, and a choice among each page of candidates.
 */
export interface CandidatePicker {
  /** The column the candidates carry their group in (ClaimStatements.candidates' `group`). */
  readonly groupAlias: string;
  /** A condition ANDed to the candidate SELECT, its parameters added to `p`; undefined for none. */
  where(p: Params): string | undefined;
  /** Of a page of candidates (queue order), the ones to claim. */
  pick(candidates: readonly Row[]): Row[];
  /** A picked candidate whose guarded UPDATE changed nothing: another claimer had it. */
  lost(candidate: Row): void;
}

/** Pages of candidates a picked claim reads at most: each page after the first skips the groups the one before filled. */
const MAX_PICKED_PAGES = 4;

/**
 * Claims up to `request.limit` due rows inside the caller's open transaction `tx` (a fleet-wide limit's claim,
 * made while the limit's lock is held: limits/kind-concurrency.ts, limits/group-limits.ts), one guarded UPDATE
 * per candidate in ascending id order, so what this claim owns is exact without RETURNING or a token. With a
 * `picker`, the candidates are read a page at a time and claimed as it picks them. Rows in queue order.
 */
export async function claimInOpenTransaction(tx: StatementRunner, store: Store, table: ResolvedTable, request: ClaimRequest, picker?: CandidatePicker): Promise<Row[]> {
  const sql = new TransitionSql(table, store.dialect);
  // With RETURNING, the picked candidates are claimed by one guarded UPDATE per statement-sized run, which says
  // which rows it changed (a claim of 64 rows under group limits on one adapter's server: p50 10.8 ms to 3.7);
  // without it, one guarded UPDATE per candidate, whose affected count says the same.
  const returning = store.capabilities.returning && table.beside === null;
  const claimedRows: Row[] = [];
  const claimedIds: JobId[] = [];
  const claim = async (candidates: readonly Row[], lost: (candidate: Row) => void) => {
    const ids = sortIds(candidates.map((row) => row[table.id] as JobId));
    const won = new Set<string>();
    if (returning) {
      for (const run of splitToFit(ids, (some) => sql.claimByIds(some, request.token, true), store.statementLimit)) {
        for (const row of (await tx.execute(run.statement)).rows) {
          won.add(keyOf(row[table.id]));
          claimedRows.push(row);
        }
      }
    } else {
      for (const id of ids) if ((await runStatement(tx, sql.claimByIds([id], request.token, false))).affected === 1) won.add(keyOf(id));
    }
    for (const candidate of candidates) {
      if (won.has(keyOf(candidate[table.id]))) claimedIds.push(candidate[table.id] as JobId);
      else lost(candidate);
    }
  };
  if (picker === undefined) {
    await claim(await selectCandidates(tx, candidateStatements(sql, request, { columns: 'id' }), request.limit, table.id), () => {});
  } else {
    for (let page = 0; page < MAX_PICKED_PAGES && claimedIds.length < request.limit; page++) {
      const wanted = request.limit - claimedIds.length;
      const p = new Params(sql.dialect);
      const { rows } = await tx.execute({ sql: sql.candidates(p, { limit: wanted, columns: 'id', alsoWhere: picker.where(p), group: picker.groupAlias }), params: p.values });
      await claim(picker.pick(rows), (candidate) => picker.lost(candidate));
      // A short page: nothing more is due outside the groups skipped.
      if (rows.length < wanted) break;
    }
  }
  if (claimedIds.length === 0) return [];
  return sortByQueueOrder(returning ? claimedRows : await selectByIds(tx, sql, claimedIds, store), table);
}

/**
 * The claim of rows named from outside the table (a broker's messages): the same guarded UPDATE as the
 * conditional-update claim, of just those ids, so a row already claimed, settled or not yet due changes
 * nothing. Needs a fencing token: without RETURNING the rows read back are the ones holding it. Returns the
 * rows this call owns, in no particular order.
 */
export async function claimGivenIds(store: Store, table: ResolvedTable, ids: readonly JobId[], token: string): Promise<Row[]> {
  const sql = new TransitionSql(table, store.dialect);
  const ordered = sortIds(ids);
  const held = (rows: readonly Row[]) => rows.filter((row) => Number(row[table.status]) === table.codes.processing && (!table.columns.workerId || row[table.columns.workerId] === token));
  if (table.beside !== null) {
    // Each id's claims-table row is written only where its own UPDATE claimed it.
    const results = await runInTransaction(store, ordered.map((id) => sql.claimByIds([id], token, false)));
    const claimed = ordered.filter((_, i) => results[i]!.affected === 1);
    return claimed.length === 0 ? [] : held((await store.execute(sql.selectByIds(claimed))).rows);
  }
  if (store.capabilities.returning) return held((await store.execute(sql.claimByIds(ordered, token, true))).rows);
  const { affected } = await store.execute(sql.claimByIds(ordered, token, false));
  return affected === 0 ? [] : held((await store.execute(sql.selectByIds(ordered))).rows);
}
