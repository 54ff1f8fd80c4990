import { readFileSync, writeSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConfigError, DEFAULT_INSTANCE_LEASE_MS, DEFAULT_POLL_MIN_MS, EXIT, InstanceSlot, Queue, instanceHolders, parseRateLimit, validateInstanceCap, validateProcessCount, STOP_MARGIN_MS, Scheduler, Supervisor, parseSchedules, type ScheduleDefinition, Worker, loadHandler, validateTableConfig, type ClaimStrategy, type DeadWorkerReport, type Store, type SupervisorEvent, type TableConfig } from '@statusq/core';
import { adapterOf, LISTEN_DATABASE_URL_VARIABLE, WORK_FROM_VARIABLE, brokerQueueName, brokerUrl, databaseUrl, metricsSettings, type MetricsSettings, isBooleanFlag, listenDatabaseUrl, optionalDuration, optionalInteger, optionalString, required, tableConfig, type Flags } from './args.js';
import { ADAPTER_VARIABLE, openStore } from './adapters.js';
import { errorFields, logSettings, type Logger } from './log.js';
import { logSummary, logSupervisorEvent, logWorkerEvents } from './log-events.js';
import type { MetricsServer } from './metrics.js';
import { launcherProgress, progressSurface, workProgress } from './progress.js';
import { storeWarningsToLog, withBroker, withStore, workLogger, type Io } from './with-store.js';

