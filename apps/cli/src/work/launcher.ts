import { writeSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Queue, Supervisor, type SupervisorEvent, type TableConfig, type Worker } from '@statusq/core';
import { EXIT, STOP_MARGIN_MS, type DeadWorkerReport } from '@statusq/core/tools';
import type { MetricsSettings } from '../args.js';
import { openStore } from '../adapters.js';
import { errorFields, type Logger } from '../log.js';
import { logSupervisorEvent } from '../log-events.js';
import type { MetricsServer } from '../metrics.js';
import type { Io } from '../with-store.js';

/**
 * `work --processes P`: runs P copies of this same command (without --processes) under the Supervisor.
 * Children drain within --stop-timeout; the launcher waits that long plus a margin before killing them.
 */
export async function supervise(args: string[], processes: number, stopTimeoutMs: number, env: NodeJS.ProcessEnv, io: Io, log: Logger, recovery: RecoveryTarget, lostSlot: AbortSignal | undefined, observe: (event: SupervisorEvent) => void): Promise<number> {
  const recoveries = new Set<Promise<void>>();
  const supervisor = new Supervisor(
    // Children exit by themselves within the stop timeout plus their margin; the launcher kills only past that.
    { processes, modulePath: fileURLToPath(new URL('../bin.js', import.meta.url)), args, env, gracePeriodMs: stopTimeoutMs + STOP_MARGIN_MS + 5_000 },
    (event) => {
      observe(event);
      if (event.type === 'message') return;
      // The signal handler below already said it drains.
      if (event.type !== 'draining') logSupervisorEvent(log, event);
      if (event.type === 'exited' && event.code !== 0 && (event.signal !== null || !CLEAN_EXITS.has(event.code ?? -1))) {
        const how = event.signal ? `killed by ${event.signal}` : `exited with code ${event.code}`;
        const done = recoverDeadWorker(recovery, event.pid, how, event.report, log).finally(() => recoveries.delete(done));
        recoveries.add(done);
      }
    },
  );
  let signals = 0;
  const unregister = io.onSignal((signal) => {
    signals++;
    if (signals === 1) log.info({ signal }, `${signal}: draining ${processes} worker processes (up to ${stopTimeoutMs} ms); send again to stop at once`);
    else log.warn({ signal }, `${signal} again: killing worker processes; their claims return to the queue by lease or requeue`);
    supervisor.stop(signal);
  });
  lostSlot?.addEventListener('abort', () => supervisor.stop('SIGTERM'), { once: true });
  try {
    const code = await supervisor.run();
    while (recoveries.size > 0) await Promise.all(recoveries);
    log.info({ exitCode: code }, `worker processes ended; exiting with code ${code}`);
    return code;
  } finally {
    unregister();
  }
}

/**
 * The launcher's --metrics-port: it serves its children's merged snapshots, counts their restarts, and reads
 * statusq_queue_rows itself with its own connection (one GROUP BY per interval whatever the number of
 * children, and no child's restart leaves the gauge unset). Ready while not draining and a child is up.
 */
export async function serveLauncherMetrics(settings: MetricsSettings, target: RecoveryTarget, log: Logger): Promise<{ observe: (event: SupervisorEvent) => void; close: () => Promise<void> }> {
  const { LauncherMetrics, announceMetrics, kindRowsGauge, refreshQueueRows, serveMetrics } = await import('../metrics.js');
  const metrics = new LauncherMetrics(target.table.table);
  const { queue, close: closeQueue } = await openQueue(target);
  let draining = false;
  let listening: MetricsServer;
  try {
    listening = await serveMetrics(settings, metrics.exposition, {
      draining: () => draining,
      ping: () => (metrics.childrenUp > 0 ? Promise.resolve() : Promise.reject(new Error('none has reported yet, or all have ended'))),
      unready: 'no worker process is up',
    });
  } catch (error) {
    await closeQueue();
    throw error;
  }
  const kindRows = queue.table.features.kinds ? kindRowsGauge(metrics.registry) : null;
  const stopRefresh = refreshQueueRows(queue, metrics.queueRows, target.table.table, log, undefined, kindRows);
  announceMetrics(log, settings, listening.port);
  return {
    observe: (event) => {
      if (event.type === 'started') metrics.started(event.pid);
      else if (event.type === 'message') metrics.received(event.pid, event.message);
      else if (event.type === 'exited') metrics.exited(event.pid);
      else if (event.type === 'restarting') metrics.restarts.inc();
      else if (event.type === 'draining') draining = true;
    },
    close: async () => {
      draining = true;
      stopRefresh();
      const jobs = await metrics.jobTotals();
      log.info({ jobs }, `worker processes' merged statusq_jobs_total: ${Object.entries(jobs).map(([outcome, n]) => `${outcome} ${n}`).join(', ')}`);
      await listening.close();
      await closeQueue();
    },
  };
}

/** Exits after which a child holds no claim of a running handler: nothing for the launcher to recover. */
const CLEAN_EXITS = new Set<number>([EXIT.ok, EXIT.badInput, EXIT.handedBack, EXIT.recycled]);

