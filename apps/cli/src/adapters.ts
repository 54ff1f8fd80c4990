import { ConfigError, redactUrl, type AdapterModule, type ConnectOptions, type Store } from '@statusq/core';

/** URL scheme -> the adapter package that serves it. Users install only the adapter they use. */
const ADAPTER_PACKAGES: Record<string, string> = {
  sqlite: '@statusq/adapter-sqlite',
  postgres: '@statusq/adapter-postgres',
  postgresql: '@statusq/adapter-postgres',
  mysql: '@statusq/adapter-mysql',
  mariadb: '@statusq/adapter-mysql',
};

export function schemeOf(url: string): string {
  const match = /^([a-z][a-z0-9+.-]*):/i.exec(url);
  const scheme = match?.[1]?.toLowerCase();
  if (!scheme || !(scheme in ADAPTER_PACKAGES)) {
    throw new ConfigError(`unsupported database URL ${JSON.stringify(redactUrl(url))}: use sqlite:PATH, postgres://user@host:port/db or mysql://user:pass@host:port/db`);
  }
  return scheme;
}


export async function openStore(url: string, options: ConnectOptions): Promise<Store> {
  const packageName = ADAPTER_PACKAGES[schemeOf(url)]!;
  let adapter: AdapterModule;
  try {
    adapter = (await import(packageName)) as AdapterModule;
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND') {
      throw new ConfigError(`${redactUrl(url)} needs the ${packageName} package: npm install ${packageName}`, { cause: error });
    }
    throw error;
  }
  return adapter.connect(url, options);
}
