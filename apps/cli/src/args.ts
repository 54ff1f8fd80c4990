import { parseArgs } from 'node:util';
import { ConfigError, type TableConfig } from '@statusq/core';
import { assertAdapterInstalled, assertBrokerInstalled, parseDuration } from '@statusq/core/tools';
import { ADAPTER_VARIABLE } from './adapters.js';

/** The flags each command accepts; anything else is a usage error (exit 2). */
export const COMMAND_FLAGS = {
  init: ['db', 'adapter', 'table', 'with', 'order'],
  migrate: ['db', 'adapter', 'table', 'with', 'beside', 'id-column', 'status-column', 'order-column', 'order', 'kind-column', 'group-column'],
  enqueue: ['db', 'adapter', 'table', 'payload', 'file', 'chunk', 'delay', 'run-at', 'priority', 'key', 'kind', 'kind-column', 'group', 'group-column', 'progress', 'to', 'queue', 'wait', 'timeout'],
  work: [
    'db', 'listen-db', 'adapter', 'table', 'handler', 'handlers', 'id-column', 'status-column', 'order-column', 'kind-column', 'order', 'select', 'concurrency', 'batch',
    'max-attempts', 'retry-delay', 'lease', 'aging', 'poll-max', 'claim-strategy', 'stop-timeout', 'job-timeout', 'job-timeout-grace', 'exit-when-empty', 'verbose',
    'read-only-wait', 'log-level', 'log-format', 'processes', 'metrics-port', 'metrics-host', 'progress', 'schedule',
    'max-instances', 'wait', 'instance-lease', 'rate', 'kind-concurrency', 'kind-rate', 'group-column', 'group-concurrency', 'group-rate', 'from', 'prefetch', 'queue',
  ],
  relay: ['db', 'adapter', 'table', 'to', 'queue', 'id-column', 'status-column', 'order-column', 'order', 'batch', 'redispatch-after', 'poll-max', 'exit-when-empty', 'log-level', 'log-format', 'verbose', 'metrics-port', 'metrics-host'],
  stats: ['db', 'adapter', 'table', 'id-column', 'status-column', 'order-column', 'kind-column', 'group-column', 'json'],
  requeue: ['db', 'adapter', 'table', 'status', 'id', 'id-column', 'status-column', 'order-column', 'lease', 'force'],
  cancel: ['db', 'adapter', 'table', 'id', 'reason', 'id-column', 'status-column', 'order-column'],
  prune: ['db', 'adapter', 'table', 'status', 'older-than', 'by-order-column', 'batch', 'pause', 'dry-run', 'archive', 'id-column', 'status-column', 'order-column'],
  inspect: ['db', 'adapter', 'table', 'status', 'limit', 'id', 'kind', 'id-column', 'status-column', 'order-column', 'kind-column', 'order', 'json'],
  doctor: ['db', 'listen-db', 'adapter', 'table', 'id-column', 'status-column', 'order-column', 'kind-column', 'order', 'stalled-after', 'race-jobs', 'race-workers', 'json'],
  dashboard: ['db', 'adapter', 'table', 'id-column', 'status-column', 'order-column', 'kind-column', 'order', 'lease', 'port', 'host', 'read-only', 'token'],
} as const;

export type Command = keyof typeof COMMAND_FLAGS;

/** Flags that were renamed: using the old name is a usage error that names the new one, never silently accepted. */
const RENAMED_FLAGS: Readonly<Record<string, string>> = { strategy: 'claim-strategy' };

const BOOLEAN_FLAGS = new Set(['exit-when-empty', 'json', 'verbose', 'force', 'read-only', 'dry-run', 'wait', 'by-order-column', 'beside']);
/** A flag that takes no value: dropping it from an argv drops it alone. */
export function isBooleanFlag(name: string): boolean {
  return BOOLEAN_FLAGS.has(name);
}

const REPEATABLE_FLAGS = new Set(['id']);

export type Flags = Record<string, string | string[] | boolean | undefined>;

