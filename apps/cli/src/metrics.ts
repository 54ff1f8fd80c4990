// `statusq work --metrics-port`: Prometheus metrics of the worker, and the health probes Kubernetes asks.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { ConfigError, type Job, type Queue, type Worker } from '@statusq/core';
import { DEFAULT_COUNT_UP_TO, DEFAULT_EXACT_BELOW_ROWS, raceDeadline } from '@statusq/core/tools';
import type { MetricsSettings } from './args.js';
import { errorFields, type Logger } from './log.js';

/** How often statusq_queue_rows is read from the table (one GROUP BY per interval, never per scrape). */
export const QUEUE_ROWS_INTERVAL_MS = 15_000;
const thousands = (n: number) => n.toLocaleString('en-US');
/** Which values are estimates; the README's Metrics section says the same. */
const QUEUE_ROWS_HELP =
  `Rows of the table by status, read every ${QUEUE_ROWS_INTERVAL_MS / 1000} s. pending and processing are exact up to ${thousands(DEFAULT_COUNT_UP_TO)} each; ` +
  `on a table past ${thousands(DEFAULT_EXACT_BELOW_ROWS)} rows done, abuse, failed and other are the planner's estimates where the store can read them, unless an index serves their count.`;
const KIND_ROWS_HELP =
  `Pending and processing rows of each kind, on a table with a kind column, read every ${QUEUE_ROWS_INTERVAL_MS / 1000} s with statusq_queue_rows; rows without a kind under kind="". ` +
  'A kind whose pending rows grow while none is processing has no worker with a handler for it.';

/**
 * statusq_queue_kind_rows in `registry`: made only for a table with a kind column, so the exposition of any other
 * table stays what it was (not even its HELP line).
 */
export function kindRowsGauge(registry: Registry): Gauge {
  return new Gauge({ name: 'statusq_queue_kind_rows', help: KIND_ROWS_HELP, labelNames: ['table', 'kind', 'status'], registers: [registry] });
}

/** How long /readyz waits for the database before it answers 503. */
export const READY_DEADLINE_MS = 2_000;
/** How often a worker process under `--processes` sends its registry to the launcher. */
export const SNAPSHOT_INTERVAL_MS = 1_000;

// Job durations run from a millisecond no-op to a many-minute handler; claims are round trips.
const JOB_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const CLAIM_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const ROW_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];

/** The registry of one `work` process and the metrics its worker events feed. */
export class WorkerMetrics {
  readonly registry = new Registry();
  readonly jobs = new Counter({ name: 'statusq_jobs_total', help: 'Jobs settled by this worker, by outcome (lost: another worker owns the job now; its outcome was dropped).', labelNames: ['table', 'outcome'], registers: [this.registry] });
  readonly jobDuration = new Histogram({ name: 'statusq_job_duration_seconds', help: 'How long the abuse rule and the handler ran, by outcome.', labelNames: ['table', 'outcome'], buckets: JOB_BUCKETS, registers: [this.registry] });
  readonly claimDuration = new Histogram({ name: 'statusq_claim_duration_seconds', help: 'How long a claim that took rows took, its retries included.', labelNames: ['table'], buckets: CLAIM_BUCKETS, registers: [this.registry] });
  readonly claimRows = new Histogram({ name: 'statusq_claim_rows', help: 'Rows per claim that took any (empty polls are not counted).', labelNames: ['table'], buckets: ROW_BUCKETS, registers: [this.registry] });
  readonly queueRows = new Gauge({ name: 'statusq_queue_rows', help: QUEUE_ROWS_HELP, labelNames: ['table', 'status'], registers: [this.registry] });
  readonly reaped = new Counter({ name: 'statusq_lease_reaped_total', help: 'Rows whose lease expired, put back to pending by this worker.', labelNames: ['table'], registers: [this.registry] });
  readonly restarts = new Counter({ name: 'statusq_worker_restarts_total', help: 'Worker processes restarted by the supervisor (--processes).', registers: [this.registry] });
  /** Set by observeWorker: the table and the worker's live count of claimed, unsettled jobs. */
  inFlightOf: { table: string; count: () => number } | null = null;
  readonly inFlight = new Gauge({
    name: 'statusq_jobs_in_flight',
    help: 'Jobs claimed and not yet settled.',
    labelNames: ['table'],
    registers: [this.registry],
    collect: () => {
      if (this.inFlightOf) this.inFlight.set({ table: this.inFlightOf.table }, this.inFlightOf.count());
    },
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }
}

/** The registry of one `statusq relay` process. */
export class RelayMetrics {
  readonly registry = new Registry();
  readonly published = new Counter({ name: 'statusq_relay_published_total', help: 'Messages the broker confirmed, one per row dispatched.', labelNames: ['table'], registers: [this.registry] });
  readonly publishFailures = new Counter({ name: 'statusq_relay_publish_failures_total', help: 'Batches the broker refused or did not confirm (their rows are published again at the next pass).', labelNames: ['table'], registers: [this.registry] });
  readonly batchDuration = new Histogram({ name: 'statusq_relay_batch_duration_seconds', help: 'From the SELECT of a batch to its last confirm.', labelNames: ['table'], buckets: CLAIM_BUCKETS, registers: [this.registry] });
  readonly waiting = new Gauge({ name: 'statusq_relay_dispatched_rows', help: `Pending rows published and not claimed since (waiting in the broker), read every ${QUEUE_ROWS_INTERVAL_MS / 1000} s.`, labelNames: ['table'], registers: [this.registry] });

