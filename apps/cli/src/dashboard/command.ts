// `statusq dashboard`: opens the store and the table once, serves the page and the API until SIGINT or
// SIGTERM, then closes the server, the sampler and the store (exit 0).
import { fileURLToPath } from 'node:url';
import { ConfigError, Queue } from '@statusq/core';
import { EXIT, validateTableConfig, secretScrubber, urlSecrets } from '@statusq/core/tools';
import { databaseUrl, tableConfig, type Flags } from '../args.js';
import { withStore, workLogger, type Io } from '../with-store.js';
import { errorFields } from '../log.js';
import { oneLine } from '../text.js';
import { ThroughputSampler } from './sampler.js';
import { dashboardApp, listen } from './server.js';
import { dashboardSettings, isLoopback } from './settings.js';

/**
 * Where vite builds the page: this module's own folder in dist (tsc writes the server's modules there too;
 * only index.html and assets/ are ever served from it).
 */
export const ASSETS_DIR = fileURLToPath(new URL('./', import.meta.url));

export async function dashboard(flags: Flags, io: Io): Promise<number> {
  const config = tableConfig(flags, 'dashboard');
  validateTableConfig(config);
  const settings = dashboardSettings(flags);
  const redact = secretScrubber(urlSecrets(databaseUrl(flags, 'dashboard')));
  return withStore(flags, 'dashboard', false, async (store) => {
    const queue = await Queue.open(store, config);
    if (settings.leaseMs !== undefined && !queue.table.features.leases) {
      throw new ConfigError(`dashboard: table ${config.table} has no lease column (claimed_at), so there is no lease for --lease to judge its rows by`);
    }
    const oldestFirst = await Queue.open(store, { ...config, order: 'oldest' });
    const log = await workLogger({ level: 'info', format: undefined }, io, { table: config.table });
    const sampler = new ThroughputSampler(() => queue.counts(), {
      onError: (error) => log.debug({ err: errorFields(error) }, `throughput: counting rows failed: ${redact(oneLine(error))}`),
    });
    let port = settings.port;
    const app = dashboardApp({
      queue,
      oldestFirst,
      readOnly: settings.readOnly,
      leaseMs: settings.leaseMs,
      guards: { token: settings.token, loopback: isLoopback(settings.host), port: () => port },
      assetsDir: ASSETS_DIR,
      sampler,
      log,
      redact,
    });
    const server = await listen(app, settings.host, settings.port);
    port = server.port;
    const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
    const url = `http://${host}:${port}/`;
    const mode = [settings.readOnly ? 'read-only' : null, settings.token !== null ? 'token required' : null].filter(Boolean).join(', ');
    log.info({ url, readOnly: settings.readOnly, auth: settings.token !== null }, `dashboard on ${url} (table ${config.table}${mode ? `, ${mode}` : ''})`);
    const signal = await new Promise<string>((resolve) => {
      const unregister = io.onSignal((name) => {
        unregister();
        // A second signal while closing: stop at once.
        io.onSignal(() => process.exit(EXIT.stoppedHard));
        resolve(name);
      });
    });
    await server.close();
    await sampler.close();
    log.info({ signal }, `${signal}: dashboard stopped`);
    return EXIT.ok;
  });
}
