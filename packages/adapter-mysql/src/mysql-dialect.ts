import { quoteIdentifierWith, type OrderTimeEncoding, type SqlDialect } from '@statusq/core/adapter';

/**
 * statusq's own time columns on MySQL/MariaDB are DATETIME(3), written and compared only with the
 * server's clock (NOW(3)); every pooled connection runs with time_zone '+00:00', so the values are UTC
 * and comparisons do not depend on a worker host's clock or zone. A worker whose clock is skewed cannot
 * reclaim a live lease early: the lease cutoff is NOW(3) minus the lease, computed by the server.
 */
const NOW = 'NOW(3)';

/**
 * The virtual column the key index is built on (mysql-schema.ts): the key while the row is pending or
 * processing, NULL after. One name for every table, so no configuration reaches it.
 */
export const LIVE_KEY_COLUMN = 'statusq_live_key';
const shifted = (ms: string) => `(${NOW} + INTERVAL (${ms}) * 1000 MICROSECOND)`;

export const mysqlDialect: SqlDialect = {
  name: 'mysql',
  quoteIdentifier: quoteIdentifierWith('`'),
  placeholder: () => '?',
  now: NOW,
  nowPlusMs: shifted,
  // From a fixed DATETIME rather than FROM_UNIXTIME, which reads the session's time zone: a caller's own
  // connection (enqueue in the application's transaction) need not run in UTC as the pool's do.
  atEpochMs: (ms) => `(TIMESTAMP '1970-01-01 00:00:00' + INTERVAL (${ms}) * 1000 MICROSECOND)`,
  liveKey: ({ placeholder }) => `${quoteIdentifierWith('`')(LIVE_KEY_COLUMN)} = ${placeholder}`,
  forceIndex: (quotedIndex) => `FORCE INDEX (${quotedIndex})`,
  forUpdate: ' FOR UPDATE',
  // MariaDB has no ON CONFLICT; VALUES(c) is the proposed value there (MySQL 8.0.20 deprecates it, and still takes it).
  upsert: (table) => ({ into: table, existing: table, proposed: (column) => `VALUES(${column})`, clause: (sets) => `ON DUPLICATE KEY UPDATE ${sets}` }),
  orderCutoff(ms: string, encoding: OrderTimeEncoding): string {
    switch (encoding) {
      case 'native':
        return shifted(ms);
      case 'epochMs':
        // UNIX_TIMESTAMP of a DATETIME reads it in the session zone, which is UTC.
        return `(ROUND(UNIX_TIMESTAMP(${NOW}) * 1000) + (${ms}))`;
      case 'text':
        // 'YYYY-MM-DD HH:MM:SS.SSS', the form text dates are kept in, which sorts as text.
        return `LEFT(DATE_FORMAT(${shifted(ms)}, '%Y-%m-%d %H:%i:%s.%f'), 23)`;
    }
  },
};

/** DATETIME/TIMESTAMP hold time natively, numeric types epoch milliseconds, anything else text. */
export function mysqlOrderTimeEncoding(dataType: string): OrderTimeEncoding {
  const t = dataType.toLowerCase();
  if (/^(datetime|timestamp|date)\b/.test(t)) return 'native';
  if (/^(tinyint|smallint|mediumint|int|integer|bigint|decimal|numeric|float|double|real)\b/.test(t)) return 'epochMs';
  return 'text';
}
