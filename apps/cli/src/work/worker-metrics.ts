import type { Store, Worker } from '@statusq/core';
import type { MetricsSettings } from '../args.js';
import type { Logger } from '../log.js';

/** Set by the launcher for its children when it serves --metrics-port: send snapshots over IPC, do not listen. */
export const METRICS_IPC_VARIABLE = 'STATUSQ_METRICS_IPC';

/**
 * The metrics of one `work` process: sent to the launcher under `--processes` when it serves --metrics-port
 * (statusq_queue_rows is the launcher's then: it reads the table once for all its children), else served
 * here. Returns what stops them: after it, the launcher has the last snapshot and the port is closed.
 */
export async function workerMetrics(worker: Worker, store: Store, serve: MetricsSettings | 'launcher' | null, log: Logger, draining: () => boolean): Promise<() => Promise<void>> {
  const toLauncher = serve === 'launcher' && process.env[METRICS_IPC_VARIABLE] === '1';
  if (serve === null || (serve === 'launcher' && !toLauncher)) return async () => {};
  const { WorkerMetrics, announceMetrics, kindRowsGauge, observeWorker, refreshQueueRows, sendSnapshotsToLauncher, serveMetrics } = await import('../metrics.js');
  const registry = new WorkerMetrics();
  observeWorker(worker, registry, worker.queue.table.table);
  if (serve === 'launcher') return sendSnapshotsToLauncher(registry.registry);
  const server = await serveMetrics(serve, registry.registry, { draining, ping: () => store.execute({ sql: 'SELECT 1', params: [] }) });
  const kindRows = worker.queue.table.features.kinds ? kindRowsGauge(registry.registry) : null;
  const stopRefresh = refreshQueueRows(worker.queue, registry.queueRows, worker.queue.table.table, log, undefined, kindRows);
  announceMetrics(log, serve, server.port);
  return async () => {
    stopRefresh();
    await server.close();
  };
}
