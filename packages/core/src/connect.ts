import { existsSync, realpathSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { resolve as resolveModule } from 'import-meta-resolve';
import { ConfigError } from './protocol/errors.js';
import { PUBLISHED_BROKERS, defaultBrokerQueue, type Broker, type BrokerConnectOptions, type BrokerModule } from './broker/broker.js';
import type { AdapterModule, ConnectOptions, Store } from './store/store.js';
import { redactUrl } from './store/urls.js';

/**
 * The package that serves each scheme of the adapters published with statusq. This is a list of package
 * names and nothing more: what a database does lives in its adapter. Any other scheme `x` is served by
 * `@statusq/adapter-x`, and the `adapter` option names any module outright, so a new database needs no
 * change here.
 */
const PUBLISHED_ADAPTERS: Readonly<Record<string, string>> = {
  sqlite: '@statusq/adapter-sqlite',
  postgres: '@statusq/adapter-postgres',
  postgresql: '@statusq/adapter-postgres',
  mysql: '@statusq/adapter-mysql',
  mariadb: '@statusq/adapter-mysql',
};

export interface ConnectUrlOptions extends ConnectOptions {
  /**
   * The adapter to use instead of the one the URL's scheme names: an adapter module itself (for bundlers and
   * tests), a package name, or a file path (relative to the working directory). Its `schemes` must include
   * the URL's.
   */
  adapter?: string | AdapterModule | undefined;
}

/**
 * Opens `url` with the adapter its scheme names (`sqlite:PATH`, `postgres://`, `mysql://`, `mariadb://`,
 * any `x:` as `@statusq/adapter-x`) or the one `options.adapter` names. The adapter is looked up where the
 * application installed it, so an application depends on core plus the one adapter it uses; a missing one
 * is a ConfigError saying what to install. Other options are handed to the adapter's `connect`.
 */
export async function connect<Options extends ConnectUrlOptions>(url: string, options?: Options): Promise<Store> {
  const { adapter, ...adapterOptions } = options ?? ({} as Options);
  const scheme = schemeOf(url);
  const { module, name } = typeof adapter === 'object' && adapter !== null ? { module: adapter as Partial<AdapterModule>, name: 'given as the adapter option' } : await loadAdapter(url, adapter);
  if (typeof module.connect !== 'function' || !Array.isArray(module.schemes)) {
    throw new ConfigError(`${name} is not a statusq adapter: it must export connect(url, options) and schemes`);
  }
  if (!module.schemes.map((s) => String(s).toLowerCase()).includes(scheme)) {
    throw new ConfigError(`the adapter ${name} serves ${module.schemes.map((s) => `${s}:`).join(', ')}, not ${scheme}: URLs`);
  }
  return module.connect(url, adapterOptions);
}

/** The scheme of a database URL, lower-cased; a ConfigError when there is none. */
export function schemeOf(url: string): string {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  // A one-letter "scheme" is a Windows drive (C:\...), not a URL.
  if (!scheme || scheme.length < 2) {
    throw new ConfigError(`unsupported database URL ${JSON.stringify(redactUrl(url))}: use sqlite:PATH, postgres://user@host:port/db or mysql://user:pass@host:port/db`);
  }
  return scheme;
}

/** The module `connect` imports for `url`: the one `adapter` names, else the scheme's package. */
export function adapterModuleFor(url: string, adapter?: string): string {
  if (adapter === undefined || adapter === '') {
    const scheme = schemeOf(url);
    return PUBLISHED_ADAPTERS[scheme] ?? `@statusq/adapter-${scheme}`;
  }
  return adapter.startsWith('.') || isAbsolute(adapter) ? pathToFileURL(resolve(adapter)).href : adapter;
}

const ADAPTER_ELSE = "connect's adapter option, the CLI's --adapter or STATUSQ_ADAPTER";

async function loadAdapter(url: string, adapter: string | undefined): Promise<{ module: Partial<AdapterModule>; name: string }> {
  return loadPackage<AdapterModule>(url, adapterModuleFor(url, adapter), 'adapter', ADAPTER_ELSE);
}

/**
 * Throws the ConfigError connect would for a URL whose adapter is not installed, without importing it: the CLI
 * checks the database's adapter before a broker's package, so that with neither installed the first named is
 * the one nothing runs without.
 */
export function assertAdapterInstalled(url: string, adapter?: string): void {
  findPackage(url, adapterModuleFor(url, adapter), 'adapter', ADAPTER_ELSE);
}

/** Where the adapter or broker package `specifier` is installed (see locate), or the ConfigError naming it. */
function findPackage(url: string, specifier: string, what: 'adapter' | 'broker package', orElse?: string): { found: string; name: string } {
  const isFile = specifier.startsWith('file:');
  const name = isFile ? fileURLToPath(specifier) : specifier;
  if (isFile && !existsSync(name)) throw new ConfigError(`${redactUrl(url)} needs the ${what} ${name} (no such file)`);
  const found = isFile ? specifier : locate(specifier, what);
  if (found === undefined) throw new ConfigError(`${redactUrl(url)} needs the ${what} ${name} (npm install ${name}${orElse ? `; or name another: ${orElse}` : ''})`);
  return { found, name };
}

/** Imports the adapter or broker package `specifier` from where the application installed it (see locate). */
async function loadPackage<M>(url: string, specifier: string, what: 'adapter' | 'broker package', orElse: string): Promise<{ module: Partial<M>; name: string }> {
  const { found, name } = findPackage(url, specifier, what, orElse);
  try {
    return { module: (await import(found)) as Partial<M>, name };
  } catch (error) {
    if ((error as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw error;
    // The package is there but something it imports is not (its driver, a peer dependency).
    throw new ConfigError(`the ${what} ${name} cannot load: ${(error as Error).message}`, { cause: error });
  }
}

/** The module `connectBroker` imports for `url`: the one `broker` names, else the scheme's package. */
export function brokerModuleFor(url: string, broker?: string): string {
  if (broker === undefined || broker === '') {
    const scheme = brokerSchemeOf(url);
    return PUBLISHED_BROKERS[scheme] ?? `@statusq/broker-${scheme}`;
  }
  return broker.startsWith('.') || isAbsolute(broker) ? pathToFileURL(resolve(broker)).href : broker;
}

/**
 * Throws the ConfigError connectBroker would (a URL that is not one, a scheme no installed package serves)
 * without importing or connecting: the CLI checks its broker URL before it opens the database.
 */
export function assertBrokerInstalled(url: string, broker?: string): void {
  findPackage(url, brokerModuleFor(url, broker), 'broker package');
}

function brokerSchemeOf(url: string): string {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1]?.toLowerCase();
  if (!scheme) throw new ConfigError(`unsupported broker URL ${JSON.stringify(redactUrl(url))}: use amqp://user:pass@host:5672 (RabbitMQ) or nats://host:4222 (NATS JetStream)`);
  return scheme;
}

export interface ConnectBrokerOptions extends Partial<BrokerConnectOptions> {
  /** The table whose rows the messages name: the default queue is `statusq.<table>`. */
  table: string;
  /** A broker module itself, a package name or a file path, instead of the one the URL's scheme names. */
  broker?: string | BrokerModule | undefined;
}

/**
 * Opens `url` with the broker package its scheme names (`amqp://`/`amqps://`: @statusq/broker-rabbitmq,
 * `nats://`: @statusq/broker-nats, any `x://` as @statusq/broker-x). A scheme no installed package serves is
 * a ConfigError naming the package to install; a broker that does not answer within the connect timeout is
 * BrokerError Unreachable.
 */
export async function connectBroker(url: string, options: ConnectBrokerOptions): Promise<Broker> {
  const { broker, table, ...rest } = options;
  const scheme = brokerSchemeOf(url);
  const { module, name } =
    typeof broker === 'object' && broker !== null
      ? { module: broker as Partial<BrokerModule>, name: 'given as the broker option' }
      : await loadPackage<BrokerModule>(url, brokerModuleFor(url, broker), 'broker package', "the broker option, the CLI's --broker");
  if (typeof module.connectBroker !== 'function' || !Array.isArray(module.schemes)) {
    throw new ConfigError(`${name} is not a statusq broker package: it must export connectBroker(url, options) and schemes`);
  }
  if (!module.schemes.map((s) => String(s).toLowerCase()).includes(scheme)) {
    throw new ConfigError(`the broker package ${name} serves ${module.schemes.map((s) => `${s}://`).join(', ')}, not ${scheme}:// URLs`);
  }
  return module.connectBroker(url, { ...rest, queue: rest.queue ?? defaultBrokerQueue(table) });
}

/**
 * Where a package is installed, looked up the way the application would import it: from the main script
 * (the application, or the `statusq` command, which lists the adapters as its peers), then from the working
 * directory (an application run from its project), and last from core's own place, where npm hoists an
 * application's packages beside it. Core's place comes last because under pnpm it also reaches packages
 * hoisted for other dependents, which the application never declared.
 */
function locate(specifier: string, what: string): string | undefined {
  const main = process.argv[1];
  const mains = main ? [main, realpathOrSelf(main)].map((path) => pathToFileURL(path).href) : [];
  const bases = [...mains, pathToFileURL(`${process.cwd()}/`).href, import.meta.url];
  for (const base of bases) {
    try {
      return resolveModule(specifier, base);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === 'ERR_MODULE_NOT_FOUND' || code === 'ERR_PACKAGE_PATH_NOT_EXPORTED') continue;
      // A name no package can have, a broken package.json: bad input, said as such.
      throw new ConfigError(`the ${what} ${specifier} cannot be resolved: ${(error as Error).message}`, { cause: error });
    }
  }
  return undefined;
}

function realpathOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