export async function work(flags: Flags, io: Io, argv: readonly string[] = []): Promise<number> {
  const config = tableConfig(flags, 'work');
  validateTableConfig(config);
  const handlerFile = required(flags, 'handler', 'work');
  const claimStrategy = optionalString(flags, 'claim-strategy');
  if (claimStrategy !== undefined && claimStrategy !== 'native' && claimStrategy !== 'conditional-update') {
    throw new ConfigError(`--claim-strategy must be native or conditional-update, got ${JSON.stringify(claimStrategy)}`);
  }
  const pollMaxMs = optionalDuration(flags, 'poll-max');
  const rateFlag = optionalString(flags, 'rate');
  // Below this an idle worker would claim in a tight loop; a wake-up (NOTIFY, SQLite's file watch) is the way to sub-10 ms pick-up.
  if (pollMaxMs !== undefined && pollMaxMs < MIN_POLL_MAX_MS) throw new ConfigError(`--poll-max must be at least ${MIN_POLL_MAX_MS}ms, got ${flags['poll-max'] as string}`);
  const options = {
    concurrency: optionalInteger(flags, 'concurrency'),
    // The backoff starts at 25 ms (the worker's default) or at --poll-max if that is shorter.
    ...(pollMaxMs !== undefined && { pollMaxMs, pollMinMs: Math.min(DEFAULT_POLL_MIN_MS, pollMaxMs) }),
    batch: optionalInteger(flags, 'batch'),
    maxAttempts: optionalInteger(flags, 'max-attempts'),
    retryDelayMs: optionalDuration(flags, 'retry-delay'),
    leaseMs: optionalDuration(flags, 'lease'),
    agingMs: optionalDuration(flags, 'aging'),
    jobTimeoutMs: optionalDuration(flags, 'job-timeout'),
    jobTimeoutGraceMs: optionalDuration(flags, 'job-timeout-grace'),
    readOnlyWaitMs: optionalDuration(flags, 'read-only-wait'),
    claimStrategy: claimStrategy as ClaimStrategy | undefined,
    exitWhenEmpty: flags['exit-when-empty'] === true,
    rateLimit: rateFlag === undefined ? undefined : parseRateLimit(rateFlag, '--rate'),
  };
  const stopTimeoutMs = optionalDuration(flags, 'stop-timeout') ?? 30_000;
  const logging = logSettings(flags);
  const processes = optionalInteger(flags, 'processes');
  // Checked with the other flags, before the handler loads or anything is logged (it said "starting -1 worker processes").
  if (processes !== undefined) validateProcessCount(processes, '--processes');
  const metrics = metricsSettings(flags);
  const progress = progressSurface(flags);
  const scheduleFile = optionalString(flags, 'schedule');
  const schedules = scheduleFile === undefined ? null : await readSchedules(scheduleFile);
  const cap = instanceCap(flags);
  const listenUrl = listenDatabaseUrl(flags, 'work');
  const fromUrl = brokerUrl(flags, 'from', WORK_FROM_VARIABLE);
  const prefetch = optionalInteger(flags, 'prefetch');
  const brokerQueue = brokerQueueName(flags);
  if ((prefetch !== undefined || brokerQueue !== undefined) && fromUrl === undefined) throw new ConfigError(`--${prefetch !== undefined ? 'prefetch' : 'queue'} needs --from (a broker to take jobs from)`);
  // The handler is loaded before the database is opened: a bad handler touches nothing.
  const { handler, isAbuse } = await loadHandler(handlerFile);
  if (processes !== undefined) {
    // Everything a child would reject is rejected here first, once, before any child starts; the
    // connection used to check the table is closed before forking, so children open their own.
    // The listening URL is checked here too (the adapter's connect checks it), though only children listen.
    const checked = await withStore(flags, 'work', false, (store) => withBroker(store, config, fromUrl, brokerQueue, (from) => Worker.create({ store, table: config, handler, isAbuse, ...options, from, prefetch })), { listenUrl });
    const url = databaseUrl(flags, 'work');
    // The URL reaches the children through the environment, never their argv (visible in `ps`).
    const adapter = adapterOf(flags);
    const recovery: RecoveryTarget = { url, adapter, table: config, maxAttempts: checked.maxAttempts, deadLetterTo: fromUrl === undefined ? undefined : { url: fromUrl, queue: brokerQueue } };
    // Only the launcher draws progress; its children send it their counters.
    const shown = await launcherProgress(progress, () => openQueue(recovery), options.exitWhenEmpty);
    const env = { ...process.env, STATUSQ_DATABASE_URL: url, ...(listenUrl === undefined ? {} : { [LISTEN_DATABASE_URL_VARIABLE]: listenUrl }), ...(adapter === undefined ? {} : { [ADAPTER_VARIABLE]: adapter }), ...(metrics === null ? {} : { [METRICS_IPC_VARIABLE]: '1' }), ...(fromUrl === undefined ? {} : { [WORK_FROM_VARIABLE]: fromUrl }), ...shown.children };
    const log = await workLogger(logging, io, { role: 'supervisor' }, shown.logBeside);
    // Only the launcher listens; its children send it their metrics instead.
    // The launcher holds the instance slot for all its children, on a connection of its own; losing it drains them.
    const args = ['work', ...['processes', 'db', 'listen-db', 'from', 'metrics-port', 'metrics-host', 'progress', 'max-instances', 'wait', 'instance-lease'].reduce(withoutFlag, argv), '--progress', 'off'];
    const lostSlot = new AbortController();
    let slotStore: Store | null = null;
    let launcher: Awaited<ReturnType<typeof serveLauncherMetrics>> | null = null;
    let slot: InstanceSlot | null = null;
    try {
      if (cap !== null) {
        slotStore = await openStore(url, { create: false }, adapter);
        slot = await takeInstanceSlot(slotStore, config, cap, io, log, () => lostSlot.abort());
        if (slot === null) return EXIT.ok;
      }
      launcher = metrics === null ? null : await serveLauncherMetrics(metrics, recovery, log);
      if (lostSlot.signal.aborted) return EXIT.ok;
      log.info({ table: config.table, handler: handlerFile, processes }, `starting ${processes} worker process${processes === 1 ? '' : 'es'} on ${config.table}`);
      const code = await supervise(args, processes, stopTimeoutMs, env, io, log, recovery, lostSlot.signal, (event) => {
        launcher?.observe(event);
        shown.observe(event);
      });
      if (!checked.queue.table.features.leases) {
        const opened = await openQueue(recovery).catch(() => null);
        if (opened) await warnProcessingWithoutLease(opened.queue, log).catch(() => undefined).finally(() => opened.close());
      }
      return code;
    } finally {
      await launcher?.close();
      await shown.stop();
      await slot?.release();
      await slotStore?.close();
    }
  }
  const storeWarnings = storeWarningsToLog();
  return withStore(flags, 'work', false, (store) => withBroker(store, config, fromUrl, brokerQueue, async (from) => {
    const worker = await Worker.create({ store, table: config, handler, isAbuse, ...options, from, prefetch });
    reportToLauncher(worker);
    const supervised = process.env.STATUSQ_SUPERVISED === '1';
    const shown = workProgress(progress, worker, options.exitWhenEmpty);
    const log = await workLogger(logging, io, { workerId: worker.workerId }, shown.logBeside);
    storeWarnings.attach(log);
    let stopReason = 'stop';
    worker.on('stopped', ({ reason }) => (stopReason = reason));
    let stopping: Promise<unknown> | null = null;
    let draining = false;
    let deadline: NodeJS.Timeout | undefined;
    const drain = () => {
      draining = true;
      // Whatever the database does, this process is gone shortly after the stop timeout.
      deadline ??= setTimeout(() => {
        log.error({ exitCode: EXIT.handedBack }, `stop did not finish within ${stopTimeoutMs + STOP_MARGIN_MS} ms (the database is not answering); exiting; unfinished claims return to the queue by lease`);
        process.exit(EXIT.handedBack);
      }, stopTimeoutMs + STOP_MARGIN_MS + 2_000).unref();
      stopping ??= worker.stop(stopTimeoutMs).then((report) => {
        if (report.abandoned === 0) return;
        // The rows may already run elsewhere: nothing this process started may go on running.
        log.error(
          { abandoned: report.abandoned, handedBack: report.handedBack, exitCode: EXIT.handedBack },
          `${report.abandoned} job${report.abandoned === 1 ? '' : 's'} still running after the ${stopTimeoutMs} ms stop timeout: ` +
            `signalled abort, handed ${report.handedBack} row${report.handedBack === 1 ? '' : 's'} back to the queue; exiting now (code ${EXIT.handedBack})`,
        );
        process.exit(EXIT.handedBack);
      });
    };
    // Under the launcher: if it dies, drain rather than run on unsupervised. Checked here, with no await
    // between the check and the listener: a launcher killed while this process started has closed the
    // channel already, and its 'disconnect' event will never come (such a child ran on as an orphan).
    if (supervised) {
      if (!process.connected) {
        log.warn({ exitCode: EXIT.ok }, 'the launcher exited while this worker process was starting; exiting without claiming (code 0)');
        await shown.stop();
        return EXIT.ok;
      }
      process.once('disconnect', drain);
      // The IPC channel is only a lifeline; it must not keep a finished worker alive.
      process.channel?.unref();
    }
    let lostSlot = false;
    const slot = cap === null ? null : await takeInstanceSlot(store, config, cap, io, log, () => {
      lostSlot = true;
      drain();
    });
    if (cap !== null && slot === null) {
      await shown.stop();
      return EXIT.ok;
    }
    logWorkerEvents(worker, log, config.table);
    const stopMetrics = await workerMetrics(worker, store, supervised ? 'launcher' : metrics, log, () => draining).catch(async (error: unknown) => {
      await slot?.release();
      throw error;
    });
    let signals = 0;
    const unregister = io.onSignal((signal) => {
      signals++;
      if (signals === 1) {
        log.info({ signal }, `${signal}: draining (finishing running jobs, up to ${stopTimeoutMs} ms); send again to stop at once`);
        drain();
      } else {
        log.warn({ signal, exitCode: EXIT.stoppedHard }, `${signal} again: stopping now; unfinished claims return to the queue by lease or requeue`);
        process.exit(EXIT.stoppedHard);
      }
    });
    log.info(
      { table: config.table, handler: handlerFile, concurrency: options.concurrency, maxAttempts: worker.maxAttempts, exitWhenEmpty: options.exitWhenEmpty },
      `worker started on ${config.table}`,
    );
    let schedulerFailure: ConfigError | null = null;
    const onSchedulerStopped = (error: unknown) => {
      // A schedule that can never fire again (its fixed id taken) is the configuration's fault: exit 2, not 0.
      if (error instanceof ConfigError) schedulerFailure = error;
      drain();
    };
    const scheduler = schedules === null ? null : await startScheduler(store, config, schedules, log, onSchedulerStopped).catch(async (error: unknown) => {
      await stopMetrics();
      await slot?.release();
      throw error;
    });
    const started = Date.now();
    try {
      const counters = await worker.run();
      logSummary(log, counters, (Date.now() - started) / 1000, stopReason);
      // A stop past its timeout exits from its own callback, before the store is closed under it.
      await stopping;
    } catch (error) {
      // main() prints the one-line reason on stderr; the log says it too, for whoever reads only the log.
      log.error({ err: errorFields(error) }, `worker stopped by an error it cannot retry: ${errorFields(error).message as string}`);
      throw error;
    } finally {
      draining = true;
      unregister();
      await scheduler?.stop();
      await stopMetrics();
      await shown.stop();
      await slot?.release();
      // The stop finished: the deadline is moot, and must not end a process (or the test runner) that runs on.
      clearTimeout(deadline);
    }
    // A launcher's child leaves this to the launcher, which looks once every child has ended.
    if (!supervised) await warnProcessingWithoutLease(worker.queue, log).catch((error: unknown) => log.debug({ err: errorFields(error) }, 'could not count the rows left processing'));
    if (schedulerFailure) throw schedulerFailure;
    if (lostSlot) log.warn({ exitCode: EXIT.ok }, 'drained after losing the instance slot; exiting (code 0) to keep within --max-instances');
    if (stopReason === 'recycle') {
      log.error({ exitCode: EXIT.recycled }, `a job outlived --job-timeout and ignored its abort; its row was settled as a failed attempt; exiting (code ${EXIT.recycled}) to end it`);
      // The stuck handler would keep this process alive; exiting is what ends it.
      process.exit(EXIT.recycled);
    }
    return EXIT.ok;
  }), { listenUrl, onWarning: storeWarnings.onWarning });
}

