import { ConfigError, Relay } from '@statusq/core';
import { formatDuration, validateTableConfig } from '@statusq/core/tools';
import { RELAY_TO_VARIABLE, brokerQueueName, brokerUrl, metricsSettings, optionalDuration, optionalInteger, tableConfig, type Flags, type MetricsSettings } from '../args.js';
import { openBroker } from '../broker.js';
import { errorFields, logSettings, type Logger } from '../log.js';
import { QUEUE_ROWS_INTERVAL_MS, RelayMetrics, announceMetrics, serveMetrics } from '../metrics.js';
import { withStore, workLogger, type Io } from '../with-store.js';

/** `statusq relay`: publishes the table's due rows to the broker until a signal (or, with --exit-when-empty, no row is pending or processing). */
export async function relay(flags: Flags, io: Io): Promise<number> {
  const config = tableConfig(flags, 'relay');
  validateTableConfig(config);
  const url = brokerUrl(flags, 'to', RELAY_TO_VARIABLE);
  if (url === undefined) throw new ConfigError(`relay: --to is required (or set ${RELAY_TO_VARIABLE})`);
  const batch = optionalInteger(flags, 'batch');
  const redispatchMs = optionalDuration(flags, 'redispatch-after');
  const pollMaxMs = optionalDuration(flags, 'poll-max');
  const logging = logSettings(flags);
  const brokerQueue = brokerQueueName(flags);
  const metrics = metricsSettings(flags);
  return withStore(flags, 'relay', false, async (store) => {
    const broker = await openBroker(store, config, url, 'statusq relay', brokerQueue);
    try {
      const relayRun = await Relay.create({ store, table: config, to: broker, batch, redispatchMs, ...(pollMaxMs !== undefined && { pollMaxMs }), exitWhenEmpty: flags['exit-when-empty'] === true });
      const log = await workLogger(logging, io, { role: 'relay' });
      relayRun.on('published', (e) => log.debug({ table: config.table, count: e.count, durationMs: Math.round(e.durationMs * 100) / 100 }, 'published'));
      relayRun.on('error', (e) => log.warn({ table: config.table, during: e.during, err: errorFields(e.error) }, `relay error during ${e.during} (retrying)`));
      const stopMetrics = metrics === null ? null : await serveRelayMetrics(relayRun, metrics, log);
      const unregister = io.onSignal((signal) => {
        log.info({ signal }, `${signal}: stopping the relay after the batch in flight`);
        void relayRun.stop();
      });
      log.info({ table: config.table, to: broker.address, broker: broker.name, redispatchAfter: formatDuration(redispatchMs ?? 300_000) }, `relay started on ${config.table}, publishing to ${broker.address}`);
      const started = Date.now();
      try {
        const counters = await relayRun.run();
        const seconds = (Date.now() - started) / 1000;
        log.info({ counters, seconds: Math.round(seconds * 1000) / 1000 }, `relayed ${counters.published} row${counters.published === 1 ? '' : 's'} in ${seconds.toFixed(1)} s`);
      } catch (error) {
        log.error({ err: errorFields(error) }, `relay stopped by an error it cannot retry: ${errorFields(error).message as string}`);
        throw error;
      } finally {
        unregister();
        await stopMetrics?.();
      }
      return 0;
    } finally {
      await broker.close();
    }
  });
}

/** --metrics-port for the relay: its counters, the rows waiting in the broker, /healthz and /readyz. */
async function serveRelayMetrics(relay: Relay, settings: MetricsSettings, log: Logger): Promise<() => Promise<void>> {
  const { table } = relay.queue.table;
  const metrics = new RelayMetrics(table);
  relay.on('published', (e) => {
    metrics.published.inc({ table }, e.count);
    metrics.batchDuration.observe({ table }, e.durationMs / 1000);
  });
  let failures = relay.counters.publishFailures;
  const countFailures = () => {
    metrics.publishFailures.inc({ table }, relay.counters.publishFailures - failures);
    failures = relay.counters.publishFailures;
  };
  relay.on('error', countFailures);
  let draining = false;
  relay.on('stopped', () => (draining = true));
  const refresh = () => {
    relay.queue.dispatchedCount().then(
      (n) => (n === null ? undefined : metrics.waiting.set({ table }, n)),
      (error: unknown) => log.warn({ err: errorFields(error) }, 'could not read the rows waiting in the broker'),
    );
  };
  refresh();
  const timer = setInterval(refresh, QUEUE_ROWS_INTERVAL_MS);
  timer.unref();
  const server = await serveMetrics(settings, metrics.registry, { draining: () => draining, ping: () => relay.queue.hasRowsWithStatus('processing') });
  announceMetrics(log, settings, server.port);
  return async () => {
    clearInterval(timer);
    await server.close();
  };
}
