/**
 * What an enqueued item's values become in a row: a run time checked and read as an instant, a column value
 * as one the driver binds, an object as JSON text. Shared by enqueue, the schedules and the CLI's --run-at.
 */
import { ConfigError } from '../protocol/errors.js';
import type { SqlValue } from '../store/store.js';

/** The latest instant a time column holds on every dialect (the narrowest of the adapters' datetime types ends with year 9999). */
const LAST_RUN_AT_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
/** ISO 8601 with a time zone: a run time without one would be read in whatever zone this process runs in. */
const ZONED_ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/i;

/** Zoned ISO 8601 text naming a real day and time: Date.parse reads 2026-02-31 as March 3 and 24:30 as the next day. */
function isCalendarTime(text: string): boolean {
  const match = ZONED_ISO_TIME.exec(text);
  if (!match) return false;
  const [year, month, day, hour, minute, second] = [match[1], match[2], match[3], match[4], match[5], match[6] ?? '0'].map(Number) as [number, number, number, number, number, number];
  const zone = match[8]!.replace(':', '');
  const zoneOk = zone.toUpperCase() === 'Z' || (Number(zone.slice(1, 3)) <= 23 && Number(zone.slice(3)) <= 59);
  return month >= 1 && month <= 12 && day >= 1 && day <= new Date(Date.UTC(year, month, 0)).getUTCDate() && hour <= 23 && minute <= 59 && second <= 59 && zoneOk;
}

/**
 * An instant given as a Date or ISO 8601 text with a zone, in milliseconds since the epoch; anything else is a
 * ConfigError naming `what`. Shared by enqueue's runAt and the CLI's --run-at.
 */
export function parseRunAt(value: Date | string, what = 'runAt'): number {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'string' && isCalendarTime(value.trim()) ? Date.parse(value.trim()) : Number.NaN;
  if (!Number.isFinite(ms)) {
    throw new ConfigError(`${what} must be a date and time with a zone, such as 2026-12-01T10:00:00Z, got ${value instanceof Date ? 'an invalid Date' : JSON.stringify(value)}`);
  }
  if (ms < 0 || ms > LAST_RUN_AT_MS) throw new ConfigError(`${what} must lie between 1970 and the year 9999, got ${new Date(ms).toISOString()}`);
  return ms;
}

export function toSqlValue(value: unknown, where = 'a column value'): SqlValue {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (value instanceof Date) return value.toISOString();
  return jsonText(value, where) ?? null;
}

/**
 * A value's JSON text. What JSON.stringify refuses is a ConfigError naming `where` rather than a bare
 * TypeError or RangeError: a cycle or a BigInt inside, or nesting deeper than its recursion has stack for
 * (JSON.parse takes a line of 100,000 nested arrays that JSON.stringify then cannot write back).
 */
export function jsonText(value: unknown, where: string): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (error instanceof RangeError) throw new ConfigError(`${where} is nested too deeply to store as JSON`);
    throw new ConfigError(`${where} is not JSON-serialisable: ${error instanceof Error ? error.message : String(error)}`);
  }
}