interface InstanceCap {
  max: number;
  wait: boolean;
  leaseMs: number;
}

/** --max-instances, --wait and --instance-lease, checked before the database is opened; null without --max-instances. */
function instanceCap(flags: Flags): InstanceCap | null {
  const max = optionalInteger(flags, 'max-instances');
  const leaseFlag = optionalDuration(flags, 'instance-lease');
  const wait = flags.wait === true;
  if (max === undefined) {
    if (wait || leaseFlag !== undefined) throw new ConfigError(`--${wait ? 'wait' : 'instance-lease'} needs --max-instances`);
    return null;
  }
  const leaseMs = leaseFlag ?? DEFAULT_INSTANCE_LEASE_MS;
  validateInstanceCap(max, leaseMs);
  return { max, wait, leaseMs };
}

/**
 * A slot of the table's --max-instances cap, or null when the cap is full (said in the log) and --wait was not
 * given, or a signal ended the wait. `lost` runs if the slot is lost later (this process stalled past its lease
 * and another instance took the slot): from then on this instance is over the cap.
 */
async function takeInstanceSlot(store: Store, config: TableConfig, cap: InstanceCap, io: Io, log: Logger, lost: () => void): Promise<InstanceSlot | null> {
  const stop = new AbortController();
  const unregister = io.onSignal((signal) => {
    log.info({ signal }, `${signal}: no longer waiting for an instance slot; exiting`);
    stop.abort();
  });
  const onLost = (reason: string) => {
    log.warn({ reason }, `lost the instance slot (${reason}); draining: another instance may run in its place`);
    lost();
  };
  try {
    const options = { store, table: config, max: cap.max, leaseMs: cap.leaseMs, signal: stop.signal, onLost };
    const now = await InstanceSlot.acquire(options);
    if (now !== null || stop.signal.aborted) return await logSlot(now, log, cap, stop.signal);
    const holders = await instanceHolders(store, config);
    const who = holders.map((h) => `${h.host ?? '?'} (slot ${h.slot})`).join(', ');
    if (!cap.wait) {
      log.info({ maxInstances: cap.max, holders: holders.map((h) => h.host) }, `${cap.max} of ${cap.max} instance slots on ${config.table} are held (${who}); exiting (code 0) rather than run over --max-instances`);
      return null;
    }
    log.info({ maxInstances: cap.max, holders: holders.map((h) => h.host) }, `${cap.max} of ${cap.max} instance slots on ${config.table} are held (${who}); waiting for one`);
    return await logSlot(await InstanceSlot.acquire({ ...options, wait: true }), log, cap, stop.signal);
  } finally {
    unregister();
  }
}