/** The launcher's own connection to the table (its children open theirs). */
export async function openQueue(target: RecoveryTarget): Promise<{ queue: Queue; close: () => Promise<void> }> {
  const store = await openStore(target.url, { create: false }, target.adapter);
  try {
    return { queue: await Queue.open(store, target.table), close: () => store.close() };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/**
 * On a table without a lease column (the seed's status-only table_a) nothing brings back a row whose worker
 * died while it was processing: at the end of a run, one warn line with how many rows are processing, the
 * first ids and the command that returns them. The exit code stays 0: those rows are not this run's to finish,
 * and another worker may still be running them.
 */
export async function warnProcessingWithoutLease(queue: Queue, log: Logger): Promise<void> {
  if (queue.table.features.leases) return;
  const counts = await queue.counts();
  if (counts.processing === 0) return;
  const { rows } = await queue.inspect({ status: 'processing', limit: 5 });
  const ids = rows.map((row) => String(row[queue.table.id]));
  const first = counts.processing > ids.length ? `first ids ${ids.join(', ')}` : `ids ${ids.join(', ')}`;
  log.warn(
    { table: queue.table.table, processing: counts.processing, ids },
    `${counts.processing} row${counts.processing === 1 ? '' : 's'} of ${queue.table.table} left processing (${first}) and the table has no lease column, so nothing returns ${counts.processing === 1 ? 'it' : 'them'} by itself: ` +
      `if no worker is running ${counts.processing === 1 ? 'it' : 'them'} (a worker was killed), stop every worker and run statusq requeue --table ${queue.table.table} --status processing --force; statusq migrate --with leases makes it automatic`,
  );
}

export interface RecoveryTarget {
  url: string;
  adapter: string | undefined;
  table: TableConfig;
  maxAttempts: number;
  /** The children's broker (--from): rows the launcher gives up after a child's death are dead-lettered there too. */
  deadLetterTo: { url: string; queue: string | undefined } | undefined;
}

/**
 * A supervised child tells its launcher its worker id when it starts and, from an exit hook, the claims it
 * had not started: written synchronously to the report pipe, the words outlive the process.
 */
export function reportToLauncher(worker: Worker): void {
  const fd = Number(process.env.STATUSQ_REPORT_FD);
  if (process.env.STATUSQ_SUPERVISED !== '1' || !Number.isInteger(fd) || fd < 3) return;
  const send = (message: object) => {
    try {
      writeSync(fd, `${JSON.stringify(message, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value))}\n`);
    } catch {
      // No launcher to read it (the pipe is gone): then no one recovers these claims but their leases.
    }
  };
  send({ workerId: worker.workerId });
  process.once('exit', () => {
    const unstarted = worker.unstartedClaims();
    if (unstarted.length > 0) send({ unstarted });
  });
}

/**
 * A child died with claims in hand: those it never started go back at no cost, those whose handlers ran
 * cost one attempt each, at once rather than when their leases expire.
 */
async function recoverDeadWorker(target: RecoveryTarget, pid: number, how: string, reportText: string, log: Logger): Promise<void> {
  const report: DeadWorkerReport = { workerId: '', unstarted: [] };
  for (const line of reportText.split('\n')) {
    if (line.trim() === '') continue;
    try {
      const message = JSON.parse(line) as Partial<DeadWorkerReport>;
      if (typeof message.workerId === 'string') report.workerId = message.workerId;
      if (Array.isArray(message.unstarted)) report.unstarted.push(...message.unstarted);
    } catch {
      // A line cut short by the death of its writer says nothing reliable.
    }
  }
  if (report.workerId === '') return;
  try {
    const store = await openStore(target.url, { create: false }, target.adapter);
    try {
      const queue = await Queue.open(store, target.table);
      if (!queue.table.features.leases) {
        log.warn({ child: pid, workerId: report.workerId }, `worker process ${pid} ${how}: ${queue.table.table} has no lease column, so the rows it was running stay processing until they are requeued (statusq requeue --table ${queue.table.table} --status processing --force, once no worker runs)`);
      }
      const { released, charged, givenUp } = await queue.recoverDeadWorker(report, `worker process ${pid} ${how} while this job ran`, target.maxAttempts);
      if (released + charged > 0) {
        log.warn({ child: pid, workerId: report.workerId, charged, released, givenUp: givenUp.length }, `worker process ${pid}: ${charged} running job${charged === 1 ? '' : 's'} charged an attempt${givenUp.length > 0 ? ` (${givenUp.length} given up: attempts used)` : ''}, ${released} claimed but not started handed back`);
      }
      if (givenUp.length > 0 && target.deadLetterTo) await (await import('../broker.js')).deadLetterGivenUp(target.deadLetterTo, queue.table.table, givenUp, log);
    } finally {
      await store.close();
    }
  } catch (error) {
    log.error({ child: pid, err: errorFields(error) }, `could not recover the claims of worker process ${pid} (they return by lease): ${errorFields(error).message as string}`);
  }
}
