/**
 * A PostgreSQL server of the test's own, for the conformance suite's outage cases (a restart, every
 * connection dropped): initdb into a temp dir, `postgres` on a free port of 127.0.0.1 with trust auth,
 * fsync off (nothing here must survive the machine). The shared server on 5432 is never touched.
 * Binaries: STATUSQ_POSTGRES_BIN, else the newest /usr/lib/postgresql/<version>/bin.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PrivateServer, type DisposableServer, type ServerSpec } from '@statusq/conformance';
import { withClient } from '../testing.js';

const DATABASE = 'statusq_outage';

function binDir(): string {
  const configured = process.env.STATUSQ_POSTGRES_BIN;
  if (configured) return configured;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'postgres'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (newest === undefined) throw new Error(`no PostgreSQL server binaries in ${root}/<version>/bin; set STATUSQ_POSTGRES_BIN to the directory of initdb and postgres`);
  return join(root, newest, 'bin');
}

function urlOf(port: number, database: string): string {
  return `postgres://postgres@127.0.0.1:${port}/${database}`;
}

/** A private server on 127.0.0.1 answers at once or not yet: the readiness probe asks again until it does. */
const CONNECT_TIMEOUT_MS = 2000;

/** Starts a private PostgreSQL server with an empty database `statusq_outage`. */
export async function startPrivatePostgres(): Promise<DisposableServer> {
  const bin = binDir();
  const spec: ServerSpec = {
    name: 'PostgreSQL',
    user: 'postgres',
    init: (dir) => ({ file: join(bin, 'initdb'), args: ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'] }),
    run: (dir, port) => ({
      file: join(bin, 'postgres'),
      // TCP on 127.0.0.1 only: no unix socket (whose path could outgrow the limit in a deep temp dir).
      args: ['-D', join(dir, 'data'), '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off', '-c', 'full_page_writes=off', '-c', 'shared_buffers=32MB'],
    }),
    // Fast shutdown: every session is terminated (57P01), open transactions roll back, then a clean stop.
    stopSignal: 'SIGINT',
    ready: (port) =>
      withClient(urlOf(port, 'postgres'), (c) => c.query('SELECT 1'), CONNECT_TIMEOUT_MS).then(
        () => true,
        () => false,
      ),
  };
  const server = await PrivateServer.start(spec);
  try {
    await withClient(urlOf(server.port, 'postgres'), (c) => c.query(`CREATE DATABASE ${DATABASE}`), CONNECT_TIMEOUT_MS);
  } catch (error) {
    await server.stop();
    throw error;
  }
  return {
    url: urlOf(server.port, DATABASE),
    restart: (downMs) => server.restart(downMs),
    dropConnections: () =>
      withClient(urlOf(server.port, 'postgres'), async (c) => {
        // The timeout makes each call wait until that backend is really gone, so the count is what ended.
        const { rows } = await c.query<{ ended: boolean }>(
          'SELECT pg_terminate_backend(pid, 5000) AS ended FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
          [DATABASE],
        );
        return rows.filter((r) => r.ended).length;
      }, CONNECT_TIMEOUT_MS),
    stop: () => server.stop(),
  };
}