/** The slot taken, said in the log; or, when a signal came while it was being taken, freed again (null: exit). */
async function logSlot(slot: InstanceSlot | null, log: Logger, cap: InstanceCap, stopped: AbortSignal): Promise<InstanceSlot | null> {
  if (slot === null) return null;
  if (stopped.aborted) {
    await slot.release();
    return null;
  }
  log.info({ slot: slot.slot, maxInstances: cap.max }, `holding instance slot ${slot.slot} of ${cap.max}`);
  return slot;
}

/** A --schedule file (YAML, or JSON, which YAML reads too), checked whole before the database is opened. */
async function readSchedules(file: string): Promise<ScheduleDefinition[]> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`--schedule: cannot read ${file}: ${(error as Error).message}`);
  }
  const { parse: parseYaml } = await import('yaml');
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (error) {
    throw new ConfigError(`--schedule: ${file} is neither YAML nor JSON: ${(error as Error).message.split('\n')[0]}`);
  }
  return parseSchedules(parsed, file);
}

/**
 * The schedules of --schedule, beside the worker on its store: every process running the same file claims
 * ticks, and the schedules table lets one of them enqueue each. A failure it cannot retry drains the worker.
 */
async function startScheduler(store: Store, config: TableConfig, schedules: readonly ScheduleDefinition[], log: Logger, stopped: (error: unknown) => void): Promise<Scheduler> {
  const scheduler = await Scheduler.create({
    store,
    table: config,
    schedules,
    onEnqueued: ({ schedule, tick, id, caughtUp }) => log.info({ schedule, tick, jobId: id, caughtUp }, `schedule ${schedule}: enqueued ${caughtUp ? 'missed ' : ''}tick ${tick}${id === null ? '' : ` as row ${String(id)}`}`),
    onError: (error, schedule) => log.warn({ schedule, err: errorFields(error) }, `schedule ${schedule}: claiming a tick failed (tried again in a second): ${errorFields(error).message as string}`),
  });
  log.info({ schedules: schedules.map((s) => s.name) }, `scheduling ${schedules.map((s) => `${s.name} (${s.cron}${s.timezone ? ` ${s.timezone}` : ''})`).join(', ')}`);
  scheduler.run().catch((error: unknown) => {
    log.error({ err: errorFields(error) }, `the scheduler stopped: ${errorFields(error).message as string}; draining the worker`);
    stopped(error);
  });
  return scheduler;
}

