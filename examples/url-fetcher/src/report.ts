// Prints table_a's rows by status, overall and per host, as one JSON line: `node dist/report.js`. With --rows,
// every row's URL and status name too.
import { DEFAULT_STATUS_CODES, connect, statusName } from '@statusq/core';

const store = await connect(process.env.DATABASE_URL ?? 'sqlite:./dev.db');
try {
  const { rows } = await store.execute({ sql: 'SELECT url, host, status FROM table_a ORDER BY id', params: [] });
  const byStatus: Record<string, number> = {};
  const byHost: Record<string, Record<string, number>> = {};
  const named = rows.map((row) => {
    const status = statusName(row.status === null ? null : Number(row.status), DEFAULT_STATUS_CODES) ?? `other ${String(row.status)}`;
    const host = String(row.host);
    byStatus[status] = (byStatus[status] ?? 0) + 1;
    (byHost[host] ??= {})[status] = (byHost[host][status] ?? 0) + 1;
    return [String(row.url), status];
  });
  console.info(JSON.stringify({ rows: rows.length, byStatus, byHost, ...(process.argv.includes('--rows') && { urls: named }) }));
} finally {
  await store.close();
}
