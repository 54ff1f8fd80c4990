/**
 * A column as the database's catalog describes it, and whether a value fits it: text within its characters or
 * bytes, an id within its integer range. Adapters fill ColumnInfo from their catalogs; core checks values
 * against it before they reach a statement.
 */
import type { JobId } from './values.js';

/**
 * The most a column holds: `chars` in characters (code points: what VARCHAR(n) counts), `bytes` in UTF-8
 * bytes (text types bounded in bytes, and on a store with a `statementLimit` whatever one statement can
 * carry). A value fits when it is within both.
 */
export interface ColumnLimit {
  readonly chars?: number;
  readonly bytes?: number;
}

/** A column as the database's catalog reports it. */
export interface ColumnInfo {
  name: string;
  /** The declared type, lower-cased. */
  type: string;
  /**
   * The column alone is unique: a primary key of this one column, or a unique index or constraint of
   * exactly this column (not partial, not an expression). A column that is only part of a wider key is not.
   */
  unique: boolean;
  /** The column holds integers (on a store with type affinity: INTEGER affinity or no declared type). */
  integer: boolean;
  /** How much text the column holds when the database bounds it; null when it does not (or not usefully). */
  maxLength: ColumnLimit | null;
  /**
   * The database numbers this column itself on INSERT (an auto-increment column), so the generated key a driver
   * reports for an INSERT (ExecResult.insertId) is this column's value. Absent or false: not known to be, and
   * enqueue never takes a reported key for this column's value (on a store that reports `insertId` it may be
   * another column's).
   */
  autoIncrement?: boolean | undefined;
  /**
   * Whether an INSERT that leaves the column out gets a value from the database: a DEFAULT (a sequence, serial,
   * identity or expression), an auto-increment column, a row-id alias (a lone INTEGER PRIMARY KEY). False on
   * an application's table whose ids the application assigns (the seed's `table_a`): a row enqueued there must
   * carry its id, and a schedule, which inserts a new row each time it fires, has none to give. Absent: not
   * known, and nothing is refused on a guess.
   */
  filledOnInsert?: boolean | undefined;
  /**
   * The integers the column can hold, for an integer column of a fixed width. An id outside them is no row's, so
   * lookups by id (inspect, requeue, the dashboard) answer "no such row" without asking the database, which
   * may refuse the value with an error (a strictly typed server) or compare it and find nothing. Absent: not an
   * integer column, or no bound the adapter knows.
   */
  integerRange?: IntegerRange | undefined;
}

/** The smallest and largest value of an integer column (ColumnInfo.integerRange). */
export interface IntegerRange {
  min: bigint;
  max: bigint;
}

/** The range of a two's-complement integer of `bits` bits, or of an unsigned one. */
export function integerRangeOfBits(bits: 8 | 16 | 24 | 32 | 64, unsigned = false): IntegerRange {
  const size = 1n << BigInt(bits);
  return unsigned ? { min: 0n, max: size - 1n } : { min: -(size >> 1n), max: (size >> 1n) - 1n };
}

/** Whether `id` can be a value of `column`: false only for an integer beyond the column's integerRange. */
export function idFitsColumn(column: ColumnInfo, id: JobId): boolean {
  const range = column.integerRange;
  if (!range || typeof id === 'string' || (typeof id === 'number' && !Number.isInteger(id))) return true;
  const value = BigInt(id);
  return value >= range.min && value <= range.max;
}

/** Code points, which is what VARCHAR(n) counts on the servers' character columns; JS `length` counts UTF-16 units. */
function codePoints(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // A high surrogate followed by a low one is one character.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

const encoder = new TextEncoder();

/**
 * Why `text` does not fit a column bounded by `limit` (e.g. "100002 bytes; the column holds at most 65535
 * bytes"), or null when it fits or there is no bound.
 */
export function columnOverflow(text: string, limit: ColumnLimit | undefined): string | null {
  if (!limit) return null;
  if (limit.chars !== undefined && text.length > limit.chars) {
    const chars = codePoints(text);
    if (chars > limit.chars) return `${chars} characters; the column holds at most ${limit.chars}`;
  }
  // UTF-8 takes at most 3 bytes per UTF-16 unit: short text needs no encoding to be known to fit.
  if (limit.bytes !== undefined && text.length * 3 > limit.bytes) {
    const bytes = encoder.encode(text).length;
    if (bytes > limit.bytes) return `${bytes} bytes; the column holds at most ${limit.bytes} bytes`;
  }
  return null;
}
