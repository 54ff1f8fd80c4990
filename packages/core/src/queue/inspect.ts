/**
 * What an operator sees of a queue without writing SQL: the rows of one status in the order that matters for
 * it (Queue.inspect), or chosen rows whole (Queue.inspectIds). Read only. Time columns come back as Dates on
 * every dialect, so ages and JSON read the same whatever the database.
 */
import { ConfigError } from '../protocol/errors.js';
import type { JobId, Row } from '../store/store.js';
import { validateKind, type ResolvedTable } from '../protocol/table.js';

/** The states worth looking at row by row; done rows are counted (stats), not listed. */
export const INSPECT_STATUSES = ['failed', 'abuse', 'processing', 'pending'] as const;
export type InspectStatus = (typeof INSPECT_STATUSES)[number];

export const DEFAULT_INSPECT_LIMIT = 20;
/** A listing is for reading; a bigger one belongs to SQL or an export. */
export const MAX_INSPECT_LIMIT = 1000;

export interface InspectOptions {
  /** Default `failed`. */
  status?: InspectStatus | undefined;
  /** How many rows at most: 1 to MAX_INSPECT_LIMIT, default DEFAULT_INSPECT_LIMIT. */
  limit?: number | undefined;
  /** Only rows of this kind, on a table with a kind column (a SchemaError on one without). */
  kind?: string | undefined;
}

export interface InspectReport {
  status: InspectStatus;
  limit: number;
  /** The kind listed, when one was asked. */
  kind?: string;
  /** The columns each row holds, in display order (see TransitionSql.inspectColumns). */
  columns: string[];
  /** In the status's order (see TransitionSql.inspect); time columns as Dates. */
  rows: Row[];
  /** The database's clock when it read the rows (ages are against it, not this host's); null with no rows. */
  clock: Date | null;
}

export interface InspectIdsReport {
  /** The rows found, whole, in the order their ids were given; time columns as Dates. */
  rows: Row[];
  /** The ids no row has. */
  notFound: JobId[];
  clock: Date | null;
}

/** Where the database's clock rides beside the rows; never a column of the table shown. */
export const INSPECT_CLOCK = 'statusq_inspect_clock';

export function isInspectStatus(value: string): value is InspectStatus {
  return (INSPECT_STATUSES as readonly string[]).includes(value);
}

/** The options with their defaults; ConfigError for a status or limit out of range, before any query. */
export function resolveInspectOptions(options: InspectOptions = {}): { status: InspectStatus; limit: number; kind?: string } {
  const status = options.status ?? 'failed';
  if (!isInspectStatus(status)) throw new ConfigError(`inspect: status must be ${INSPECT_STATUSES.slice(0, -1).join(', ')} or ${INSPECT_STATUSES.at(-1)}, got ${JSON.stringify(status)}`);
  const limit = options.limit ?? DEFAULT_INSPECT_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_INSPECT_LIMIT) {
    throw new ConfigError(`inspect: limit must be an integer from 1 to ${MAX_INSPECT_LIMIT}, got ${String(limit)}`);
  }
  return options.kind === undefined ? { status, limit } : { status, limit, kind: validateKind(options.kind, 'inspect: kind') };
}

/**
 * Epoch milliseconds below this in an order column are not read as a time: a sequence number or epoch
 * seconds (1.7e9) would show as a date in January 1970. 1e11 ms is March 1973.
 */
const EPOCH_MS_FLOOR = 1e11;

/**
 * Turns the time columns of rows as the driver read them into Dates. statusq's own time columns (claimed_at,
 * next_attempt_at, finished_at) hold the dialect's `now`: a Date from the driver, or epoch milliseconds
 * (a dialect whose `now` is a number). The order column is a time when its encoding says so (`native`), or epoch milliseconds of a
 * plausible time; text is left as the application wrote it, since its time zone is not known.
 */
export class InspectTimes {
  private readonly own: ReadonlySet<string>;
  constructor(private readonly table: ResolvedTable) {
    const { claimedAt, nextAttemptAt, finishedAt } = table.columns;
    this.own = new Set([claimedAt, nextAttemptAt, finishedAt].filter((name): name is string => name !== undefined));
  }

  /** A copy of `row` without the clock column, its time columns as Dates; and the clock. */
  read(row: Row): { row: Row; clock: Date | null } {
    const { [INSPECT_CLOCK]: clock, ...rest } = row;
    for (const [name, value] of Object.entries(rest)) {
      if (this.own.has(name)) rest[name] = asDate(value, 0) ?? value;
      else if (name === this.table.order) rest[name] = this.orderTime(value) ?? value;
    }
    return { row: rest, clock: asDate(clock, 0) };
  }

  /** An order column's value as a time, where it holds one; null where it holds text or a number that is no time. */
  orderTime(value: unknown): Date | null {
    return this.table.orderTime === 'text' ? null : asDate(value, EPOCH_MS_FLOOR);
  }
}

/** A Date for a driver's Date or for epoch milliseconds at least `floor`; null for anything else. */
export function asDate(value: unknown, floor: number): Date | null {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value;
  const ms = typeof value === 'number' || typeof value === 'bigint' ? Number(value) : typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  return Number.isFinite(ms) && ms >= floor ? new Date(ms) : null;
}
