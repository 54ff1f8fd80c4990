/**
 * Retention: finished rows (done, abuse, failed) older than a cut-off deleted, or moved to an archive table, in
 * small batches. Each batch reads candidate ids without a lock, then deletes (or copies and deletes) them by
 * primary key under the same status guard every transition has, in one short transaction: a batch never touches
 * a pending or processing row, never holds a lock for longer than its own few hundred rows, and a row requeued
 * meanwhile is neither deleted nor archived. Workers claim from the pending index and settle by primary key, so
 * a prune running beside them takes nothing from them but its share of the server, which the pause between
 * batches bounds (PruneOptions.pauseMs).
 */
import { ConfigError, SchemaError } from '../protocol/errors.js';
import { validateIdentifier, validateTableName } from '../protocol/identifiers.js';
import { Params, TransitionSql } from '../sql/transition-sql.js';
import type { Queue } from '../queue/queue.js';
import { STORE_RETRY, sleep, withStoreRetry } from '../store/retry.js';
import { statusCode, type StatusName } from '../protocol/status.js';
import type { ExecResult, JobId, Statement, Store } from '../store/store.js';
import type { ResolvedTable } from '../protocol/table.js';

/**
 * How many rows of a claims table (a table whose claim state is beside it) belong to rows the application has
 * deleted: never claimed again, only kept until a prune removes them (what its dry run reports, and the doctor).
 */
export async function countOrphanedClaims(store: Store, table: ResolvedTable): Promise<number> {
  const { rows } = await store.execute(new TransitionSql(table, store.dialect).countOrphanedClaims());
  return Number(rows[0]?.n ?? 0);
}

/** The states a prune may remove: the finished ones. */
export const PRUNABLE_STATUSES: readonly StatusName[] = ['done', 'abuse', 'failed'];
/** Rows a batch takes when none is given, and the most it may take. */
export const DEFAULT_PRUNE_BATCH = 1_000;
export const MAX_PRUNE_BATCH = 10_000;

export interface PruneOptions {
  /** Which finished states; each of done, abuse, failed. */
  statuses: readonly StatusName[];
  /**
   * Only rows finished more than this long ago (finished_at), by the database's clock. A row without a
   * finished_at (finished before the column was added) is kept, and a table without the column is a ConfigError,
   * unless byOrderColumn.
   */
  olderThanMs: number;
  /**
   * Judge the rows that have no finished_at (or every row, on a table without the column) by the order column:
   * when they were queued, not when they finished. Off by default: on an application's table the order column is
   * business data (an order's date), and a row queued long ago may have finished a second ago.
   */
  byOrderColumn?: boolean;
  /** Rows per batch (default DEFAULT_PRUNE_BATCH). */
  batch?: number;
  /** Count what would go, change nothing. */
  dryRun?: boolean;
  /** Move the rows to this table instead of deleting them: created (empty, with the queue table's columns) if missing. */
  archive?: string;
  /**
   * Wait between batches, in ms. Default: as long as the batch just took, so a prune has the database at most
   * half the time. Measured (8 workers x 64 slots beside a prune of 1M rows, README "Retention"): on one
   * adapter's server the workers fell from 13,086 to 3,630 jobs/s with no pause and from 12,543 to 7,976 with
   * this one; on the other two, -7% and -4%. 0 runs the batches back to back.
   */
  pauseMs?: number;
  /** Called after each committed batch with the running total. */
  onBatch?: (removed: number) => void;
  /** Stops between batches when aborted; what was committed stays. */
  signal?: AbortSignal;
}

