// What `statusq work` logs about its worker and its worker processes, and at which level.
import { isReadOnlyError, isRetryableStoreError, type Job, type SupervisorEvent, type Worker, type WorkerCounters } from '@statusq/core';
import { errorFields, type Logger } from './log.js';
import { clip } from './text.js';

/**
 * After this long without a database error, the next one starts a new outage (one more warn line) even if
 * no job event said the database was back: an idle queue produces no such event.
 */
const OUTAGE_QUIET_MS = 60_000;

/**
 * Subscribes `log` to a worker's events. Per-job lines for done and abuse are debug: at the tens of
 * thousands of jobs per second a no-op handler reaches, a line each would cost more than the job; they are
 * not even subscribed below debug. Retries warn, failures (given up) are errors with the bounded stack.
 */
export function logWorkerEvents(worker: Worker, log: Logger, table: string): void {
  const job = (j: Job, durationMs: number, outcome: string) => ({ table, jobId: typeof j.id === 'number' ? j.id : clip(String(j.id), 100), attempt: j.attempt, durationMs: Math.round(durationMs * 100) / 100, outcome });
  const outage = new OutageLog(log);
  if (log.isLevelEnabled('debug')) {
    worker.on('completed', (e) => log.debug(job(e.job, e.durationMs, 'done'), 'job done'));
    worker.on('abused', (e) => log.debug({ ...job(e.job, e.durationMs, 'abuse'), reason: clip(e.reason) }, 'job abuse'));
    // The row is fine and runs; only its link to the enqueuer's trace is lost.
    worker.on('trace-context-ignored', (e) =>
      log.debug({ table, jobId: typeof e.job.id === 'number' ? e.job.id : clip(String(e.job.id), 100), attempt: e.job.attempt }, `trace_context ignored: ${e.reason}`),
    );
  }
  worker.on('retried', (e) => {
    outage.answered();
    log.warn({ ...job(e.job, e.durationMs, 'retry'), delayMs: e.delayMs, err: errorFields(e.cause, e.error) }, `job attempt failed; retry in ${e.delayMs} ms: ${clip(e.error)}`);
  });
  worker.on('failed', (e) => {
    outage.answered();
    log.error({ ...job(e.job, e.durationMs, 'failed'), err: errorFields(e.cause, e.error) }, `job failed: ${clip(e.error)}`);
  });
  worker.on('claimed', () => outage.answered());
  worker.on('claim-lost', (e) =>
    log.warn(
      { table, jobId: typeof e.job.id === 'number' ? e.job.id : clip(String(e.job.id), 100), attempt: e.job.attempt, outcome: 'claim-lost', during: e.during },
      `claim lost during ${e.during}: another worker owns the job now (lease taken over, or settled elsewhere); this worker's outcome is dropped`,
    ),
  );
  // A cancel is the operator's decision, not a fault: info, with the reason the handler's signal aborted with.
  worker.on('cancelled', (e) =>
    log.info({ table, jobId: typeof e.job.id === 'number' ? e.job.id : clip(String(e.job.id), 100), attempt: e.job.attempt, outcome: 'cancelled' }, `job ${e.reason}: its handler's signal aborted; the row stays failed`),
  );
  worker.on('reaped', (e) => {
    const back = e.count - e.givenUp.length;
    log.warn({ table, reaped: e.count }, `reaped ${e.count} row${e.count === 1 ? '' : 's'} whose lease expired (their worker stopped renewing it): ${back} back to pending`);
    // A row that used its attempts this way most likely kills or stalls its worker: each gets a line of its own.
    for (const row of e.givenUp) log.error({ table, jobId: typeof row.id === 'number' ? row.id : clip(String(row.id), 100), attempt: row.attempt, outcome: 'failed' }, `job failed: ${clip(row.error)}; it used its attempts, each ending with its worker lost`);
  });
  // A read-only database: one warn line when the wait starts, one info line when writes work again; the
  // refusals in between (heartbeats, reaps, hand-backs) are debug.
  worker.on('read-only', (e) =>
    log.warn(
      { during: e.during, waitMs: e.waitMs, err: errorFields(e.error) },
      `database is read-only (a replica, or a failover in progress): waiting up to ${formatSeconds(e.waitMs)} for it to take writes again ` +
        `(claims stopped, settles kept); check that --db points at the primary / writer endpoint: ${clip(e.error instanceof Error ? e.error.message : String(e.error))}`,
    ),
  );
  worker.on('writable', (e) => log.info({ readOnlySeconds: Math.round(e.durationMs / 100) / 10 }, `database writable again after ${formatSeconds(e.durationMs)}`));
  worker.on('error', (e) => {
    if (isReadOnlyError(e.error)) log.debug({ during: e.during, err: errorFields(e.error) }, `${e.during}: ${clip(e.error.message)}`);
    else if (isRetryableStoreError(e.error)) outage.failed(e.error, e.during);
    else log.error({ during: e.during, err: errorFields(e.error) }, `${e.during}: ${clip(e.error instanceof Error ? e.error.message : String(e.error))}`);
  });
}