/**
 * The metrics of one `work` process: sent to the launcher under `--processes` when it serves --metrics-port
 * (statusq_queue_rows is the launcher's then: it reads the table once for all its children), else served
 * here. Returns what stops them: after it, the launcher has the last snapshot and the port is closed.
 */
async function workerMetrics(worker: Worker, store: Store, serve: MetricsSettings | 'launcher' | null, log: Logger, draining: () => boolean): Promise<() => Promise<void>> {
  const toLauncher = serve === 'launcher' && process.env[METRICS_IPC_VARIABLE] === '1';
  if (serve === null || (serve === 'launcher' && !toLauncher)) return async () => {};
  const { WorkerMetrics, announceMetrics, observeWorker, refreshQueueRows, sendSnapshotsToLauncher, serveMetrics } = await import('./metrics.js');
  const registry = new WorkerMetrics();
  observeWorker(worker, registry, worker.queue.table.table);
  if (serve === 'launcher') return sendSnapshotsToLauncher(registry.registry);
  const server = await serveMetrics(serve, registry.registry, { draining, ping: () => store.execute({ sql: 'SELECT 1', params: [] }) });
  const stopRefresh = refreshQueueRows(worker.queue, registry.queueRows, worker.queue.table.table, log);
  announceMetrics(log, serve, server.port);
  return async () => {
    stopRefresh();
    await server.close();
  };
}