  constructor(table: string) {
    collectDefaultMetrics({ register: this.registry });
    this.published.inc({ table }, 0);
    this.publishFailures.inc({ table }, 0);
  }
}

/** Feeds `metrics` from a worker's events; the in-flight gauge is read from the worker at each scrape. */
export function observeWorker(worker: Worker, metrics: WorkerMetrics, table: string): void {
  const settled = (outcome: string) => (e: { job: Job; durationMs: number }) => {
    metrics.jobs.inc({ table, outcome });
    metrics.jobDuration.observe({ table, outcome }, e.durationMs / 1000);
  };
  worker.on('completed', settled('done'));
  worker.on('failed', settled('failed'));
  worker.on('abused', settled('abuse'));
  worker.on('retried', settled('retried'));
  worker.on('claim-lost', () => metrics.jobs.inc({ table, outcome: 'lost' }));
  worker.on('reaped', (e) => metrics.reaped.inc({ table }, e.count));
  worker.on('claimed', (e) => {
    if (e.jobs.length === 0) return;
    metrics.claimDuration.observe({ table }, e.durationMs / 1000);
    metrics.claimRows.observe({ table }, e.jobs.length);
  });
  // The outcome series exist from the start at 0, so rate() and absent() work before the first job settles.
  for (const outcome of ['done', 'failed', 'abuse', 'retried', 'lost']) metrics.jobs.inc({ table, outcome }, 0);
  metrics.reaped.inc({ table }, 0);
  metrics.inFlightOf = { table, count: () => worker.activeJobs };
}

/**
 * Refreshes statusq_queue_rows from Queue.monitoringCounts() now and then every interval until the returned
 * stop is called, never overlapping itself. On a table of millions of finished rows an exact GROUP BY reads
 * all of them (110-125 ms a million, measured on two adapters' servers); monitoringCounts counts pending and
 * processing and takes the finished statuses from the planner's estimate where no index serves their count.
 * On a table with kinds, `kindRows` (statusq_queue_kind_rows) too, from Queue.liveCountsByKind: the live rows
 * only, which the kind index holds, so it costs what the pending and processing counts cost. A kind whose rows
 * are all gone reads 0 rather than vanishing, so an alert on it resolves.
 */
export function refreshQueueRows(queue: Pick<Queue, 'monitoringCounts' | 'liveCountsByKind'>, gauge: Gauge, table: string, log: Logger, intervalMs = QUEUE_ROWS_INTERVAL_MS, kindRows: Gauge | null = null): () => void {
  let running: Promise<void> | null = null;
  const kindsSeen = new Set<string>();
  const refresh = () => {
    running ??= queue
      .monitoringCounts()
      .then(async ({ counts }) => {
        for (const [status, n] of Object.entries(counts)) gauge.set({ table, status }, n);
        if (!kindRows) return;
        const byKind = (await queue.liveCountsByKind()) ?? {};
        for (const kind of Object.keys(byKind)) kindsSeen.add(kind);
        for (const kind of kindsSeen) {
          const live = byKind[kind] ?? { pending: 0, processing: 0 };
          for (const [status, n] of Object.entries(live)) kindRows.set({ table, kind, status }, n);
        }
      })
      .catch((error: unknown) => log.debug({ err: errorFields(error) }, 'statusq_queue_rows: counting rows failed; the gauge keeps its last values'))
      .finally(() => (running = null));
  };
  refresh();
  const timer = setInterval(refresh, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

export interface ProbeState {
  /** True once the process drains or stops: /readyz then says 503, so no new traffic is sent its way. */
  draining(): boolean;
  /** One round trip to the database (or, in the launcher, a check that a worker process is up); rejects if not ready. */
  ping(): Promise<unknown>;
  /** What /readyz says before the reason when ping rejects. Default: `database unavailable`. */
  unready?: string;
}

/** What /metrics serves: a Registry, or the launcher's merge of its children's. */
export interface Exposition {
  metrics(): Promise<string>;
  readonly contentType: string;
}

/** The log line that names where the metrics are served (the port chosen, when 0 was asked). */
export function announceMetrics(log: Logger, settings: MetricsSettings, port: number): void {
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  log.info({ metricsHost: settings.host, metricsPort: port }, `metrics on http://${host}:${port}/metrics (and /healthz, /readyz)`);
}

export interface MetricsServer {
  /** The address it listens on (the port chosen when 0 was asked). */
  readonly port: number;
  close(): Promise<void>;
}

/** Serves /metrics, /healthz and /readyz; every other path is 404. */
export async function serveMetrics(settings: MetricsSettings, registry: Exposition, probes: ProbeState): Promise<MetricsServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    const reply = (status: number, body: string, type = 'text/plain; charset=utf-8') => {
      response.writeHead(status, { 'content-type': type });
      response.end(body);
    };
    if (request.method !== 'GET' && request.method !== 'HEAD') return reply(405, 'method not allowed\n');
    if (path === '/healthz') return reply(200, 'ok\n');
    if (path === '/readyz') {
      if (probes.draining()) return reply(503, 'draining\n');
      raceDeadline(probes.ping(), READY_DEADLINE_MS, () => new Error(`the database did not answer within ${READY_DEADLINE_MS} ms`)).then(
        () => reply(probes.draining() ? 503 : 200, probes.draining() ? 'draining\n' : 'ok\n'),
        (error: unknown) => reply(503, `${probes.unready ?? 'database unavailable'}: ${error instanceof Error ? error.message : String(error)}\n`),
      );
      return;
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => reply(200, text, registry.contentType),
        (error: unknown) => reply(500, `${error instanceof Error ? error.message : String(error)}\n`),
      );
      return;
    }
    reply(404, 'not found: /metrics, /healthz or /readyz\n');
  });
  // Scrapers keep connections alive; those must not hold the process open once the worker is done.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => reject(new ConfigError(`--metrics-port: cannot listen on ${settings.host}:${settings.port}: ${error.code ?? error.message}`)));
    server.listen(settings.port, settings.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

type Snapshot = MetricObjectWithValues<MetricValue<string>>[];

/** The IPC message a worker process sends its launcher; `statusq` tells it from any other message. */
interface SnapshotMessage {
  statusq: 'metrics';
  snapshot: Snapshot;
}

function isSnapshotMessage(message: unknown): message is SnapshotMessage {
  return typeof message === 'object' && message !== null && (message as SnapshotMessage).statusq === 'metrics' && Array.isArray((message as SnapshotMessage).snapshot);
}

/**
 * A worker process under `--processes` sends its registry to the launcher over the IPC channel every
 * interval (children never listen on the port). The returned function stops the timer and sends the final
 * snapshot, resolving once it is written, so the launcher's totals include the last jobs of a clean exit.
 */
export function sendSnapshotsToLauncher(registry: Registry, intervalMs = SNAPSHOT_INTERVAL_MS): () => Promise<void> {
  const send = async () => {
    const snapshot = await registry.getMetricsAsJSON();
    if (!process.send || !process.connected) return;
    const message: SnapshotMessage = { statusq: 'metrics', snapshot };
    // The callback form: a launcher gone away is an error passed here, not an 'error' event that throws.
    await new Promise<void>((resolve) => process.send!(message, undefined, {}, () => resolve()));
  };
  let sending: Promise<void> | null = null;
  const tick = () => (sending ??= send().finally(() => (sending = null)));
  void tick();
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await sending;
    await send();
  };
}

