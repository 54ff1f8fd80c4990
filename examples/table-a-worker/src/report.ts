// Prints table_a's rows by status, overall and per URL host, as one JSON line: `node dist/report.js`.
import { DEFAULT_STATUS_CODES, connect, statusName } from '@statusq/core';

const store = await connect(process.env.DATABASE_URL ?? 'sqlite:./dev.db');
try {
  const { rows } = await store.execute({ sql: 'SELECT url, status FROM table_a', params: [] });
  const byStatus: Record<string, number> = {};
  const byHost: Record<string, Record<string, number>> = {};
  for (const row of rows) {
    const status = statusName(row.status === null ? null : Number(row.status), DEFAULT_STATUS_CODES) ?? `other ${String(row.status)}`;
    const host = new URL(String(row.url)).hostname;
    byStatus[status] = (byStatus[status] ?? 0) + 1;
    (byHost[host] ??= {})[status] = (byHost[host][status] ?? 0) + 1;
  }
  console.info(JSON.stringify({ rows: rows.length, byStatus, byHost }));
} finally {
  await store.close();
}