/**
 * `work --processes P`: runs P copies of this same command (without --processes) under the Supervisor.
 * Children drain within --stop-timeout; the launcher waits that long plus a margin before killing them.
 */
async function supervise(args: string[], processes: number, stopTimeoutMs: number, env: NodeJS.ProcessEnv, io: Io, log: Logger, recovery: RecoveryTarget, lostSlot: AbortSignal | undefined, observe: (event: SupervisorEvent) => void): Promise<number> {
  const recoveries = new Set<Promise<void>>();
  const supervisor = new Supervisor(
    // Children exit by themselves within the stop timeout plus their margin; the launcher kills only past that.
    { processes, modulePath: fileURLToPath(new URL('./bin.js', import.meta.url)), args, env, gracePeriodMs: stopTimeoutMs + STOP_MARGIN_MS + 5_000 },
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

/** Set by the launcher for its children when it serves --metrics-port: send snapshots over IPC, do not listen. */
const METRICS_IPC_VARIABLE = 'STATUSQ_METRICS_IPC';
/** The shortest --poll-max: an idle worker below it would claim in a tight loop. */
const MIN_POLL_MAX_MS = 10;

/**
 * The launcher's --metrics-port: it serves its children's merged snapshots, counts their restarts, and reads
 * statusq_queue_rows itself with its own connection (one GROUP BY per interval whatever the number of
 * children, and no child's restart leaves the gauge unset). Ready while not draining and a child is up.
 */
async function serveLauncherMetrics(settings: MetricsSettings, target: RecoveryTarget, log: Logger): Promise<{ observe: (event: SupervisorEvent) => void; close: () => Promise<void> }> {
  const { LauncherMetrics, announceMetrics, refreshQueueRows, serveMetrics } = await import('./metrics.js');
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
  const stopRefresh = refreshQueueRows(queue, metrics.queueRows, target.table.table, log);
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
async function openQueue(target: RecoveryTarget): Promise<{ queue: Queue; close: () => Promise<void> }> {
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
async function warnProcessingWithoutLease(queue: Queue, log: Logger): Promise<void> {
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

interface RecoveryTarget {
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
function reportToLauncher(worker: Worker): void {
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
      if (givenUp.length > 0 && target.deadLetterTo) await (await import('./broker.js')).deadLetterGivenUp(target.deadLetterTo, queue.table.table, givenUp, log);
    } finally {
      await store.close();
    }
  } catch (error) {
    log.error({ child: pid, err: errorFields(error) }, `could not recover the claims of worker process ${pid} (they return by lease): ${errorFields(error).message as string}`);
  }
}

/** argv without `--name VALUE` / `--name=VALUE`. */
function withoutFlag(argv: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === `--${name}`) {
      if (!isBooleanFlag(name)) i++;
      continue;
    }
    if (arg.startsWith(`--${name}=`)) continue;
    out.push(arg);
  }
  return out;
}
