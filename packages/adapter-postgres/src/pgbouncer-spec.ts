/**
 * A PgBouncer of a test's (or a bench run's) own in front of a PostgreSQL server, as production fleets run
 * one: the ServerSpec that @statusq/conformance's PrivateServer starts, stops and places in a network
 * namespace, plus the URL helpers around it. Part of `./testing`; it needs Debian's `pgbouncer` package
 * (scripts/services.sh installs it), or STATUSQ_PGBOUNCER_BIN naming the binary.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { withClient } from './with-client.js';
import type { ServerSpec } from '@statusq/test-fixtures';

/** The PostgreSQL server a PgBouncer forwards to, and the account it logs in there with. */
export interface PgBouncerBackend {
  host: string;
  port: number;
  user: string;
  password?: string;
}

export interface PgBouncerOptions {
  /** Default `transaction`: a server connection is lent for one transaction, the mode fleets scale out with. */
  poolMode?: 'session' | 'transaction' | 'statement';
  /** Server connections per database and user (PgBouncer's default_pool_size; default 20, its own default). */
  poolSize?: number;
}

/** PgBouncer as test-fixtures' PrivateServer runs it. */
export type PgBouncerSpec = ServerSpec;

const DEFAULT_BIN = '/usr/sbin/pgbouncer';
/** A PgBouncer on a free port answers at once or not yet: the readiness probe asks again until it does. */
const CONNECT_TIMEOUT_MS = 2000;

function pgBouncerBin(): string {
  return process.env.STATUSQ_PGBOUNCER_BIN || DEFAULT_BIN;
}

/** Null when the PgBouncer binary is there, else why not (a skip reason, or a failure under STATUSQ_REQUIRE_DATABASES=1). */
export function pgBouncerUnavailable(): string | null {
  const bin = pgBouncerBin();
  return existsSync(bin) ? null : `no PgBouncer at ${bin} (apt-get install pgbouncer, or scripts/services.sh; STATUSQ_PGBOUNCER_BIN names another)`;
}

/** `PgBouncer 1.18.0`, as the binary reports itself (for a report). */
export function pgBouncerVersion(): string {
  return execFileSync(pgBouncerBin(), ['--version'], { encoding: 'utf8', timeout: 10_000 }).split('\n')[0]!.trim();
}

/** The server and account of a PostgreSQL URL, for a PgBouncer in front of that server. */
export function pgBouncerBackend(url: string): PgBouncerBackend {
  const parsed = new URL(url);
  const backend: PgBouncerBackend = { host: parsed.hostname, port: Number(parsed.port || 5432), user: decodeURIComponent(parsed.username || 'postgres') };
  if (parsed.password) backend.password = decodeURIComponent(parsed.password);
  return backend;
}

/** `url` (a database on the backend) as reached through the PgBouncer on `host`:`port`. */
export function throughPgBouncer(url: string, port: number, host = '127.0.0.1'): string {
  const routed = new URL(url);
  routed.hostname = host;
  routed.port = String(port);
  return routed.toString();
}

/** A connection-string value as PgBouncer's [databases] section reads it: quoted, so spaces and `=` stay in. */
function quoted(value: string, what: string): string {
  if (/['\\]/.test(value)) throw new Error(`a private PgBouncer cannot pass on a ${what} holding ' or \\`);
  return `'${value}'`;
}

/**
 * PgBouncer in front of `backend`: every database name maps to the same name there, logged in as the
 * backend's account whoever the client says it is (auth_type = any: only the test's own hosts reach it).
 * statusq sets its session's time zone through the `options` startup parameter, which PgBouncer refuses
 * unless told to ignore it, as a production ini must (see the README, "Behind PgBouncer"). It runs as the
 * server's OS user (PgBouncer refuses root), logs to the server log of PrivateServer's directory, and
 * SIGTERM stops it at once.
 */
export function pgBouncerSpec(backend: PgBouncerBackend, options: PgBouncerOptions = {}): PgBouncerSpec {
  const bin = pgBouncerBin();
  const login = [`host=${quoted(backend.host, 'host')}`, `port=${backend.port}`, `user=${quoted(backend.user, 'user')}`, ...(backend.password === undefined ? [] : [`password=${quoted(backend.password, 'password')}`])];
  const ini = (port: number, host: string) =>
    [
      '[databases]',
      `* = ${login.join(' ')}`,
      '[pgbouncer]',
      `listen_addr = ${host}`,
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      `pool_mode = ${options.poolMode ?? 'transaction'}`,
      `default_pool_size = ${options.poolSize ?? 20}`,
      'max_client_conn = 2000',
      'ignore_startup_parameters = options, extra_float_digits',
      'log_connections = 0',
      'log_disconnections = 0',
      'logfile =',
      'pidfile =',
      '',
    ].join('\n');
  return {
    name: 'PgBouncer',
    user: 'postgres',
    // Nothing to initialise; running the binary once proves it is there and runs as that user.
    init: () => ({ file: bin, args: ['--version'] }),
    run: (dir, port, host) => {
      const file = join(dir, 'pgbouncer.ini');
      writeFileSync(file, ini(port, host), { mode: 0o644 });
      return { file: bin, args: [file] };
    },
    stopSignal: 'SIGTERM',
    // Through to the backend: a PgBouncer that listens but cannot log in there is not ready either.
    ready: (port, host) =>
      withClient(`postgres://${encodeURIComponent(backend.user)}@${host}:${port}/postgres`, (c) => c.query('SELECT 1'), CONNECT_TIMEOUT_MS).then(
        () => true,
        () => false,
      ),
  };
}
