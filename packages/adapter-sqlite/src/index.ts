import { ConfigError, redactUrl, type AdapterModule, type ConnectOptions } from '@statusq/core/adapter';
import { SqliteStore, type SqliteStoreOptions } from './sqlite-store.js';

export { SqliteStore, type SqliteStoreOptions } from './sqlite-store.js';
export { sqliteDialect } from './sqlite-dialect.js';
export { toStoreError } from './sqlite-errors.js';

/** The URL schemes this adapter serves. */
export const schemes: readonly string[] = ['sqlite'];

/**
 * Parses `sqlite:PATH` (relative or absolute), `sqlite:///abs/path`, or `sqlite::memory:`.
 */
export function filenameFromUrl(url: string): string {
  if (typeof url !== 'string' || !url.startsWith('sqlite:')) throw new ConfigError(`not a SQLite URL: ${JSON.stringify(typeof url === 'string' ? redactUrl(url) : url)} (use sqlite:PATH)`);
  let path = url.slice('sqlite:'.length);
  if (path.startsWith('//')) path = path.slice(2);
  if (path.length === 0) throw new ConfigError(`SQLite URL ${JSON.stringify(url)} has no file path (use sqlite:PATH)`);
  return path;
}

/** Opens a store from a `sqlite:` URL; with `create: false` a missing file is a ConfigError, not a new empty database. */
export async function connect(url: string, options: ConnectOptions & Omit<SqliteStoreOptions, 'filename'> = {}): Promise<SqliteStore> {
  const { create = true, listenUrl, onWarning: _nothingToWarnOf, ...rest } = options;
  if (listenUrl !== undefined) throw new ConfigError('listenUrl (--listen-db) is the URL of a PostgreSQL listening connection; SQLite has none (idle workers watch the database file)');
  return new SqliteStore({ fileMustExist: !create, ...rest, filename: filenameFromUrl(url) });
}

/**
 * The package as the CLI and other loaders see it (by URL scheme); `satisfies` makes a change of the contract
 * fail this adapter's build.
 */
export default { schemes, connect } satisfies AdapterModule;
