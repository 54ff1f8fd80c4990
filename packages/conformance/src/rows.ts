/** Reading a queue table back: rows, statuses, times, counts, and a ledger of handler executions. */
import { Queue, type Job, type Row, type StatusCounts, type Store, type TableConfig } from '@statusq/core';
import { besideTableName, type SqlValue } from '@statusq/core/adapter';

/** A job id as a map key; drivers may hand back bigint ids as numbers, bigints or strings. */
export function idKey(id: unknown): string {
  return String(id);
}

/** A status column value as a number, or null for pending. */
export function statusOf(row: Row | undefined, column = 'status'): number | null {
  if (!row) throw new Error('row not found');
  const v = row[column];
  return v === null || v === undefined ? null : Number(v);
}

/** A time column's value in epoch milliseconds (epoch-ms integers, Date objects or date strings). */
export function toMs(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'string') {
    if (/^-?\d+(\.\d+)?$/.test(value)) return Number(value);
    const iso = /^\d{4}-\d\d-\d\d \d/.test(value) && !/[zZ]|[+-]\d\d:?\d\d$/.test(value) ? `${value.replace(' ', 'T')}Z` : value;
    const ms = Date.parse(iso);
    if (Number.isNaN(ms)) throw new Error(`not a time: ${JSON.stringify(value)}`);
    return ms;
  }
  throw new Error(`not a time: ${String(value)}`);
}

export function placeholders(store: Store, count: number, first = 1): string[] {
  return Array.from({ length: count }, (_, i) => store.dialect.placeholder(first + i));
}

/**
 * What a read of `table` selects: every column, and on a table with a claims table beside it (migrate --beside) the
 * claim-state columns from there under their own names, so a case reads a row the same way in either layout.
 */
async function readColumns(store: Store, table: string): Promise<string> {
  if ((await store.describeTable(besideTableName(table))) === null) return '*';
  return (await Queue.open(store, { table })).sql.rowColumns;
}

export async function readRows(store: Store, table: string): Promise<Row[]> {
  const q = store.dialect.quoteIdentifier.bind(store.dialect);
  return (await store.execute({ sql: `SELECT ${await readColumns(store, table)} FROM ${q(table)} ORDER BY ${q('id')}`, params: [] })).rows;
}

export async function readRow(store: Store, table: string, id: unknown): Promise<Row> {
  const q = store.dialect.quoteIdentifier.bind(store.dialect);
  const { rows } = await store.execute({ sql: `SELECT ${await readColumns(store, table)} FROM ${q(table)} WHERE ${q('id')} = ${store.dialect.placeholder(1)}`, params: [id as SqlValue] });
  if (rows.length !== 1) throw new Error(`expected one row with id ${String(id)} in ${table}, found ${rows.length}`);
  return rows[0]!;
}

/** Row counts per status name. */
export async function countsOf(store: Store, table: TableConfig | string): Promise<StatusCounts> {
  const queue = await Queue.open(store, typeof table === 'string' ? { table } : table);
  return queue.counts();
}

/**
 * Records every execution of a handler: per job id, the attempt numbers in the order they ran, and the
 * global order of executions.
 */
export class Ledger {
  readonly attempts = new Map<string, number[]>();
  readonly order: Array<{ id: string; attempt: number; workerId: string }> = [];

  record(job: Job, workerId = ''): void {
    const key = idKey(job.id);
    const list = this.attempts.get(key) ?? [];
    list.push(job.attempt);
    this.attempts.set(key, list);
    this.order.push({ id: key, attempt: job.attempt, workerId });
  }

  count(id: unknown): number {
    return this.attempts.get(idKey(id))?.length ?? 0;
  }

  /** Ids handled other than exactly once. */
  notExactlyOnce(ids: Iterable<unknown>): string[] {
    const bad: string[] = [];
    for (const id of ids) if (this.count(id) !== 1) bad.push(`${idKey(id)}x${this.count(id)}`);
    return bad;
  }
}

