/**
 * Rows by status for a gauge refreshed on an interval (`statusq_queue_rows`), cheap on a table that keeps
 * millions of finished rows: pending and processing are counted, the finished statuses are read from the
 * planner's estimate where an exact count would read them all.
 */
import { ConfigError } from '../protocol/errors.js';
import { statusCode, type StatusName } from '../protocol/status.js';
import type { Statement, Store } from '../store/store.js';
import type { TransitionSql } from '../sql/transition-sql.js';
import type { ResolvedTable } from '../protocol/table.js';

/**
 * Rows per status, plus `other`: rows whose status is none of the five codes (a stray 7, -1, 'done'), so the
 * counts always add up to the table's row count. These six keys are what `statusq stats --json` prints.
 */
export type StatusCounts = Record<StatusName | 'other', number>;
export type StatusBucket = keyof StatusCounts;

export interface MonitoringCountOptions {
  /**
   * Below this many rows (the planner's estimate of the table) every status is counted exactly, with the
   * one GROUP BY of Queue.counts. Default 100,000: ~11 ms on two adapters' servers (see MONITORING_COST).
   */
  exactBelowRows?: number | undefined;
  /**
   * On a larger table, a status is counted up to this many rows; past it, its number is an estimate.
   * Default 50,000 (a few ms through an index).
   */
  countUpTo?: number | undefined;
}

export interface MonitoringCounts {
  counts: StatusCounts;
  /** The statuses whose number is an estimate; every other one is exact. Empty on a small table. */
  estimated: StatusBucket[];
}

export const DEFAULT_EXACT_BELOW_ROWS = 100_000;
export const DEFAULT_COUNT_UP_TO = 50_000;

const BUCKETS: readonly StatusBucket[] = ['pending', 'processing', 'done', 'abuse', 'failed', 'other'];

/**
 * MONITORING_COST, measured on 1,000,000 finished rows (985,990 done, 10,000 failed, 4,000 abuse, 10 other)
 * plus 500 pending and 32 processing, in a statusq-created table, on this repository's 2-core machine, on two
 * adapters' servers: one whose pending index is partial (A) and one whose pending index is (status, date) (B):
 *
 *   A:                 GROUP BY status (Queue.counts)                 110-127 ms (a scan of the table)
 *                      pending, capped count (partial pending index)    0.3-1 ms
 *                      processing, capped count                        80-96 ms (a scan: see below)
 *                      EXPLAIN estimate, each                           0.1-0.5 ms
 *   B:                 GROUP BY status                                    109 ms (the whole (status, date) index)
 *                      pending / processing, capped count                   <1 ms each ((status, date) seek)
 *                      abuse, other, capped count                          <1 ms each
 *                      COUNT(*) WHERE status = done                        101 ms
 *                      EXPLAIN estimate, each                              <1 ms
 *   Whole calls from Node (3 rounds):  Queue.counts        monitoringCounts
 *     A                                 156-225 ms          110-156 ms (the processing scan, in parallel workers)
 *     A + processing index              ~390 ms (cold)      11 ms (processing 0.15-0.4 ms)
 *     B                                 92-125 ms           21-35 ms (only done estimated)
 *
 * Processing is always counted, even where no index serves it: where the pending index is partial (it
 * holds pending rows only), so that count reads the table, but an estimate of it is never 0 (the planner
 * says at least 1 row), and "rows stuck in processing" is the alert this gauge exists for. An index on the
 * processing rows (`CREATE INDEX ... ON jobs (id) WHERE status = 9`) turns it into an index read.
 */
export async function monitoringCounts(store: Store, table: ResolvedTable, sql: TransitionSql, exact: () => Promise<StatusCounts>, options: MonitoringCountOptions = {}): Promise<MonitoringCounts> {
  const exactBelowRows = options.exactBelowRows ?? DEFAULT_EXACT_BELOW_ROWS;
  const cap = options.countUpTo ?? DEFAULT_COUNT_UP_TO;
  if (!Number.isSafeInteger(exactBelowRows) || exactBelowRows < 0) throw new ConfigError(`exactBelowRows must be a non-negative integer, got ${exactBelowRows}`);
  if (!Number.isSafeInteger(cap) || cap < 1) throw new ConfigError(`countUpTo must be a positive integer, got ${cap}`);
  const inspection = store.inspection;
  const estimate = inspection?.estimateRows?.bind(inspection);
  if (!inspection || !estimate) return { counts: await exact(), estimated: [] };
  const total = await estimate(sql.allRows());
  if (total < exactBelowRows) return { counts: await exact(), estimated: [] };

  const counts: StatusCounts = { pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 };
  const estimated: StatusBucket[] = [];
  /** What an estimated status's count reached before the cap stopped it: it has at least that many rows. */
  const floors = new Map<StatusBucket, number>();
  for (const bucket of BUCKETS) {
    const select = bucket === 'other' ? sql.rowsWithOtherStatus() : sql.rowsWithStatus(statusCode(bucket as StatusName, table.codes));
    // Finished rows are counted only where an index bounds the count by status (a composite (status, date) pending index).
    const counted = bucket === 'pending' || bucket === 'processing' || (await inspection.explain(select, { statusColumn: table.status })).bounded === true;
    const n = counted ? await countUpTo(store, sql, select, cap) : 0;
    if (counted && n < cap) {
      counts[bucket] = n;
      continue;
    }
    counts[bucket] = Math.max(n, Math.round(await estimate(select)));
    floors.set(bucket, n);
    estimated.push(bucket);
  }
  // One status past the cap (done, usually): the table's estimated size, which planners keep best
  // (the catalog's row count), less the exact ones. One adapter's server caps a range's estimate at half the table.
  if (estimated.length === 1) {
    const [only] = estimated as [StatusBucket];
    const exactSum = BUCKETS.filter((b) => b !== only).reduce((sum, b) => sum + counts[b], 0);
    counts[only] = Math.max(floors.get(only) ?? 0, Math.round(total) - exactSum);
  }
  return { counts, estimated };
}

async function countUpTo(store: Store, sql: TransitionSql, select: Statement, cap: number): Promise<number> {
  const { rows } = await store.execute(sql.countUpTo(select, cap));
  return Number(rows[0]?.n ?? 0);
}
