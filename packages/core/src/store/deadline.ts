import { ConfigError } from '../protocol/errors.js';
import type { Statement } from './store.js';

/**
 * Settles like `call`, unless `ms` pass first: then `expire` runs and the returned promise rejects with the
 * error it returns, whether or not `call` ever settles. A driver waiting on a socket that no longer carries
 * packets (a frozen network) may never settle on its own, so `expire` is where the caller cuts that socket;
 * what `call` does afterwards is ignored.
 */
export function raceDeadline<T>(call: Promise<T>, ms: number, expire: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let open = true;
    const timer = setTimeout(() => {
      if (!open) return;
      open = false;
      let error: Error;
      try {
        error = expire();
      } catch (thrown) {
        error = thrown instanceof Error ? thrown : new Error(String(thrown));
      }
      reject(error);
    }, ms);
    call.then(
      (value) => {
        if (!open) return;
        open = false;
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        if (!open) return;
        open = false;
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/**
 * `promise`'s value, or 'aborted' as soon as `signal` aborts: a wait on a driver call that shutdown must not
 * sit through (the call then settles unobserved; its rejection is caught so it is not reported as unhandled).
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | 'aborted'> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.resolve('aborted');
  }
  return new Promise<T | 'aborted'>((resolve, reject) => {
    const onAbort = () => {
      promise.catch(() => undefined);
      resolve('aborted');
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** Whether `promise` settles (either way) within `ms`; it is left running either way. */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      expired,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Deadlines of one store call, in ms; see the adapters' `queryTimeoutMs` and `schemaTimeoutMs`. */
export interface StoreCallDeadlines {
  queryTimeoutMs: number;
  schemaTimeoutMs: number;
}

const SCHEMA_CHANGE = /^\s*(CREATE|ALTER|DROP)\b/i;

/**
 * The deadline of a call that runs `statements`: the schema one when any of them changes the schema (an
 * index build or a table rebuild on a big application table may take minutes), the query one otherwise.
 */
export function deadlineOf(statements: readonly Statement[], deadlines: StoreCallDeadlines): number {
  return statements.some((s) => SCHEMA_CHANGE.test(s.sql)) ? Math.max(deadlines.schemaTimeoutMs, deadlines.queryTimeoutMs) : deadlines.queryTimeoutMs;
}

/** A deadline option (ms): a positive integer, or the default when absent. */
export function deadlineOption(value: number | undefined, fallback: number, what: string): number {
  const ms = value ?? fallback;
  if (!Number.isSafeInteger(ms) || ms < 1) throw new ConfigError(`${what} must be a positive whole number of milliseconds, got ${String(value)}`);
  return ms;
}

/** What every server adapter's options say about its connections (see serverConnectionOptions). */
export interface ServerConnectionOptions {
  /** Most pooled connections. Default 4. */
  maxConnections?: number | undefined;
  /** How long to wait for a connection (a new one, or a free one of the pool). Default 10000 ms. */
  connectTimeoutMs?: number | undefined;
  /**
   * Longest one call may wait for the database once it holds a connection: every statement of it, COMMIT
   * included. Past it the call rejects with ConnectionLost and the connection is destroyed, never reused (an
   * answer arriving late would be taken for the next call's). Default 30000 ms.
   */
  queryTimeoutMs?: number | undefined;
  /** The same for a call that changes the schema (CREATE, ALTER, DROP: init, migrate), which may build an index on a big table. Default 600000 ms. */
  schemaTimeoutMs?: number | undefined;
}

/**
 * Settings every server adapter shares, so a server behaves alike whatever its driver: close() lets
 * connections end politely for `closeGraceMs`, then cuts the sockets that have not; TCP keepalive probes
 * start after `keepAliveDelayMs` of silence, so a peer that vanished (host down, no RST) is noticed.
 */
export const SERVER_CONNECTION = { closeGraceMs: 1000, keepAliveDelayMs: 10_000 } as const;

/** A server adapter's connection options, validated (ConfigError) and with their defaults. */
export function serverConnectionOptions(options: ServerConnectionOptions): { maxConnections: number; connectTimeoutMs: number; deadlines: StoreCallDeadlines } {
  const maxConnections = options.maxConnections ?? 4;
  if (!Number.isSafeInteger(maxConnections) || maxConnections < 1) throw new ConfigError(`maxConnections must be a positive integer, got ${String(options.maxConnections)}`);
  return {
    maxConnections,
    connectTimeoutMs: deadlineOption(options.connectTimeoutMs, 10_000, 'connectTimeout'),
    deadlines: {
      queryTimeoutMs: deadlineOption(options.queryTimeoutMs, 30_000, 'queryTimeout'),
      schemaTimeoutMs: deadlineOption(options.schemaTimeoutMs, 600_000, 'schemaTimeout'),
    },
  };
}

/** The URL query parameters (ms) every server adapter reads its deadlines from, by option name. */
export const DEADLINE_URL_PARAMETERS = { connectTimeout: 'connectTimeoutMs', queryTimeout: 'queryTimeoutMs', schemaTimeout: 'schemaTimeoutMs' } as const;

export type UrlDeadlines = Partial<Record<(typeof DEADLINE_URL_PARAMETERS)[keyof typeof DEADLINE_URL_PARAMETERS], number>>;

/** The deadlines a database URL sets; `where` names the URL in errors (`the <adapter's database> URL`). */
export function deadlinesFromUrl(params: URLSearchParams, where: string): UrlDeadlines {
  const deadlines: UrlDeadlines = {};
  for (const [name, option] of Object.entries(DEADLINE_URL_PARAMETERS)) {
    const raw = params.get(name);
    if (raw === null) continue;
    const ms = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(ms) || ms < 1) {
      throw new ConfigError(`${name} in ${where} must be a positive whole number of milliseconds, got ${JSON.stringify(raw)}`);
    }
    deadlines[option] = ms;
  }
  return deadlines;
}

/** The part of a driver's socket that closing a store needs (a net.Socket or tls.TLSSocket). */
export interface ClosableSocket {
  readonly destroyed: boolean;
  destroy(): void;
  once(event: 'close', listener: () => void): unknown;
}

/**
 * Waits for `ending` (a pool asked to end politely) and then for every socket in `sockets` to close. A frozen
 * network never delivers the server's goodbye, and a half-closed socket keeps the process alive, so after
 * `graceMs` the sockets still open are destroyed and this waits at most `graceMs` more.
 */
export async function endWithin(ending: Promise<unknown>, sockets: ReadonlySet<ClosableSocket>, graceMs: number): Promise<void> {
  const closed = (socket: ClosableSocket) => (socket.destroyed ? Promise.resolve() : new Promise<void>((resolve) => socket.once('close', () => resolve())));
  const done = ending.catch(() => undefined).then(() => Promise.all([...sockets].map(closed)));
  if (await settlesWithin(done, graceMs)) return;
  for (const socket of sockets) socket.destroy();
  await settlesWithin(done, graceMs);
}