/**
 * A database outage as one warn line when it starts and one info line when a job event shows the database
 * answering again; the failed calls in between (every claim and settle retry) are debug.
 */
class OutageLog {
  private since: number | null = null;
  private last = 0;
  private errors = 0;

  constructor(private readonly log: Logger) {}

  failed(error: unknown, during: string): void {
    const now = Date.now();
    const message = clip(error instanceof Error ? error.message : String(error));
    if (this.since === null || now - this.last > OUTAGE_QUIET_MS) {
      this.since = now;
      this.errors = 0;
      this.log.warn({ during, err: errorFields(error) }, `database unavailable (${during}): ${message}; retrying, further errors of this outage are logged at debug`);
    } else this.log.debug({ during, err: errorFields(error) }, `${during}: ${message}`);
    this.errors++;
    this.last = now;
  }

  answered(): void {
    if (this.since === null) return;
    const seconds = (Date.now() - this.since) / 1000;
    this.log.info({ outageSeconds: seconds, errors: this.errors }, `database answering again after ${seconds.toFixed(1)} s (${this.errors} failed call${this.errors === 1 ? '' : 's'})`);
    this.since = null;
  }
}

function formatSeconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)} s`;
}

/** The stop summary: the line an operator reads first, so its message holds the numbers too. */
export function logSummary(log: Logger, counters: WorkerCounters, seconds: number, reason: string): void {
  const c = counters;
  const settled = c.completed + c.failed + c.abused;
  const jobsPerSec = seconds > 0 ? Math.round(settled / seconds) : settled;
  log.info(
    { reason, seconds: Math.round(seconds * 1000) / 1000, jobsPerSec, counters: c },
    `worked ${settled} job${settled === 1 ? '' : 's'} in ${seconds.toFixed(1)} s (${jobsPerSec} jobs/s): ` +
      `done ${c.completed}, failed ${c.failed}, abuse ${c.abused}, retried ${c.retried}, candidates lost ${c.candidatesLost}, claims taken over ${c.claimLost}`,
  );
}

/** The launcher's view of its worker processes: starts at info, crashes and restarts warn, giving up an error. */
export function logSupervisorEvent(log: Logger, event: SupervisorEvent): void {
  switch (event.type) {
    case 'started':
      log.info({ slot: event.slot + 1, child: event.pid, restart: event.restart }, `worker process ${event.pid} started in slot ${event.slot + 1}`);
      break;
    case 'exited': {
      const fields = { slot: event.slot + 1, child: event.pid, code: event.code, signal: event.signal, uptimeMs: event.uptimeMs };
      const how = event.signal ? `killed by ${event.signal}` : `exited with code ${event.code}`;
      if (event.code === 0) log.info(fields, `worker process ${event.pid} exited`);
      else log.warn(fields, `worker process ${event.pid} ${how}`);
      break;
    }
    case 'restarting':
      log.warn({ slot: event.slot + 1, delayMs: event.delayMs }, `restarting worker process ${event.slot + 1} in ${event.delayMs} ms`);
      break;
    case 'draining':
      log.info({ signal: event.signal }, `${event.signal}: draining the worker processes`);
      break;
    case 'gave-up':
      log.error({}, event.reason);
      break;
  }
}
