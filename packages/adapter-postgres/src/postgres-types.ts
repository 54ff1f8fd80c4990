import pg from 'pg';

/**
 * Type parsers of this store's connections only (pg's global parsers stay untouched): int8 (ids, COUNT(*))
 * becomes a number when it fits, a bigint when it does not; `timestamp without time zone` is read as UTC,
 * which is what the session's time zone says it is.
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
export const postgresTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (format !== 'binary') {
      if (oid === INT8_OID) return parseInt8;
      if (oid === TIMESTAMP_OID) return parseTimestampUtc;
    }
    return (pg.types.getTypeParser as (oid: number, format?: string) => unknown)(oid, format);
  }) as pg.CustomTypesConfig['getTypeParser'],
};