export interface PruneReport {
  /** Rows deleted (or moved), or with dryRun the rows that would be. */
  removed: number;
  batches: number;
  dryRun: boolean;
  /** The column ages were judged by: finished_at, the order column, or `finished_at, else <order column>`. */
  ageColumn: string;
  /**
   * With dryRun on a table with finished_at and without byOrderColumn: finished rows of the given states kept
   * because they have no finished_at. Null otherwise (a real run does not count them: that is one more scan).
   */
  withoutFinishedAt: number | null;
  archive: string | null;
  /**
   * On a table whose claim state is beside it (ResolvedTable.beside): rows of the claims table whose row is gone
   * (the application deleted it), removed (or with dryRun counted) after the batches; the rows a batch removes
   * take their claims-table rows with them. Null on a table without a claims table.
   */
  orphansRemoved: number | null;
  /** True when the archive table was created by this prune. */
  createdArchive: boolean;
  /** True when a signal stopped it before the last batch. */
  interrupted: boolean;
}

/** Checks options before anything reaches the database. */
function checkOptions(options: PruneOptions): { batch: number } {
  if (!options || typeof options !== 'object') throw new ConfigError('prune options must be an object');
  const statuses = options.statuses;
  if (!Array.isArray(statuses) || statuses.length === 0) throw new ConfigError(`prune: give the statuses to remove, of ${PRUNABLE_STATUSES.join(', ')}`);
  for (const status of statuses) {
    if (!PRUNABLE_STATUSES.includes(status)) {
      throw new ConfigError(`prune removes finished rows only (${PRUNABLE_STATUSES.join(', ')}); ${JSON.stringify(status)} rows ${status === 'pending' || status === 'processing' ? 'are still to run or running' : 'are not a status'}`);
    }
  }
  if (typeof options.olderThanMs !== 'number' || !Number.isFinite(options.olderThanMs) || options.olderThanMs < 0) {
    throw new ConfigError(`prune: older-than must be a non-negative number of milliseconds, got ${String(options.olderThanMs)}`);
  }
  const batch = options.batch ?? DEFAULT_PRUNE_BATCH;
  if (!Number.isSafeInteger(batch) || batch < 1 || batch > MAX_PRUNE_BATCH) throw new ConfigError(`prune: batch must be a whole number from 1 to ${MAX_PRUNE_BATCH}, got ${String(batch)}`);
  if (options.archive !== undefined) validateTableName(options.archive);
  if (options.pauseMs !== undefined && (typeof options.pauseMs !== 'number' || !Number.isFinite(options.pauseMs) || options.pauseMs < 0)) {
    throw new ConfigError(`prune: pause must be a non-negative number of milliseconds, got ${String(options.pauseMs)}`);
  }
  return { batch };
}

/**
 * Removes finished rows of `queue`'s table as PruneOptions says, batch after batch until none is left, and
 * reports how many. The cut-off is computed by the database from its own clock in every statement.
 */
