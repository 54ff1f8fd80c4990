/**
 * The database host of a scale run: a MariaDB or PostgreSQL server of the run's own, in the `db` host's
 * namespace, listening on that host's address only, with an account the worker hosts log in with over the
 * links. Servers keep their durability defaults (fsync on; InnoDB flushes its log at each commit), as
 * production would; the shared servers on 127.0.0.1 are never touched. Its CPU time is read from /proc.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { withClient } from '@statusq/adapter-postgres/testing';
import { PrivateServer, type ServerSpec } from '@statusq/conformance';
import mysql from 'mysql2/promise';
import { serverTreeCpuSeconds } from '../cpu.js';
import { allowOwnHost } from '../limits.js';
import type { Topology } from './topology.js';

export type ServerDialect = 'mysql' | 'postgres';

export interface DatabaseHost {
  readonly dialect: ServerDialect;
  /** Server name and version, for the report. */
  readonly version: string;
  /** The account's URL of a database the harness may create tables in (the bench's own statusq_bench is made there). */
  readonly adminUrl: string;
  /** The same server's URL as the worker hosts reach it (its address and port), without a database. */
  readonly address: { host: string; port: number };
  /** CPU seconds the server has used so far, its backends included. */
  cpuSeconds(): number;
  stop(): Promise<void>;
}

/** Enough for 4 hosts x 4 processes x a pool of 16, plus the harness, on either server. */
const MAX_CONNECTIONS = 400;
const CONNECT_TIMEOUT_MS = 2000;
/** MariaDB's answers to a login it refuses: the server is up. */
const ER_HOST_NOT_PRIVILEGED = 1130;
const ER_ACCESS_DENIED = 1045;
/** The account worker hosts log in with (over the links, so not root's local-only login). */
const ACCOUNT = { user: 'statusq', password: 'statusq' };

export async function startDatabaseHost(dialect: ServerDialect, topology: Topology, hostName: string): Promise<DatabaseHost> {
  const host = topology.address(hostName);
  allowOwnHost(host);
  return dialect === 'mysql' ? startMariadb(topology.netns(hostName), host) : startPostgres(topology.netns(hostName), host, {});
}

/** A PostgreSQL host set up for replication: a primary with a streaming standby, reached through a floating service address. */
export interface PostgresHostOptions {
  /** listen_addresses='*': the server also answers on an address its host is given later (a floating service address). */
  listenOnEveryAddress?: boolean;
  /** Replication connections from the topology's subnet are let in: pg_basebackup from the harness, a standby's stream. */
  allowReplication?: boolean;
  /** The data directory is a base backup of this primary (pg_basebackup -R), so the server starts as its streaming standby. */
  standbyOf?: { host: string; port: number };
}

export async function startPostgresHost(topology: Topology, hostName: string, options: PostgresHostOptions): Promise<DatabaseHost> {
  const host = topology.address(hostName);
  allowOwnHost(host);
  return startPostgres(topology.netns(hostName), host, options);
}

function firstExisting(paths: readonly string[], what: string): string {
  const found = paths.find((path) => existsSync(path));
  if (!found) throw new Error(`no ${what} in ${paths.join(', ')}`);
  return found;
}

async function startMariadb(netns: string, host: string): Promise<DatabaseHost> {
  const server = firstExisting(['/usr/sbin/mariadbd', '/usr/local/mysql/bin/mariadbd'], 'mariadbd');
  const install = firstExisting(['/usr/bin/mariadb-install-db', '/usr/local/mysql/bin/mariadb-install-db'], 'mariadb-install-db');
  const socket = (dir: string) => join(dir, 'mariadbd.sock');
  // The harness sets up the account through the server's unix socket: a file, so it crosses namespaces.
  const viaSocket = <T>(dir: string, body: (c: mysql.Connection) => Promise<T>) => withMysql({ socketPath: socket(dir), user: 'root' }, body);
  const spec: ServerSpec = {
    name: 'MariaDB',
    user: 'mysql',
    init: (dir) => ({ file: install, args: ['--no-defaults', `--datadir=${join(dir, 'data')}`, '--auth-root-authentication-method=normal', '--skip-test-db', '--skip-name-resolve'] }),
    run: (dir, port, address) => {
      const scratch = join(dir, 'tmp');
      mkdirSync(scratch, { recursive: true });
      // Made by root here; the server runs as mysql.
      chmodSync(scratch, 0o1777);
      return {
        file: server,
        args: [
          '--no-defaults',
          `--datadir=${join(dir, 'data')}`,
          `--port=${port}`,
          `--bind-address=${address}`,
          `--socket=${socket(dir)}`,
          `--pid-file=${join(dir, 'mariadbd.pid')}`,
          `--tmpdir=${scratch}`,
          '--skip-name-resolve',
          `--max-connections=${MAX_CONNECTIONS}`,
          '--innodb-buffer-pool-size=256M',
          '--innodb-buffer-pool-dump-at-shutdown=OFF',
          '--innodb-buffer-pool-load-at-startup=OFF',
        ],
      };
    },
    stopSignal: 'SIGTERM',
    // Root may log in through the socket only; refusing the harness's address by name is already an answer.
    ready: (port, address) =>
      withMysql({ host: address, port, user: 'root' }, (c) => c.query('SELECT 1')).then(
        () => true,
        (error: { errno?: number }) => error.errno === ER_HOST_NOT_PRIVILEGED || error.errno === ER_ACCESS_DENIED,
      ),
  };
  const running = await PrivateServer.start(spec, { netns, host, port: 3306 });
  try {
    const version = await viaSocket(running.dir, async (c) => {
      await c.query(`CREATE USER ?@'%' IDENTIFIED BY ?`, [ACCOUNT.user, ACCOUNT.password]);
      await c.query(`GRANT ALL ON *.* TO ?@'%'`, [ACCOUNT.user]);
      const [rows] = await c.query('SELECT VERSION() AS v');
      return `MariaDB ${String((rows as Array<{ v: string }>)[0]?.v)}`;
    });
    return {
      dialect: 'mysql',
      version,
      adminUrl: `mysql://${ACCOUNT.user}:${ACCOUNT.password}@${host}:${running.port}/mysql`,
      address: { host, port: running.port },
      cpuSeconds: () => serverTreeCpuSeconds(running.pid ?? -1) ?? 0,
      stop: () => running.stop(),
    };
  } catch (error) {
    await running.stop();
    throw error;
  }
}

