// The `work` command's structured log: pino, JSON lines or pretty lines, written through the CLI's scrub.
import type { Logger } from 'pino';
import { ConfigError, StoreError } from '@statusq/core';
import { optionalString, type Flags } from './args.js';
import { bounded, clip } from './text.js';

export type { Logger } from 'pino';

export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** `format` undefined: pretty on a terminal, JSON otherwise. */
export interface LogSettings {
  level: LogLevel;
  format: LogFormat | undefined;
}

/**
 * Where log lines go. `write` takes whole lines, newline included; `isTTY` picks the default format and
 * colour. Without one (main() called with a plain Io), lines go through io.out.
 */
export interface LogDestination {
  write(text: string): void;
  isTTY: boolean;
}

/** Longest stack a log line carries: a handler's error must not make one line megabytes long. */
export const MAX_STACK_CHARS = 4096;

/** `--log-level`, `--log-format` and `--verbose` (an alias of `--log-level debug`, kept for old scripts). */
export function logSettings(flags: Flags): LogSettings {
  const level = optionalString(flags, 'log-level');
  const format = optionalString(flags, 'log-format');
  if (level !== undefined && !(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new ConfigError(`--log-level must be ${LOG_LEVELS.slice(0, -1).join(', ')} or ${LOG_LEVELS.at(-1)}, got ${JSON.stringify(level)}`);
  }
  if (format !== undefined && !(LOG_FORMATS as readonly string[]).includes(format)) {
    throw new ConfigError(`--log-format must be ${LOG_FORMATS.join(' or ')}, got ${JSON.stringify(format)}`);
  }
  if (flags.verbose === true && level !== undefined && level !== 'debug') {
    throw new ConfigError(`--verbose means --log-level debug; it contradicts --log-level ${level}: give one`);
  }
  return { level: flags.verbose === true ? 'debug' : ((level as LogLevel | undefined) ?? 'info'), format: format as LogFormat | undefined };
}

/**
 * Standard output as a pino destination. To a pipe or file it is asynchronous: a write never waits for the
 * reader, and pino flushes what is still buffered from an `exit` hook, so the lines before a process.exit()
 * are not lost. To a terminal it is synchronous, as Node's own TTY streams are: the status line is drawn on
 * the same terminal through standard error, and a log line flushed after the final frame erased it (seen in
 * CI as `work --processes 2` ending with no status row).
 */
export async function stdoutLogDestination(): Promise<LogDestination> {
  const { pino } = await import('pino');
  const isTTY = process.stdout.isTTY === true;
  const stream = pino.destination({ dest: 1, sync: isTTY });
  return { write: (text) => stream.write(text), isTTY };
}

/**
 * A logger over `destination`. Pretty lines are made in this thread (pino-pretty's prettyFactory) rather
 * than in a transport's worker thread: nothing to start, nothing to wait for at exit, and the text reaches
 * the destination (and its scrub) as it will be printed.
 */
export async function createLogger(settings: LogSettings, destination: LogDestination, base: Record<string, unknown>): Promise<Logger> {
  const { pino } = await import('pino');
  const format = settings.format ?? (destination.isTTY ? 'pretty' : 'json');
  let stream: { write(text: string): void } = destination;
  if (format === 'pretty') {
    const { prettyFactory } = (await import('pino-pretty')).default;
    const prettify = prettyFactory({ colorize: destination.isTTY, translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l', ignore: 'pid,workerId,counters', messageFormat: '[{pid} {workerId}] {msg}' });
    stream = { write: (text) => destination.write(prettify(text)) };
  }
  return pino(
    {
      level: settings.level,
      base: { pid: process.pid, ...base },
      timestamp: pino.stdTimeFunctions.isoTime,
      // Level names, not pino's numbers: `jq 'select(.level == "error")'` reads without a table.
      formatters: { level: (label) => ({ level: label }) },
      // `err` fields come from errorFields (bounded, one line): pino's own error serializer would add every
      // property of the thrown value, unbounded.
      serializers: { err: (value: unknown) => value },
    },
    stream,
  );
}

/**
 * A thrown value as log fields: type, message (one line, bounded) and stack (bounded), plus the store
 * error's kind and code. `reason` stands in for the message when nothing was thrown (ctx.giveUp).
 */
export function errorFields(error: unknown, reason?: string): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  if (error instanceof Error) {
    fields.type = error.name;
    fields.message = clip(error.message);
    if (typeof error.stack === 'string') fields.stack = bounded(error.stack, MAX_STACK_CHARS);
    if (error instanceof StoreError) {
      fields.kind = error.kind;
      if (error.nativeCode !== undefined) fields.code = error.nativeCode;
    }
  } else fields.message = clip(reason ?? String(error));
  return fields;
}

