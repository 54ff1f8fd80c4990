import { ConfigError, Worker, loadHandler, type InstanceSlot, type Store } from '@statusq/core';
import { loadKindHandlers, parseKindLimits } from '@statusq/core/tools';
import { DEFAULT_POLL_MIN_MS, EXIT, STOP_MARGIN_MS, parseRateLimit, validateProcessCount, validateTableConfig, type ClaimStrategy } from '@statusq/core/tools';
import { adapterOf, LISTEN_DATABASE_URL_VARIABLE, WORK_FROM_VARIABLE, brokerQueueName, brokerUrl, databaseUrl, isBooleanFlag, listenDatabaseUrl, metricsSettings, optionalDuration, optionalInteger, optionalString, tableConfig, type Flags } from '../args.js';
import { ADAPTER_VARIABLE, openStore } from '../adapters.js';
import { errorFields, logSettings } from '../log.js';
import { logSummary, logWorkerEvents } from '../log-events.js';
import { progressSurface } from '../progress/status-line.js';
import { launcherProgress, workProgress } from '../progress/work.js';
import { storeWarningsToLog, withBroker, withStore, workLogger, type Io } from '../with-store.js';
import { instanceCap, takeInstanceSlot } from '../work/instance-cap.js';
import { openQueue, reportToLauncher, serveLauncherMetrics, supervise, warnProcessingWithoutLease, type RecoveryTarget } from '../work/launcher.js';
import { readSchedules, startScheduler } from '../work/schedules.js';
import { warnUnhandledKinds } from '../work/unhandled-kinds.js';
import { METRICS_IPC_VARIABLE, workerMetrics } from '../work/worker-metrics.js';

/** The shortest --poll-max: an idle worker below it would claim in a tight loop. */
const MIN_POLL_MAX_MS = 10;

export async function work(flags: Flags, io: Io, argv: readonly string[] = []): Promise<number> {
  const config = tableConfig(flags, 'work');
  validateTableConfig(config);
  const handlerFile = optionalString(flags, 'handler');
  const handlersDir = optionalString(flags, 'handlers');
  if ((handlerFile === undefined) === (handlersDir === undefined)) {
    throw new ConfigError(handlerFile === undefined ? 'work: --handler (a module) or --handlers (a directory of <kind>.mjs modules) is required' : 'work: give --handler or --handlers, not both');
  }
  const claimStrategy = optionalString(flags, 'claim-strategy');
  if (claimStrategy !== undefined && claimStrategy !== 'native' && claimStrategy !== 'conditional-update') {
    throw new ConfigError(`--claim-strategy must be native or conditional-update, got ${JSON.stringify(claimStrategy)}`);
  }
  const pollMaxMs = optionalDuration(flags, 'poll-max');
  const rateFlag = optionalString(flags, 'rate');
  const kindLimitsFlag = optionalString(flags, 'kind-concurrency');
  const groupRateFlag = optionalString(flags, 'group-rate');
  const kindRatesFlag = optionalString(flags, 'kind-rate');
  // Below this an idle worker would claim in a tight loop; a wake-up (a store with listenNotify: a notification, a watch on its file) is the way to sub-10 ms pick-up.
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
    kindConcurrency: kindLimitsFlag === undefined ? undefined : Object.fromEntries(parseKindLimits(kindLimitsFlag, '--kind-concurrency')),
    kindRate: kindRatesFlag === undefined ? undefined : Object.fromEntries(parseKindLimits(kindRatesFlag, '--kind-rate', (rate, what) => parseRateLimit(String(rate), what), 'email=50/s,report=1/m')),
    groupConcurrency: optionalInteger(flags, 'group-concurrency'),
    groupRate: groupRateFlag === undefined ? undefined : parseRateLimit(groupRateFlag, '--group-rate'),
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
  const { handler, handlers, isAbuse } = handlersDir === undefined ? await loadHandler(handlerFile!) : { handlers: await loadKindHandlers(handlersDir), handler: undefined, isAbuse: undefined };
  if (processes !== undefined) {
    // Everything a child would reject is rejected here first, once, before any child starts; the
    // connection used to check the table is closed before forking, so children open their own.
    // The listening URL is checked here too (the adapter's connect checks it), though only children listen.
    const checked = await withStore(flags, 'work', false, (store) => withBroker(store, config, fromUrl, brokerQueue, (from) => Worker.create({ store, table: config, handler, handlers, isAbuse, ...options, from, prefetch })), { listenUrl });
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
      log.info({ table: config.table, handler: handlerFile ?? handlersDir, processes }, `starting ${processes} worker process${processes === 1 ? '' : 'es'} on ${config.table}`);
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
    const worker = await Worker.create({ store, table: config, handler, handlers, isAbuse, ...options, from, prefetch });
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
      {
        table: config.table,
        handler: handlerFile ?? handlersDir,
        ...(handlers && { kinds: Object.keys(handlers).sort() }),
        concurrency: options.concurrency,
        maxAttempts: worker.maxAttempts,
        exitWhenEmpty: options.exitWhenEmpty,
        // The fleet-wide limits, listed as given: a limit of a kind no row has yet is accepted, and shows here.
        ...(options.kindConcurrency && { kindConcurrency: options.kindConcurrency }),
        ...(kindRatesFlag !== undefined && { kindRate: kindRatesFlag }),
        ...(options.groupConcurrency !== undefined && { groupConcurrency: options.groupConcurrency }),
        ...(groupRateFlag !== undefined && { groupRate: groupRateFlag }),
      },
      `worker started on ${config.table}`,
    );
    // Advice only: a table that cannot be looked at here must not keep the worker from running.
    const stopKindWarnings = handlers === undefined ? null : await warnUnhandledKinds(store, config, Object.keys(handlers), log).catch(() => null);
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
      await stopKindWarnings?.();
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
