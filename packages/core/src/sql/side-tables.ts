import { StoreError } from '../protocol/errors.js';
import { splitTableName } from '../protocol/identifiers.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import type { ColumnSpec, SqlDialect, SqlParam, StatementRunner, Store } from '../store/store.js';
import { runAll, schemaSupportOf } from './schema.js';

/**
 * The tables statusq keeps beside a queue table: one per database (per schema, for a schema-qualified queue
 * table), a row per queue table and name. Claiming a tick or an instance slot is a guarded UPDATE of its row,
 * so of any number of schedulers or workers one gets it (scheduler.ts, instance-slots.ts).
 */
export function sideTableName(queueTable: string, side: SideTable): string {
  const [schema] = splitTableName(queueTable);
  return schema === null ? side : `${schema}.${side}`;
}

export type SideTable = 'statusq_schedules' | 'statusq_instances' | 'statusq_rate_limits' | 'statusq_kind_limits' | 'statusq_group_rates';

/** The columns of the schedules table: the last tick is UTC ISO 8601 text, which sorts as time on every database. */
export const SCHEDULE_COLUMNS = { queueTable: 'queue_table', name: 'name', lastTick: 'last_tick', claimedBy: 'claimed_by' } as const;

/** The columns of the instances table: a row per slot of a queue table's --max-instances cap, held until `expires_at` (the database's clock). */
export const INSTANCE_COLUMNS = { queueTable: 'queue_table', slot: 'slot', holder: 'holder', expiresAt: 'expires_at', host: 'host' } as const;

/**
 * The columns of the rate-limits table: a queue table's shared budget, as the decimal text of epoch milliseconds
 * (limits/rate-budget.ts); a kind's budget is the row keyed `<table>#kind:<kind>` (kindBudgetKey).
 */
export const RATE_LIMIT_COLUMNS = { queueTable: 'queue_table', tat: 'tat' } as const;

/**
 * The columns of the kind-limits table: a row per queue table and limited kind, whose UPDATE is the lock every
 * claimer of that kind takes before it counts and claims (limits/kind-concurrency.ts); `claimed_by` says who last did.
 * The row whose kind is `#groups` (no kind can be called so) is the table's group lock (limits/group-limits.ts).
 */
export const KIND_LIMIT_COLUMNS = { queueTable: 'queue_table', kind: 'kind', claimedBy: 'claimed_by' } as const;

/**
 * Takes a limit's lock in `tx`: an UPDATE of its row in the kind-limits table (`kind` is the kind, or the table's
 * group key), which claimers under that limit then take one at a time, each counting what the one before committed.
 * `claimedBy` must differ from the row's last value: a server that counts changed rows, not matched ones, reports
 * 0 for a write of the same value. Rejects with `gone()` when the row is missing (dropped while workers ran).
 */
export async function lockLimitRow(tx: StatementRunner, dialect: SqlDialect, lockTable: string, row: { queueTable: string; kind: string }, claimedBy: string, gone: () => StoreError): Promise<void> {
  const q = (name: string) => dialect.quoteIdentifier(name);
  const c = KIND_LIMIT_COLUMNS;
  const sql = `UPDATE ${q(lockTable)} SET ${q(c.claimedBy)} = ${dialect.placeholder(1)} WHERE ${q(c.queueTable)} = ${dialect.placeholder(2)} AND ${q(c.kind)} = ${dialect.placeholder(3)}`;
  if ((await tx.execute({ sql, params: [claimedBy, row.queueTable, row.kind] })).affected !== 1) throw gone();
}

/**
 * The columns of the group-rates table: the pacing of each recently started group of a queue table, as zero-padded
 * text of epoch milliseconds (text order is time order); a group idle long enough has no row (limits/group-limits.ts).
 */
export const GROUP_RATE_COLUMNS = { queueTable: 'queue_table', group: 'group_key', tat: 'tat' } as const;

const SIDE_TABLE_COLUMNS: Readonly<Record<SideTable, readonly ColumnSpec[]>> = {
  statusq_schedules: [
    { name: SCHEDULE_COLUMNS.queueTable, kind: 'token', nullable: false, primaryKey: true },
    { name: SCHEDULE_COLUMNS.name, kind: 'token', nullable: false, primaryKey: true },
    { name: SCHEDULE_COLUMNS.lastTick, kind: 'token', nullable: false },
    { name: SCHEDULE_COLUMNS.claimedBy, kind: 'token', nullable: true },
  ],
  statusq_instances: [
    { name: INSTANCE_COLUMNS.queueTable, kind: 'token', nullable: false, primaryKey: true },
    { name: INSTANCE_COLUMNS.slot, kind: 'integer', nullable: false, primaryKey: true },
    { name: INSTANCE_COLUMNS.holder, kind: 'token', nullable: true },
    { name: INSTANCE_COLUMNS.expiresAt, kind: 'time', nullable: true },
    { name: INSTANCE_COLUMNS.host, kind: 'token', nullable: true },
  ],
  statusq_rate_limits: [
    { name: RATE_LIMIT_COLUMNS.queueTable, kind: 'token', nullable: false, primaryKey: true },
    { name: RATE_LIMIT_COLUMNS.tat, kind: 'token', nullable: false },
  ],
  statusq_kind_limits: [
    { name: KIND_LIMIT_COLUMNS.queueTable, kind: 'token', nullable: false, primaryKey: true },
    { name: KIND_LIMIT_COLUMNS.kind, kind: 'token', nullable: false, primaryKey: true },
    { name: KIND_LIMIT_COLUMNS.claimedBy, kind: 'token', nullable: true },
  ],
  statusq_group_rates: [
    { name: GROUP_RATE_COLUMNS.queueTable, kind: 'token', nullable: false, primaryKey: true },
    { name: GROUP_RATE_COLUMNS.group, kind: 'token', nullable: false, primaryKey: true },
    { name: GROUP_RATE_COLUMNS.tat, kind: 'token', nullable: false },
  ],
};

/**
 * Creates the side table unless it exists, and returns its name. Processes starting together may both try: the
 * one that loses finds the table there, which is all it wanted.
 */
export async function ensureSideTable(store: Store, queueTable: string, side: SideTable): Promise<string> {
  const table = sideTableName(queueTable, side);
  if (await store.describeTable(table)) return table;
  try {
    await runAll(store, schemaSupportOf(store).createTable(table, SIDE_TABLE_COLUMNS[side]));
  } catch (error) {
    if (!(error instanceof StoreError) || !(await store.describeTable(table))) throw error;
  }
  return table;
}

/**
 * Inserts a row of a side table (a schedule's, a cap's slot, a rate budget) unless another process made it first:
 * its key then exists, which is all the caller wanted.
 */
export async function insertSideRow(store: Store, table: string, values: Readonly<Record<string, SqlParam>>): Promise<void> {
  const d = store.dialect;
  const columns = Object.keys(values);
  const sql = `INSERT INTO ${d.quoteIdentifier(table)} (${columns.map((c) => d.quoteIdentifier(c)).join(', ')}) VALUES (${columns.map((_, i) => d.placeholder(i + 1)).join(', ')})`;
  try {
    await withStoreRetry(() => store.execute({ sql, params: Object.values(values) }), STORE_RETRY.write);
  } catch (error) {
    if (!(error instanceof StoreError) || error.kind !== 'UniqueViolation') throw error;
  }
}
