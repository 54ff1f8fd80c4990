import type { SchemaSupport } from '@statusq/core/adapter';
import { knexStatements } from '@statusq/schema';
import { LIVE_KEY_COLUMN } from './mysql-dialect.js';

const statements = knexStatements({
  client: 'mysql2',
  kinds: {
    // DATETIME(3), not TIMESTAMP: no 2038 limit, no implicit zone conversion (statusq's sessions are UTC).
    time: (t, name) => t.datetime(name, { precision: 3 }),
    // Any JSON text: LONGTEXT (TEXT stops at 64 KB), not JSON, which would re-serialise it (MySQL reorders
    // keys). An error message stays TEXT: MAX_ERROR_LENGTH characters take at most 6000 bytes in utf8mb4,
    // and TEXT holds 65535.
    longText: (t, name) => t.text(name, 'longtext'),
  },
  nowDefault: 'CURRENT_TIMESTAMP(3)',
  // MySQL/MariaDB have no partial indexes; InnoDB serves `status IS NULL ORDER BY date` from (status, date)
  // (checked with EXPLAIN in the adapter's tests, with many finished rows present).
  pendingIndex: 'composite',
  /**
   * No partial indexes: an invisible virtual column holds the key while the row is pending or processing and NULL
   * after (it takes no space, and the application's SELECT * does not see it), and a unique index on it refuses a
   * second live key (checked on MariaDB 10.11: a settled key frees the value, NULLs
   * repeat, the lookup is a const read of the index). Binary collation, so keys compare exactly as they do on
   * PostgreSQL and SQLite ('Key' and 'key' are two keys; the table's default collation would make them one).
   */
  keyIndex: { kind: 'generatedColumn', column: LIVE_KEY_COLUMN, type: 'VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin' },
  /**
   * A table statusq creates is InnoDB (row locks, transactions, SKIP LOCKED: MyISAM or MEMORY would make
   * the claim unsafe) and utf8mb4 (payloads are JSON text of any language), whatever the server's or the
   * database's defaults are (MariaDB before 11.6 defaults to latin1).
   */
  tableOptions(t) {
    t.engine('InnoDB');
    t.charset('utf8mb4');
  },
});

/** `initTable` / `migrateTable` on MySQL and MariaDB. */
export const mysqlSchema: SchemaSupport = {
  ...statements,
  indexNames: (schema, name) => ({
    sql: 'SELECT DISTINCT INDEX_NAME AS name FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?',
    params: [schema, name],
  }),
};