/**
 * The launcher's metrics under `--processes`: the last snapshot of every live child, merged with
 * prom-client's AggregatorRegistry (counters and histograms summed, and so is statusq_jobs_in_flight),
 * plus its own statusq_worker_restarts_total and statusq_queue_rows. A child that dies keeps its last
 * counters and histograms in the totals (its gauges go), so no counter ever goes backwards on a restart.
 */
export class LauncherMetrics {
  readonly registry = new Registry();
  readonly restarts = new Counter({ name: 'statusq_worker_restarts_total', help: 'Worker processes restarted by the supervisor (--processes).', registers: [this.registry] });
  readonly queueRows: Gauge;
  /** Children running now, by pid, with their last snapshot once they sent one. */
  private readonly running = new Set<number>();
  private readonly live = new Map<number, Snapshot>();
  /** Counters and histograms of children that ended, folded into one snapshot now and then. */
  private retired: Snapshot[] = [];
  private folding = false;

  constructor(readonly table: string) {
    // The child's own statusq_queue_rows is never set under the launcher: summed over P children it would be P times the table.
    this.queueRows = new Gauge({ name: 'statusq_queue_rows', help: QUEUE_ROWS_HELP, labelNames: ['table', 'status'], registers: [this.registry] });
    this.restarts.inc(0);
  }

