// What several commands share (the store, the broker, the log, the flags they read alike): a command imports
// these from here, never from another command.
import { ConfigError, type JobId, type MigrateReport, type Order, type Store, type TableConfig } from '@statusq/core';
import type { Broker, ConnectOptions, StoreWarning, ColumnInfo } from '@statusq/core/tools';
import { adapterOf, databaseUrl, optionalString, type Command, type Flags } from './args.js';
import { openStore } from './adapters.js';
import { createLogger, type LogDestination, type Logger, type LogSettings } from './log.js';

export interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
  /** Registers a handler for SIGINT/SIGTERM; returns an unregister function. */
  onSignal: (handler: (signal: string) => void) => () => void;
  /**
   * Standard input as a stream, for `--file -` (the bin: process.stdin). Read as chunks arrive: a synchronous
   * read of a pipe whose writer had not written yet failed with EAGAIN.
   */
  readStdin: () => AsyncIterable<Buffer>;
  /** Where `work` writes its log (the bin: standard output, asynchronously). Default: io.out, not a terminal. */
  logDestination?: () => Promise<LogDestination>;
}

/** The logger of `work` (and `dashboard`); `base`: the fields every line carries besides time, level and pid. */
export async function workLogger(settings: LogSettings, io: Io, base: Record<string, unknown>, beside: (destination: LogDestination) => LogDestination = (d) => d): Promise<Logger> {
  const destination: LogDestination = io.logDestination ? await io.logDestination() : { write: (text) => io.out(text.replace(/\n$/, '')), isTTY: false };
  return createLogger(settings, beside(destination), base);
}

/** Opens the store for one command and always closes it. */
export async function withStore<T>(flags: Flags, command: Command, create: boolean, body: (store: Store) => Promise<T>, options: Omit<ConnectOptions, 'create'> = {}): Promise<T> {
  const store = await openStore(databaseUrl(flags, command), { ...options, create }, adapterOf(flags));
  try {
    return await body(store);
  } finally {
    await store.close();
  }
}

/** Runs `body` with the broker of `url` (none without one), closed after it whatever happens. */
export async function withBroker<T>(store: Store, config: TableConfig, url: string | undefined, queue: string | undefined, body: (broker: Broker | undefined) => Promise<T>): Promise<T> {
  if (url === undefined) return body(undefined);
  const { openBroker } = await import('./broker.js');
  const broker = await openBroker(store, config, url, 'statusq work --from', queue);
  try {
    return await body(broker);
  } finally {
    await broker.close();
  }
}

/**
 * The store's warnings (ConnectOptions.onWarning: wake-ups lost behind a pooler) as warn lines of the work
 * log, which exists only once the store is open: a warning that comes before it waits for it.
 */
export function storeWarningsToLog(): { onWarning: (warning: StoreWarning) => void; attach: (log: Logger) => void } {
  const early: StoreWarning[] = [];
  let target: Logger | null = null;
  const write = (log: Logger, warning: StoreWarning) => log.warn({ code: warning.code, fix: warning.fix }, `${warning.message}; fix: ${warning.fix}`);
  return {
    onWarning: (warning) => (target === null ? early.push(warning) : write(target, warning)),
    attach: (log) => {
      target = log;
      for (const warning of early.splice(0)) write(log, warning);
    },
  };
}

/** --order, checked (work, inspect and the rest read it through tableConfig). */
export function orderFlag(flags: Flags): Order | undefined {
  const order = optionalString(flags, 'order');
  if (order !== undefined && order !== 'newest' && order !== 'oldest') throw new ConfigError(`--order must be newest or oldest, got ${JSON.stringify(order)}`);
  return order;
}

/**
 * An id from the command line, as the id column compares it: an integer column takes only an integer
 * (bound as a number, so `010` is 10); any other column the exact text (`010` is not `10`, and a store may
 * never cast a text column to a number to compare it with one).
 */
export function parseId(text: string, column: ColumnInfo, command: Command, what = '--id'): JobId {
  if (text.length === 0) throw new ConfigError(`${command}: ${what} needs a value`);
  if (!column.integer) return text;
  if (!/^[-+]?\d+$/.test(text)) throw new ConfigError(`${command}: ${what} ${JSON.stringify(text)} is not an integer, and id column ${column.name} is ${column.type}`);
  const value = BigInt(text);
  return Number.isSafeInteger(Number(value)) ? Number(value) : value;
}

export function hasAdditions(report: MigrateReport): boolean {
  return report.addedColumns.length > 0 || createdIndexes(report).length > 0 || report.beside?.created === true || (report.beside?.addedColumns.length ?? 0) > 0;
}

function createdIndexes(report: MigrateReport): string[] {
  return [report.createdIndex, report.createdPriorityIndex, report.createdKeyIndex, report.createdDispatchIndex, report.createdKindIndex, report.createdGroupIndex].filter((name): name is string => name !== null);
}

export function describeAdditions(report: MigrateReport): string {
  const parts = [];
  if (report.beside?.created) parts.push(`claims table ${report.beside.table}`);
  else if (report.beside && report.beside.addedColumns.length > 0) parts.push(`columns ${report.beside.addedColumns.join(', ')} to ${report.beside.table}`);
  if (report.addedColumns.length > 0) parts.push(`columns ${report.addedColumns.join(', ')}`);
  const indexes = createdIndexes(report);
  if (indexes.length > 0) parts.push(`${indexes.length === 1 ? 'index' : 'indexes'} ${indexes.join(', ')}`);
  return parts.join(' and ');
}
