import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ConfigError, redactUrl, type AdapterModule, type ConnectOptions, type Store } from '@statusq/core';

/**
 * The adapters of this repository, by URL scheme. Any other scheme `x` is served by `@statusq/adapter-x`
 * when it is installed, and `--adapter` / STATUSQ_ADAPTER names any other module: a new database needs no
 * change here. Users install only the adapter they use.
 */
const BUILT_IN_ADAPTERS: Readonly<Record<string, string>> = {
  sqlite: '@statusq/adapter-sqlite',
  postgres: '@statusq/adapter-postgres',
  postgresql: '@statusq/adapter-postgres',
  mysql: '@statusq/adapter-mysql',
  mariadb: '@statusq/adapter-mysql',
};

/** Names the adapter module explicitly; inherited by the worker processes of `work --processes`. */
export const ADAPTER_VARIABLE = 'STATUSQ_ADAPTER';

export function schemeOf(url: string): string {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  // A one-letter "scheme" is a Windows drive (C:\...), not a URL.
  if (!scheme || scheme.length < 2) {
    throw new ConfigError(`unsupported database URL ${JSON.stringify(redactUrl(url))}: use sqlite:PATH, postgres://user@host:port/db or mysql://user:pass@host:port/db`);
  }
  return scheme;
}

/** The module to import for `url`: the one named by `adapter`, else the scheme's. A path is taken from the working directory. */
export function adapterModuleFor(url: string, adapter: string | undefined): string {
  if (adapter === undefined || adapter === '') {
    const scheme = schemeOf(url);
    return BUILT_IN_ADAPTERS[scheme] ?? `@statusq/adapter-${scheme}`;
  }
  return adapter.startsWith('.') || isAbsolute(adapter) ? pathToFileURL(resolve(adapter)).href : adapter;
}

/** Opens `url` with the adapter module `adapter` names (see adapterModuleFor), or the one its scheme names. */
export async function openStore(url: string, options: ConnectOptions, adapter: string | undefined): Promise<Store> {
  const scheme = schemeOf(url);
  const specifier = adapterModuleFor(url, adapter);
  const shown = specifier.startsWith('file:') ? fileURLToPath(specifier) : specifier;
  let module: Partial<AdapterModule>;
  try {
    module = (await import(specifier)) as Partial<AdapterModule>;
  } catch (error) {
    if ((error as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw error;
    if (String((error as Error).message).includes(`'${shown}'`)) {
      const hint = shown === specifier ? `npm install ${specifier}` : 'no such file';
      throw new ConfigError(`${redactUrl(url)} needs the adapter ${shown} (${hint}; name another with --adapter or ${ADAPTER_VARIABLE})`, { cause: error });
    }
    // The adapter is there but something it imports is not (its database driver, a peer dependency).
    throw new ConfigError(`the adapter ${shown} cannot load: ${(error as Error).message}`, { cause: error });
  }
  if (typeof module.connect !== 'function' || !Array.isArray(module.schemes)) {
    throw new ConfigError(`${shown} is not a statusq adapter: it must export connect(url, options) and schemes`);
  }
  if (!module.schemes.map((s) => String(s).toLowerCase()).includes(scheme)) {
    throw new ConfigError(`the adapter ${shown} serves ${module.schemes.map((s) => `${s}:`).join(', ')}, not ${scheme}: URLs`);
  }
  return module.connect(url, options);
}