export async function pruneRows(queue: Queue, options: PruneOptions): Promise<PruneReport> {
  const { batch } = checkOptions(options);
  const store = queue.store;
  const d = store.dialect;
  const q = (name: string) => d.quoteIdentifier(name);
  const t = queue.table;
  const codes = [...new Set(options.statuses)].map((name) => statusCode(name, t.codes)!);
  const finishedAt = t.columns.finishedAt;
  const byOrder = options.byOrderColumn === true;
  if (!finishedAt && !byOrder) {
    throw new ConfigError(
      `prune: ${t.table} has no finished_at column, so when its rows finished is not known; ` +
        `migrate --with results adds it, or --by-order-column (byOrderColumn) judges age by ${t.order}, when each row was queued`,
    );
  }
  const ageColumn = !finishedAt ? t.order : byOrder ? `${finishedAt}, else ${t.order}` : finishedAt;
  const table = q(t.table);
  const status = `${q(t.status)} IN (${codes.join(', ')})`;
  // finished_at as the row's own column, or read from its claims-table row.
  const finished = finishedAt ? queue.sql.read('finishedAt') : null;

  /** The rows this prune may take: finished in one of the states, and old enough. */
  const candidates = (p: Params): string => {
    const orderOld = () => `${q(t.order)} < ${d.orderCutoff(p.add(-options.olderThanMs), t.orderTime)}`;
    if (!finished) return `${status} AND ${orderOld()}`;
    const finishedOld = `${finished} < ${d.nowPlusMs(p.add(-options.olderThanMs))}`;
    // A row finished before finished_at existed (or abused straight from pending) has none: only the order
    // column, when asked for, can judge it.
    return `${status} AND ${byOrder ? `(${finishedOld} OR (${finished} IS NULL AND ${orderOld()}))` : finishedOld}`;
  };
  const report: PruneReport = {
    removed: 0, batches: 0, dryRun: options.dryRun === true, ageColumn, withoutFinishedAt: null, archive: options.archive ?? null, orphansRemoved: null, createdArchive: false, interrupted: false,
  };

  if (options.dryRun) {
    const count = async (where: string, params: Params['values']) =>
      Number((await withStoreRetry(() => store.execute({ sql: `SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`, params }), STORE_RETRY.write)).rows[0]?.n ?? 0);
    const p = new Params(d);
    report.removed = await count(candidates(p), p.values);
    if (finished && !byOrder) report.withoutFinishedAt = await count(`${status} AND ${finished} IS NULL`, []);
    if (t.beside !== null) report.orphansRemoved = await countOrphanedClaims(store, t);
    return report;
  }
  const archive = options.archive === undefined ? null : await prepareArchive(queue, options.archive, report);

  // Batches walk the primary key upwards from where the last one stopped: the oldest rows, where finished ones
  // are, come first, and no batch reads again what an earlier one passed over (a row kept pending, say).
  let after: JobId | null = null;
  for (;;) {
    if (options.signal?.aborted) {
      report.interrupted = true;
      return report;
    }
    const started = performance.now();
    const p = new Params(d);
    const where: string = `${candidates(p)}${after === null ? '' : ` AND ${q(t.id)} > ${p.add(after)}`}`;
    const found: ExecResult = await withStoreRetry(() => store.execute({ sql: `SELECT ${q(t.id)} AS id FROM ${table} WHERE ${where} ORDER BY ${q(t.id)} LIMIT ${batch}`, params: p.values }), STORE_RETRY.write);
    const ids: JobId[] = found.rows.map((row) => row.id as JobId);
    if (ids.length === 0) {
      if (t.beside !== null) report.orphansRemoved = await removeOrphans(queue, batch, options.signal);
      return report;
    }
    after = ids.at(-1)!;
    const statements = batchStatements(queue, codes, ids, archive);
    const removed = await withStoreRetry(() => store.executeBatch(statements.all), STORE_RETRY.write);
    report.removed += removed[statements.removes]!.affected;
    report.batches++;
    options.onBatch?.(report.removed);
    await sleep(options.pauseMs ?? performance.now() - started, options.signal);
  }
}

/**
 * One batch, one transaction. With an archive: the rows are locked first (a no-op UPDATE under the status guard),
 * so the copy and the delete see the same rows; a row requeued before the lock is in neither. The last
 * statement's affected count is what the batch removed.
 */
function batchStatements(queue: Queue, codes: readonly number[], ids: readonly JobId[], archive: { table: string; columns: string[] } | null): { all: Statement[]; removes: number } {
  const d = queue.store.dialect;
  const q = (name: string) => d.quoteIdentifier(name);
  const t = queue.table;
  const guarded = (p: Params) => `${p.in(q(t.id), ids)} AND ${q(t.status)} IN (${codes.join(', ')})`;
  const statement = (build: (p: Params) => string): Statement => {
    const p = new Params(d);
    return { sql: build(p), params: p.values };
  };
  const remove = statement((p) => `DELETE FROM ${q(t.table)} WHERE ${guarded(p)}`);
  // The claims-table rows of the rows just removed (and only of those: a row requeued meanwhile is still there).
  const claims = t.beside === null ? [] : [statement((p) => `DELETE FROM ${q(t.beside!)} WHERE ${p.in(q(t.id), ids)} AND ${queue.sql.orphanedClaim()}`)];
  if (!archive) return { all: [remove, ...claims], removes: 0 };
  const columns = archive.columns.map(q).join(', ');
  return {
    all: [
      statement((p) => `UPDATE ${q(t.table)} SET ${q(t.status)} = ${q(t.status)} WHERE ${guarded(p)}`),
      statement((p) => `INSERT INTO ${q(archive.table)} (${columns}) SELECT ${columns} FROM ${q(t.table)} WHERE ${guarded(p)}`),
      remove,
      ...claims,
    ],
    removes: 2,
  };
}

