import pg from 'pg';

/**
 * Type parsers of this store's connections only (pg's global parsers stay untouched): int8 (ids, COUNT(*))
 * becomes a number when it fits, a bigint when it does not; `timestamp without time zone` is read as UTC,
 * which is what the session's time zone says it is; timestamptz in the sessions' own shape is read by hand
 * (parseTimestamptz).
 */
export const INT8_OID = 20;
const TIMESTAMP_OID = 1114;
export function parseInt8(text: string): number | bigint {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : BigInt(text);
}
function parseTimestampUtc(text: string): Date | string {
  const ms = Date.parse(`${text.replace(' ', 'T')}Z`);
  return Number.isNaN(ms) ? text : new Date(ms);
}

const TIMESTAMPTZ_OID = 1184;
const parseTimestamptzAnyShape = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (text: string) => unknown;
const PLUS = 0x2b;
const ZERO = 0x30;

/** The two-digit number at `at`, or -1 where either character is not a digit. */
function twoDigits(text: string, at: number): number {
  const tens = text.charCodeAt(at) - ZERO;
  const ones = text.charCodeAt(at + 1) - ZERO;
  return tens >= 0 && tens <= 9 && ones >= 0 && ones <= 9 ? tens * 10 + ones : -1;
}

/**
 * timestamptz as this store's UTC sessions print it, `YYYY-MM-DD HH:MM:SS[.f to .ffffff]+00`, read by
 * position without a regular expression; any other shape (another offset, BC, infinity, a year before 100
 * or past 9999) goes to pg's own parser (postgres-date). A claimed row of a managed table carries two
 * (the order column and claimed_at), and postgres-date's three regular expressions and their match arrays
 * were about 1.8 us of the worker's CPU per job in a profile of 8 workers x 256 slots. Fractions past
 * milliseconds are cut off, as postgres-date does (it computes `1000 * parseFloat('.570')`, which is
 * 569.99.., and so reads .57 as 569 ms where this reads 570).
 */
export function parseTimestamptz(text: string): unknown {
  const n = text.length;
  if (n < 22 || n > 29 || n === 23 || text.charCodeAt(n - 3) !== PLUS || text.charCodeAt(n - 2) !== ZERO || text.charCodeAt(n - 1) !== ZERO) return parseTimestamptzAnyShape(text);
  if (text[4] !== '-' || text[7] !== '-' || text[10] !== ' ' || text[13] !== ':' || text[16] !== ':' || (n > 22 && text[19] !== '.')) return parseTimestamptzAnyShape(text);
  const century = twoDigits(text, 0);
  const yearInCentury = twoDigits(text, 2);
  const month = twoDigits(text, 5);
  const day = twoDigits(text, 8);
  const hour = twoDigits(text, 11);
  const minute = twoDigits(text, 14);
  const second = twoDigits(text, 17);
  if (century < 1 || yearInCentury < 0 || month < 1 || day < 1 || hour < 0 || minute < 0 || second < 0) return parseTimestamptzAnyShape(text);
  let ms = 0;
  for (let at = 20, scale = 100; at < n - 3; at++, scale /= 10) {
    const digit = text.charCodeAt(at) - ZERO;
    if (digit < 0 || digit > 9) return parseTimestamptzAnyShape(text);
    if (scale >= 1) ms += digit * scale;
  }
  return new Date(Date.UTC(century * 100 + yearInCentury, month - 1, day, hour, minute, second, ms));
}

export const postgresTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (format !== 'binary') {
      if (oid === INT8_OID) return parseInt8;
      if (oid === TIMESTAMP_OID) return parseTimestampUtc;
      if (oid === TIMESTAMPTZ_OID) return parseTimestamptz;
    }
    return (pg.types.getTypeParser as (oid: number, format?: string) => unknown)(oid, format);
  }) as pg.CustomTypesConfig['getTypeParser'],
};