async function startPostgres(netns: string, host: string, options: PostgresHostOptions): Promise<DatabaseHost> {
  const bin = postgresBinDir();
  const urlOf = (port: number, database: string) => `postgres://${ACCOUNT.user}:${ACCOUNT.password}@${host}:${port}/${database}`;
  const { standbyOf } = options;
  // The harness (on the bridge, in the same subnet) takes the base backup; the standby streams with the same account.
  const baseBackup = (dir: string, primary: { host: string; port: number }) => ({
    file: join(bin, 'pg_basebackup'),
    args: ['-D', join(dir, 'data'), '-h', primary.host, '-p', String(primary.port), '-U', ACCOUNT.user, '-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
  });
  // A standby must have at least the primary's max_connections and max_wal_senders, so both get the same settings.
  const replication = options.allowReplication || standbyOf ? ['-c', 'wal_level=replica', '-c', 'max_wal_senders=4', '-c', 'hot_standby=on'] : [];
  const spec: ServerSpec = {
    name: 'PostgreSQL',
    user: 'postgres',
    init: (dir) =>
      standbyOf ? baseBackup(dir, standbyOf) : { file: join(bin, 'initdb'), args: ['-D', join(dir, 'data'), '-U', ACCOUNT.user, '--auth=trust', '-E', 'UTF8', '--no-sync'] },
    run: (dir, port, address) => {
      // Trust over the run's own links: only hosts of this topology can reach the address.
      const subnet = `${address.split('.').slice(0, 3).join('.')}.0/24`;
      const hba = join(dir, 'data', 'pg_hba.conf');
      writeFileSync(hba, `local all all trust\nhost all all ${subnet} trust\n${replication.length > 0 ? `host replication all ${subnet} trust\n` : ''}`);
      const listen = options.listenOnEveryAddress ? '*' : address;
      return {
        file: join(bin, 'postgres'),
        args: ['-D', join(dir, 'data'), '-p', String(port), '-c', `listen_addresses=${listen}`, '-c', 'unix_socket_directories=', '-c', `max_connections=${MAX_CONNECTIONS}`, '-c', 'shared_buffers=256MB', ...replication],
      };
    },
    stopSignal: 'SIGINT',
    ready: (port) =>
      withClient(urlOf(port, 'postgres'), (c) => c.query('SELECT 1'), CONNECT_TIMEOUT_MS).then(
        () => true,
        () => false,
      ),
  };
  const running = await PrivateServer.start(spec, { netns, host, port: 5432 });
  try {
    const version = await withClient(urlOf(running.port, 'postgres'), async (c) => `PostgreSQL ${String((await c.query('SHOW server_version')).rows[0]?.server_version)}`, CONNECT_TIMEOUT_MS);
    return {
      dialect: 'postgres',
      version,
      adminUrl: urlOf(running.port, 'postgres'),
      address: { host, port: running.port },
      cpuSeconds: () => serverTreeCpuSeconds(running.pid ?? -1) ?? 0,
      stop: () => running.stop(),
    };
  } catch (error) {
    await running.stop();
    throw error;
  }
}

async function withMysql<T>(options: mysql.ConnectionOptions, body: (c: mysql.Connection) => Promise<T>): Promise<T> {
  const conn = await mysql.createConnection({ ...options, connectTimeout: CONNECT_TIMEOUT_MS });
  conn.on('error', () => undefined);
  try {
    return await body(conn);
  } finally {
    await conn.end().catch(() => conn.destroy());
  }
}

function postgresBinDir(): string {
  if (process.env.STATUSQ_POSTGRES_BIN) return process.env.STATUSQ_POSTGRES_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'postgres'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (newest === undefined) throw new Error(`no PostgreSQL server binaries in ${root}/<version>/bin; set STATUSQ_POSTGRES_BIN`);
  return join(root, newest, 'bin');
}
