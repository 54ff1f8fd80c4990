import { quoteIdentifierWith, type OrderTimeEncoding, type SqlDialect } from '@statusq/core/adapter';

/**
 * statusq's own time columns on SQLite hold integer epoch milliseconds: they sort and compare as numbers,
 * need no parsing, and `julianday('now')` carries millisecond precision.
 */
const NOW_MS = `CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)`;

export const sqliteDialect: SqlDialect = {
  name: 'sqlite',
  quoteIdentifier: quoteIdentifierWith('"'),
  placeholder: () => '?',
  now: NOW_MS,
  nowPlusMs: (ms) => `(${NOW_MS} + ${ms})`,
  atEpochMs: (ms) => `CAST(${ms} AS INTEGER)`,
  orderCutoff(ms: string, encoding: OrderTimeEncoding): string {
    // An application's date column is either a number (epoch ms) or SQLite's own text format
    // 'YYYY-MM-DD HH:MM:SS[.SSS]', which sorts as text; the cutoff is built in the same form.
    if (encoding === 'text') return `strftime('%Y-%m-%d %H:%M:%f', 'now', (${ms} / 1000.0) || ' seconds')`;
    return `(${NOW_MS} + ${ms})`;
  },
};

/** Numeric declared types (SQLite's INTEGER, REAL and NUMERIC affinities) hold epoch ms; the rest text. */
export function sqliteOrderTimeEncoding(declaredType: string): OrderTimeEncoding {
  return /INT|REAL|FLOA|DOUB|NUM|DEC/i.test(declaredType) && !/DATE|TIME/i.test(declaredType) ? 'epochMs' : 'text';
}

/**
 * Whether a status column keeps statusq's integer codes as integers: INTEGER affinity (a declared type
 * containing INT), or no declared type at all, where a value is stored as it was bound. TEXT affinity would
 * store '9', and REAL/NUMERIC columns are refused as on the other dialects.
 */
export function sqliteHoldsIntegers(declaredType: string): boolean {
  return declaredType.trim() === '' || /INT/i.test(declaredType);
}