  /** A supervisor 'message' event: a snapshot replaces the child's previous one; other messages are not ours. */
  received(pid: number, message: unknown): void {
    // A message late past its child's exit must not bring back a child that is gone.
    if (isSnapshotMessage(message) && this.running.has(pid)) this.live.set(pid, message.snapshot);
  }

  started(pid: number): void {
    this.running.add(pid);
  }

  /** The child ended: its last counters and histograms stay in the totals. */
  exited(pid: number): void {
    const last = this.live.get(pid);
    this.running.delete(pid);
    this.live.delete(pid);
    if (!last) return;
    // prom-client's typings call `type` an enum; at run time it is the exposition's word ('counter', ...).
    this.retired.push(last.filter((metric) => ['counter', 'histogram'].includes(metric.type as unknown as string)));
    void this.fold();
  }

  /** Children that are running and have reported (their worker is created, so their table and database answered). */
  get childrenUp(): number {
    return this.live.size;
  }

  /** The merged exposition, built at each scrape from the snapshots at hand. */
  readonly exposition: Exposition = {
    contentType: this.registry.contentType,
    metrics: async () => (await this.merged()).metrics(),
  };

  /**
   * statusq_jobs_total by outcome, merged as /metrics serves it. The launcher logs it as it ends: a run of
   * `--exit-when-empty` shorter than a scrape interval is over before any scraper saw its last counts.
   */
  async jobTotals(): Promise<Record<string, number>> {
    const jobs = (await (await this.merged()).getMetricsAsJSON()).find((metric) => metric.name === 'statusq_jobs_total');
    const totals: Record<string, number> = {};
    for (const value of jobs?.values ?? []) totals[String(value.labels.outcome)] = (totals[String(value.labels.outcome)] ?? 0) + value.value;
    return totals;
  }

  private async merged(): Promise<Registry> {
    return AggregatorRegistry.aggregate([await this.registry.getMetricsAsJSON(), ...this.retired, ...this.live.values()]);
  }

  /** A crash-looping child would otherwise keep one snapshot per death for the launcher's lifetime. */
  private async fold(): Promise<void> {
    if (this.folding || this.retired.length < 2) return;
    this.folding = true;
    try {
      const taken = this.retired.slice();
      const merged = await AggregatorRegistry.aggregate(taken).getMetricsAsJSON();
      // Snapshots retired while merging were appended after the taken ones.
      this.retired = [merged, ...this.retired.slice(taken.length)];
    } finally {
      this.folding = false;
    }
    await this.fold();
  }
}