/**
 * Deletes the claims-table rows whose row the application deleted, a batch at a time by the claims table's key:
 * the claim never reads them (it starts from the queue table), but they would keep growing.
 */
async function removeOrphans(queue: Queue, batch: number, signal: AbortSignal | undefined): Promise<number> {
  const store = queue.store;
  const q = (name: string) => store.dialect.quoteIdentifier(name);
  const side = q(queue.table.beside!);
  const id = q(queue.table.id);
  let removed = 0;
  let after: JobId | null = null;
  // Each pass moves past the ids it read, so passes end; the bound only keeps a misbehaving server from looping us.
  for (let pass = 0; pass < 1_000_000 && !signal?.aborted; pass++) {
    const p = new Params(store.dialect);
    const from: string = after === null ? '' : ` AND ${side}.${id} > ${p.add(after)}`;
    const found = await withStoreRetry(() => store.execute({ sql: `SELECT ${side}.${id} AS id FROM ${side} WHERE ${queue.sql.orphanedClaim()}${from} ORDER BY ${side}.${id} LIMIT ${batch}`, params: p.values }), STORE_RETRY.write);
    const ids = found.rows.map((row) => row.id as JobId);
    if (ids.length === 0) break;
    after = ids.at(-1)!;
    const dp = new Params(store.dialect);
    const sql = `DELETE FROM ${side} WHERE ${dp.in(id, ids)} AND ${queue.sql.orphanedClaim()}`;
    removed += (await withStoreRetry(() => store.execute({ sql, params: dp.values }), STORE_RETRY.write)).affected;
  }
  return removed;
}

/**
 * The archive table, checked or made: it must hold every column of the queue table (the rows are copied whole);
 * a missing one is made empty with those columns (CREATE TABLE ... AS SELECT, which every dialect has).
 */
async function prepareArchive(queue: Queue, archive: string, report: PruneReport): Promise<{ table: string; columns: string[] }> {
  const store = queue.store;
  const q = (name: string) => store.dialect.quoteIdentifier(name);
  if (archive.toLowerCase() === queue.table.table.toLowerCase()) throw new ConfigError('prune: the archive table must be another table than the queue table');
  const source = (await store.describeTable(queue.table.table)) ?? [];
  // Columns the database computes (a key column generated for deduplication) are not copied: the archive's own, if any, follow.
  const generated = new Set(((await store.inspection?.generatedColumns?.(queue.table.table)) ?? []).map((name) => name.toLowerCase()));
  const columns = source.map((c) => c.name).filter((name) => !generated.has(name.toLowerCase()));
  for (const name of columns) validateIdentifier(name, 'column name');
  let target = await store.describeTable(archive);
  if (!target) {
    await store.execute({ sql: `CREATE TABLE ${q(archive)} AS SELECT ${columns.map(q).join(', ')} FROM ${q(queue.table.table)} WHERE 1 = 0`, params: [] });
    report.createdArchive = true;
    target = (await store.describeTable(archive)) ?? [];
  }
  const present = new Set(target.map((c) => c.name.toLowerCase()));
  const missing = columns.filter((name) => !present.has(name.toLowerCase()));
  if (missing.length > 0) throw new SchemaError(`prune: archive table ${archive} lacks column${missing.length === 1 ? '' : 's'} ${missing.join(', ')} of ${queue.table.table}; the rows are copied whole`);
  return { table: archive, columns };
}