export function parseCommandLine(command: Command, argv: string[]): Flags {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  for (const flag of COMMAND_FLAGS[command]) {
    options[flag] = { type: BOOLEAN_FLAGS.has(flag) ? 'boolean' : 'string', ...(REPEATABLE_FLAGS.has(flag) ? { multiple: true } : {}) };
  }
  for (const arg of argv) {
    const renamed = /^--([^=]+)/.exec(arg)?.[1];
    if (renamed !== undefined && RENAMED_FLAGS[renamed] !== undefined) throw new ConfigError(`${command}: --${renamed} was renamed --${RENAMED_FLAGS[renamed]}`);
  }
  try {
    const { values } = parseArgs({ args: joinNegativeValues(argv, options), options, strict: true, allowPositionals: false });
    return values as Flags;
  } catch (error) {
    throw new ConfigError(`${command}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
  }
}

/**
 * `--concurrency -1` as `--concurrency=-1`: parseArgs reads a value that starts with `-` as a possible
 * option and refuses it as "ambiguous", which hides the real problem (the number) behind a parser message.
 */
function joinNegativeValues(argv: readonly string[], options: Record<string, { type: 'string' | 'boolean' }>): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const next = argv[i + 1];
    if (arg.startsWith('--') && options[arg.slice(2)]?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

/** Where the database URL may come from when `--db` is not given, first match wins. */
export const DATABASE_URL_VARIABLES = ['STATUSQ_DATABASE_URL', 'DATABASE_URL'] as const;

/**
 * `--db`, else the first of DATABASE_URL_VARIABLES that is set: a URL on the command line is visible to
 * every user through `ps`, so the variables are how a password should travel.
 */
export function databaseUrl(flags: Flags, command: Command): string {
  const url = givenDatabaseUrl(flags);
  if (url === '') throw new ConfigError(`${command}: --db is empty`);
  if (url === undefined) throw new ConfigError(`${command}: --db is required (or set ${DATABASE_URL_VARIABLES.join(' or ')})`);
  return url;
}

/** --db as given (even empty), else the first URL variable that is set; undefined when there is none. */
function givenDatabaseUrl(flags: Flags): string | undefined {
  if (typeof flags.db === 'string') return flags.db;
  return DATABASE_URL_VARIABLES.map((name) => process.env[name]).find(Boolean);
}

/** The adapter module named by --adapter, else by STATUSQ_ADAPTER; undefined: the URL's scheme decides. */
export function adapterOf(flags: Flags): string | undefined {
  return optionalString(flags, 'adapter') ?? process.env[ADAPTER_VARIABLE];
}

/** Where the listening connection's URL may come from when `--listen-db` is not given. */
export const LISTEN_DATABASE_URL_VARIABLE = 'STATUSQ_LISTEN_DATABASE_URL';

/** Where `work` takes the broker URL from when --from is not given (how it reaches `--processes` children too). */
export const WORK_FROM_VARIABLE = 'STATUSQ_WORK_FROM';
/** Where `relay` takes the broker URL from when --to is not given: a URL with a password stays out of `ps`. */
export const RELAY_TO_VARIABLE = 'STATUSQ_RELAY_TO';
/** Where `enqueue` takes the broker URL from when --to is not given. */
export const ENQUEUE_TO_VARIABLE = 'STATUSQ_ENQUEUE_TO';

/**
 * `--listen-db`, else STATUSQ_LISTEN_DATABASE_URL, else undefined (the listening connection uses --db): a URL
 * straight to the server for the listening connection of a store that listens for new rows (listenNotify)
 * when --db goes through a transaction-mode pooler. The
 * adapter checks it as it checks --db (and an adapter without a listening connection refuses it).
 */
export function listenDatabaseUrl(flags: Flags, command: Command): string | undefined {
  const flag = flags['listen-db'];
  if (typeof flag === 'string') {
    if (flag.length === 0) throw new ConfigError(`${command}: --listen-db is empty`);
    return flag;
  }
  return process.env[LISTEN_DATABASE_URL_VARIABLE] || undefined;
}

export function required(flags: Flags, name: string, command: Command): string {
  const value = flags[name];
  if (typeof value !== 'string' || value.length === 0) throw new ConfigError(`${command}: --${name} is required`);
  return value;
}

export function optionalString(flags: Flags, name: string): string | undefined {
  const value = flags[name];
  return typeof value === 'string' ? value : undefined;
}

export function optionalInteger(flags: Flags, name: string): number | undefined {
  const value = optionalString(flags, name);
  if (value === undefined) return undefined;
  // Only the syntax is checked here; the range (and its message) belongs to the Worker or Supervisor option.
  if (!/^-?\d+$/.test(value.trim())) throw new ConfigError(`--${name} must be a whole number, got ${JSON.stringify(value)}`);
  return Number(value);
}

export function optionalDuration(flags: Flags, name: string): number | undefined {
  const value = optionalString(flags, name);
  return value === undefined ? undefined : parseDuration(value, `--${name}`);
}

/** The table description shared by work, stats, requeue, inspect, doctor and dashboard. */
export function tableConfig(flags: Flags, command: Command, defaultTable?: string): TableConfig {
  const table = optionalString(flags, 'table') ?? defaultTable;
  if (table === undefined) throw new ConfigError(`${command}: --table is required`);
  const order = optionalString(flags, 'order');
  if (order !== undefined && order !== 'newest' && order !== 'oldest') throw new ConfigError(`--order must be newest or oldest, got ${JSON.stringify(order)}`);
  const config: TableConfig = { table };
  const idColumn = optionalString(flags, 'id-column');
  const statusColumn = optionalString(flags, 'status-column');
  const orderColumn = optionalString(flags, 'order-column');
  if (idColumn !== undefined) config.idColumn = idColumn;
  if (statusColumn !== undefined) config.statusColumn = statusColumn;
  if (orderColumn !== undefined) config.orderColumn = orderColumn;
  if (order !== undefined) config.order = order;
  const kindColumn = optionalString(flags, 'kind-column');
  const groupColumn = optionalString(flags, 'group-column');
  if (kindColumn !== undefined || groupColumn !== undefined) {
    config.columns = { ...(kindColumn !== undefined && { kind: kindColumn }), ...(groupColumn !== undefined && { group: groupColumn }) };
  }
  const select = optionalString(flags, 'select');
  if (select !== undefined) {
    const names = select.split(',').map((name) => name.trim());
    // Names themselves are checked by the table config (identifiers) and against the table (SchemaError).
    if (names.some((name) => name === '')) throw new ConfigError(`--select takes column names separated by commas, got ${JSON.stringify(select)}`);
    config.select = names;
  }
  return config;
}

/**
 * The broker URL of `--<flag>`, else of `variable`; undefined when neither is set. Its scheme is checked here,
 * before the database is opened: a scheme no broker package serves is bad input (exit 2) with nothing touched.
 */
export function brokerUrl(flags: Flags, flag: 'from' | 'to', variable: string): string | undefined {
  const value = optionalString(flags, flag) ?? (process.env[variable] || undefined);
  if (value === undefined) return undefined;
  if (value.length === 0) throw new ConfigError(`--${flag} is empty`);
  // With neither installed, the database's adapter is named first: nothing runs without it, broker or not.
  const database = givenDatabaseUrl(flags);
  if (database) assertAdapterInstalled(database, adapterOf(flags));
  assertBrokerInstalled(value);
  return value;
}

/** --queue: the broker queue (stream) name when not `statusq.<table>`, as given to relay and work alike. */
export function brokerQueueName(flags: Flags): string | undefined {
  const name = optionalString(flags, 'queue');
  if (name !== undefined && !/^[A-Za-z0-9_.-]{1,200}$/.test(name)) throw new ConfigError(`--queue takes 1 to 200 letters, digits, '.', '_' or '-', got ${JSON.stringify(name)}`);
  return name;
}

export interface MetricsSettings {
  port: number;
  host: string;
}

/** `--metrics-port` (0: any free port, which the log line names) and `--metrics-host`; null when not asked for. */
export function metricsSettings(flags: Flags): MetricsSettings | null {
  const port = optionalInteger(flags, 'metrics-port');
  const host = optionalString(flags, 'metrics-host');
  if (port === undefined) {
    if (host !== undefined) throw new ConfigError('--metrics-host needs --metrics-port');
    return null;
  }
  if (port < 0 || port > 65_535) throw new ConfigError(`--metrics-port must be 1 to 65535 (or 0 for any free port), got ${port}`);
  if (host !== undefined && host.trim() === '') throw new ConfigError('--metrics-host is empty');
  return { port, host: host ?? '127.0.0.1' };
}
