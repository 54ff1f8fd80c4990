// Works through table_a, the application's own status-only table (id, date, url, status): SQLite in
// development, MariaDB in production, one env var apart. DATABASE_URL picks the database and with it the adapter.
import { createHash } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { connect, Worker, type StopReport } from '@statusq/core';

/** table_a as this application declares it (statusq trusts the type; it does not check it against the table). */
interface TableARow {
  id: number;
  date: Date | string; // MariaDB's DATETIME arrives as a Date, SQLite's TEXT as a string
  url: string;
  status: number | null;
}

/** The business rule: rows of these hosts are abuse (status 2) and never reach the handler. */
const BLOCKED_HOSTS = new Set(['spam.example']);
const workMs = Number(process.env.WORK_MS ?? 0); // stands in for the handler's I/O, to watch a drain

const store = await connect(process.env.DATABASE_URL ?? 'sqlite:./dev.db');
const worker = await Worker.create<TableARow>({
  store,
  table: { table: 'table_a', order: 'newest' },
  isAbuse: (row) => BLOCKED_HOSTS.has(new URL(row.url).hostname),
  handler: async (job, ctx) => {
    const digest = createHash('sha256').update(job.row.url).digest('hex');
    if (workMs > 0) await delay(workMs, undefined, { signal: ctx.signal });
    return digest; // kept only when the table has a result column
  },
  concurrency: 8,
  jobTimeoutMs: 60_000, // aborts ctx.signal and fails (0) an attempt past a minute
  exitWhenEmpty: process.env.EXIT_WHEN_EMPTY === '1',
});
let settled = 0;
const progress = () => ++settled % 500 === 0 && console.info(`settled ${settled}`);
worker.on('completed', progress);
worker.on('abused', progress);
worker.on('failed', ({ job, error }) => console.error(`row ${String(job.id)} failed: ${error}`));

let stopping: Promise<StopReport> | undefined;
const stop = () => (stopping ??= worker.stop(30_000)); // past 30 s, running jobs are aborted and handed back
process.once('SIGTERM', stop).once('SIGINT', stop);
console.info(`working on table_a as ${worker.workerId}`);
try {
  const counters = await worker.run();
  console.info(`stopped: ${counters.completed} done, ${counters.abused} abuse, ${counters.failed} failed`);
  // A handler that ignored its abort may still run while its row is handed to another worker: exit now.
  if ((await stopping)?.abandoned) process.exit(3);
} finally {
  await store.close();
}
