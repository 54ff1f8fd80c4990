// Creates table_a, the application's own table in its own DDL (statusq adds nothing to it but the index that
// serves the claim), and inserts N pending rows: `node dist/seed.js 500`. Every tenth row is on a blocked host.
import { Queue, connect, migrateTable } from '@statusq/core';

const url = process.env.DATABASE_URL ?? 'sqlite:./dev.db';
const count = Number(process.argv[2] ?? 100);
if (!Number.isSafeInteger(count) || count < 1) throw new Error(`usage: seed.js ROWS (a positive integer), got ${process.argv[2]}`);

// The application's DDL: the same four columns in each database's types; status NULL means pending.
const DDL = url.startsWith('sqlite:')
  ? 'CREATE TABLE IF NOT EXISTS table_a (id INTEGER PRIMARY KEY, date TEXT NOT NULL, url TEXT NOT NULL, status INTEGER NULL)'
  : 'CREATE TABLE IF NOT EXISTS table_a (id BIGINT AUTO_INCREMENT PRIMARY KEY, date DATETIME(3) NOT NULL, url VARCHAR(2048) NOT NULL, status TINYINT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4';

const store = await connect(url);
try {
  await store.execute({ sql: DDL, params: [] });
  // Only the pending-row index: no optional column, so the table stays status-only.
  await migrateTable(store, { table: 'table_a' });
  const queue = await Queue.open(store, { table: 'table_a' });
  const start = Date.now() - count * 1000;
  const rows = Array.from({ length: count }, (_, i) => ({
    // UTC 'YYYY-MM-DD HH:MM:SS.mmm', which both SQLite's TEXT and MariaDB's DATETIME(3) take as written.
    date: new Date(start + i * 1000).toISOString().replace('T', ' ').replace('Z', ''),
    url: i % 10 === 9 ? `https://spam.example/offer/${i}` : `https://site-${i % 7}.example/page/${i}`,
  }));
  await queue.enqueue(rows, { chunk: 1000 });
  console.info(`table_a: ${count} pending rows added`);
} finally {
  await store.close();
}
