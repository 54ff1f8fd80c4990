// Creates table_a with its host column, in the application's own DDL, prepares it for statusq (leases, and the
// group index on `host`), and inserts N pending rows: `node dist/seed.js 400 [HOST ...]`. Without hosts the
// rows go round a.test, b.test, c.test and the blocked blocked.test; on each host, every tenth URL is a page
// that is gone (404) and every tenth, offset by five, one the site refuses us for legal reasons (451).
import { Queue, connect, migrateTable } from '@statusq/core';
import { TABLE, hostOf } from './table.js';

const url = process.env.DATABASE_URL ?? 'sqlite:./dev.db';
const count = Number(process.argv[2] ?? 100);
if (!Number.isSafeInteger(count) || count < 1) throw new Error(`usage: seed.js ROWS [HOST ...] (ROWS a positive integer), got ${process.argv[2]}`);
const hosts = process.argv.length > 3 ? process.argv.slice(3) : ['a.test', 'b.test', 'c.test', 'blocked.test'];

// HOST_COLUMN=generated: MariaDB or MySQL computes `host` from `url` itself, for a table other programs write
// to (the README says what that costs). statusq's SQLite adapter does not see generated columns yet.
const generated = process.env.HOST_COLUMN === 'generated';
const sqlite = url.startsWith('sqlite:');
if (generated && sqlite) throw new Error('HOST_COLUMN=generated is for MariaDB and MySQL: on SQLite, statusq does not see a generated column yet');
// `host` is NOT NULL: statusq does not limit a row without a group, so a writer that forgot to fill it would
// bypass the per-host limit; the database refuses that row instead.
const HOST = generated ? "host VARCHAR(255) AS (LOWER(SUBSTRING_INDEX(SUBSTRING_INDEX(SUBSTRING_INDEX(url, '/', 3), '/', -1), ':', 1))) STORED" : 'host VARCHAR(255) NOT NULL';
const DDL = sqlite
  ? 'CREATE TABLE IF NOT EXISTS table_a (id INTEGER PRIMARY KEY, date TEXT NOT NULL, url TEXT NOT NULL, host TEXT NOT NULL, status INTEGER NULL)'
  : `CREATE TABLE IF NOT EXISTS table_a (id BIGINT AUTO_INCREMENT PRIMARY KEY, date DATETIME(3) NOT NULL, url VARCHAR(2048) NOT NULL, ${HOST}, status TINYINT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`;

const store = await connect(url);
try {
  await store.execute({ sql: DDL, params: [] });
  // The same as `statusq migrate --table table_a --with leases,groups --group-column host`: claimed_at and
  // worker_id (a crashed worker's rows come back, and count against their host until then), the pending-row
  // index, and the index of processing rows by host that the limit's count reads. No group_key is added.
  await migrateTable(store, { table: TABLE.table, with: ['leases', 'groups'], groupColumn: 'host' });
  const queue = await Queue.open(store, TABLE);
  const start = Date.now() - count * 1000;
  const rows = Array.from({ length: count }, (_, i) => {
    const nth = Math.floor(i / hosts.length) % 10;
    const page = nth === 3 ? `gone/${i}` : nth === 8 ? `legal/${i}` : `page/${i}`;
    const target = `http://${hosts[i % hosts.length]}/${page}`;
    // UTC 'YYYY-MM-DD HH:MM:SS.mmm', which both SQLite's TEXT and MariaDB's DATETIME(3) take as written.
    const row = { date: new Date(start + i * 1000).toISOString().replace('T', ' ').replace('Z', ''), url: target };
    return generated ? row : { ...row, host: hostOf(target) };
  });
  await queue.enqueue(rows, { chunk: 1000 });
  console.info(`table_a: ${count} pending rows added over ${hosts.join(', ')}`);
} finally {
  await store.close();
}
