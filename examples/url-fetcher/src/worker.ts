// Fetches the URL of each row of table_a, at most GROUP_CONCURRENCY (default 2) requests in flight per host
// across every worker process, wherever it runs: the limit is counted in the table, not in this process.
// DATABASE_URL picks the database; FETCH_VIA=ADDRESS:PORT sends every request to that address instead of the
// URL's host, with the URL's host as the Host header (a proxy, a test server).
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect, Worker, type StopReport } from '@statusq/core';
import { TABLE, type TableARow } from './table.js';

/** The business rule: rows of these hosts are abuse (status 2) and are never fetched. */
const BLOCKED_HOSTS = new Set(['blocked.test']);
/** 0: no per-host limit (to watch what the limit holds back). */
const groupConcurrency = Number(process.env.GROUP_CONCURRENCY ?? 2);
const groupRate = process.env.GROUP_RATE || undefined; // '5/s': at most 5 starts per host per second, fleet-wide
const via = process.env.FETCH_VIA ? new URL(`http://${process.env.FETCH_VIA}`) : null;

/** The response's status code, the body read and dropped; rejects on a network error or an abort. */
function fetchStatus(target: URL, signal: AbortSignal, workerId: string): Promise<number> {
  const options: RequestOptions = {
    host: via?.hostname ?? target.hostname,
    port: via?.port || target.port || undefined,
    path: `${target.pathname}${target.search}`,
    headers: { host: target.host, 'user-agent': `url-fetcher (${workerId})` },
    signal,
    timeout: 20_000,
  };
  const request = target.protocol === 'https:' && via === null ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const sent = request(options, (response: IncomingMessage) => {
      response.on('error', reject).on('end', () => resolve(response.statusCode ?? 0));
      response.resume();
    });
    sent.on('timeout', () => sent.destroy(new Error(`no response from ${target.host} within 20 s`)));
    sent.on('error', reject).end();
  });
}

const store = await connect(process.env.DATABASE_URL ?? 'sqlite:./dev.db');
const worker = await Worker.create<TableARow>({
  store,
  table: TABLE,
  groupConcurrency: groupConcurrency > 0 ? groupConcurrency : undefined,
  groupRate,
  isAbuse: (row) => BLOCKED_HOSTS.has(row.host),
  // The rule: 2xx done (1); 451 (the site refuses us, for legal reasons) abuse (2); any other 4xx failed (0) at
  // once, as asking again gets the same answer; 5xx and network errors fail too, and would be retried on a
  // table with statusq's retry columns (`migrate --with retries`).
  handler: async (job, ctx) => {
    const status = await fetchStatus(new URL(job.row.url), ctx.signal, ctx.workerId);
    if (status >= 200 && status < 300) return status;
    if (status === 451) return ctx.abuse(`HTTP ${status}`);
    if (status >= 400 && status < 500) return ctx.giveUp(`HTTP ${status}`);
    throw new Error(`HTTP ${status}`);
  },
  concurrency: 8,
  jobTimeoutMs: 60_000,
  exitWhenEmpty: process.env.EXIT_WHEN_EMPTY === '1',
});

let stopping: Promise<StopReport> | undefined;
const stop = () => (stopping ??= worker.stop(30_000)); // past 30 s, running fetches are aborted and handed back
process.once('SIGTERM', stop).once('SIGINT', stop);
const limits = [groupConcurrency > 0 && `${groupConcurrency} at once`, groupRate && `${groupRate}`].filter(Boolean).join(', ');
console.info(`fetching table_a's URLs as ${worker.workerId}, per host: ${limits || 'no limit'}`);
try {
  const counters = await worker.run();
  console.info(`stopped: ${counters.completed} done, ${counters.abused} abuse, ${counters.failed} failed`);
  if ((await stopping)?.abandoned) process.exit(3);
} finally {
  await store.close();
}
