/**
 * The database host of a scale run: a MariaDB or PostgreSQL server of the run's own, in the `db` host's
 * namespace, listening on that host's address only, with an account the worker hosts log in with over the
 * links. Servers keep their durability defaults (fsync on; InnoDB flushes its log at each commit), as
 * production would; the shared servers on 127.0.0.1 are never touched. Its CPU time is read from /proc.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
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
export const WORKER_ACCOUNT = { user: 'statusq', password: 'statusq' };

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

/**
 * A PostgreSQL server of the run's own on 127.0.0.1 (no namespace, no root), set up as a scale run's database
 * host: for a bench count past what the shared server's max_connections (100) lets in.
 */
export function startLocalPostgres(): Promise<DatabaseHost> {
  return startPostgres(null, '127.0.0.1', {});
}

function firstExisting(paths: readonly string[], what: string): string {
  const found = paths.find((path) => existsSync(path));
  if (!found) throw new Error(`no ${what} in ${paths.join(', ')}`);
  return found;
}

async function startMariadb(netns: string, host: string): Promise<DatabaseHost> {
  const running = await startMariadbServer(netns, host, () => []);
  try {
    const version = await createAccount(running);
    return mariadbHost(running, host, version);
  } catch (error) {
    await running.stop();
    throw error;
  }
}

/** The URL of the account worker hosts log in with, on a server at `host`:`port`. */
export function accountUrl(host: string, port: number, database = 'mysql'): string {
  return `mysql://${WORKER_ACCOUNT.user}:${WORKER_ACCOUNT.password}@${host}:${port}/${database}`;
}

function mariadbHost(running: PrivateServer, host: string, version: string): DatabaseHost {
  return {
    dialect: 'mysql',
    version,
    adminUrl: accountUrl(host, running.port),
    address: { host, port: running.port },
    cpuSeconds: () => serverTreeCpuSeconds(running.pid ?? -1) ?? 0,
    stop: () => running.stop(),
  };
}

const mariadbSocket = (dir: string) => join(dir, 'mariadbd.sock');

/** Root's SQL on a private MariaDB through its unix socket: a file, so it crosses namespaces. */
export function viaSocket<T>(server: PrivateServer, body: (c: mysql.Connection) => Promise<T>): Promise<T> {
  return withMysql({ socketPath: mariadbSocket(server.dir), user: 'root' }, body);
}

/** Creates the account worker hosts log in with; returns the server's name and version. */
export async function createAccount(running: PrivateServer): Promise<string> {
  return viaSocket(running, async (c) => {
    await c.query(`CREATE USER ?@'%' IDENTIFIED BY ?`, [WORKER_ACCOUNT.user, WORKER_ACCOUNT.password]);
    await c.query(`GRANT ALL ON *.* TO ?@'%'`, [WORKER_ACCOUNT.user]);
    const [rows] = await c.query('SELECT VERSION() AS v');
    return `MariaDB ${String((rows as Array<{ v: string }>)[0]?.v)}`;
  });
}

/** The server's temporary directory, in its own directory; made by root here, the server runs as mysql. */
function scratchDir(dir: string): string {
  const scratch = join(dir, 'tmp');
  mkdirSync(scratch, { recursive: true });
  chmodSync(scratch, 0o1777);
  return scratch;
}

/** A private mariadbd in `netns` on `host`:3306, with `moreArgs` after the defaults (read at every start, so a restart may differ). */
async function startMariadbServer(netns: string, host: string, moreArgs: (dir: string) => readonly string[]): Promise<PrivateServer> {
  const server = firstExisting(['/usr/sbin/mariadbd', '/usr/local/mysql/bin/mariadbd'], 'mariadbd');
  const install = firstExisting(['/usr/bin/mariadb-install-db', '/usr/local/mysql/bin/mariadb-install-db'], 'mariadb-install-db');
  const spec: ServerSpec = {
    name: 'MariaDB',
    user: 'mysql',
    // Temporary files in the server's own directory, for the bootstrap too: two installs at once in the shared
    // /tmp clash ("Unknown table 'mysql.tmp_user_nopasswd'"), as the Galera section's joiners did.
    init: (dir) => ({ file: install, args: ['--no-defaults', `--datadir=${join(dir, 'data')}`, '--auth-root-authentication-method=normal', '--skip-test-db', '--skip-name-resolve', `--tmpdir=${scratchDir(dir)}`] }),
    run: (dir, port, address) => {
      const scratch = scratchDir(dir);
      return {
        file: server,
        args: [
          '--no-defaults',
          `--datadir=${join(dir, 'data')}`,
          `--port=${port}`,
          `--bind-address=${address}`,
          `--socket=${mariadbSocket(dir)}`,
          `--pid-file=${join(dir, 'mariadbd.pid')}`,
          `--tmpdir=${scratch}`,
          '--skip-name-resolve',
          `--max-connections=${MAX_CONNECTIONS}`,
          '--innodb-buffer-pool-size=256M',
          '--innodb-buffer-pool-dump-at-shutdown=OFF',
          '--innodb-buffer-pool-load-at-startup=OFF',
          ...moreArgs(dir),
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
  return PrivateServer.start(spec, { netns, host, port: 3306 });
}

/** Debian's galera-4 package puts the provider here. */
const GALERA_PROVIDER = '/usr/lib/galera/libgalera_smm.so';

export interface GaleraNodeOptions {
  /** Every node's address, this one's included (the cluster address; Galera's default port 4567 on each). */
  peers: readonly string[];
  /** Starts a new cluster (--wsrep-new-cluster): the first node's first start only; a restart joins the others. */
  bootstrap: boolean;
}

/**
 * One node of a MariaDB Galera cluster on a host of the topology: the same private server as startDatabaseHost's,
 * with wsrep on. Each node has a namespace and address of its own, so Galera's default ports (4567 group
 * communication, 4568 incremental state transfer, 4444 full state transfer) never clash. A new node gets the
 * cluster's data by a full copy (rsync: Debian's rsync package); its server accepts connections once that is
 * done. Whether it has joined is the caller's to wait for (wsrep_ready, wsrep_cluster_size).
 */
export class GaleraNode {
  /** The last write set this node's data holds after a crash (`uuid:seqno`), passed at its next start. */
  private startPosition: string | null = null;

  private constructor(
    readonly server: PrivateServer,
    private readonly netns: string,
  ) {}

  static async start(topology: Topology, hostName: string, options: GaleraNodeOptions): Promise<GaleraNode> {
    if (!existsSync(GALERA_PROVIDER)) throw new Error(`no Galera provider at ${GALERA_PROVIDER}; install Debian's galera-4 package (scripts/services.sh does)`);
    const host = topology.address(hostName);
    allowOwnHost(host);
    let bootstrap = options.bootstrap;
    let node: GaleraNode | null = null;
    const server = await startMariadbServer(topology.netns(hostName), host, () => {
      const args = [
        '--wsrep-on=ON',
        `--wsrep-provider=${GALERA_PROVIDER}`,
        `--wsrep-cluster-address=gcomm://${options.peers.join(',')}`,
        '--wsrep-cluster-name=statusq-scale',
        `--wsrep-node-address=${host}`,
        `--wsrep-node-name=${hostName}`,
        '--wsrep-sst-method=rsync',
        // Galera's requirements: row-based replication, interleaved auto-increment locks.
        '--binlog-format=ROW',
        '--innodb-autoinc-lock-mode=2',
        '--default-storage-engine=InnoDB',
        // A joiner's full copy (SST) includes the redo log: the default 96 MB is most of what it copies.
        '--innodb-log-file-size=32M',
        ...(bootstrap ? ['--wsrep-new-cluster'] : []),
        ...(node?.startPosition ? [`--wsrep-start-position=${node.startPosition}`] : []),
      ];
      bootstrap = false;
      return args;
    });
    node = new GaleraNode(server, topology.netns(hostName));
    return node;
  }

  /**
   * After a crash (SIGKILL), what Debian's galera_recovery does before every start: `mariadbd --wsrep-recover`
   * reads the position InnoDB recovered, and the next start passes it, so the node asks the cluster only for
   * the write sets since (IST, from a donor's cache) instead of a full copy of the data (SST). Returns it, or
   * null when the recovery run did not end with one within RECOVER_TIMEOUT_MS: once here it printed the
   * position and then stayed up, listening, for over a minute. The node then starts without a position and
   * Galera sends it a full copy, which for these tables takes seconds.
   */
  async recover(): Promise<string | null> {
    const { file, args } = this.server.spec.run(this.server.dir, this.server.port, this.server.host);
    const log = join(this.server.dir, 'recover.log');
    const user = ['--reuid', 'mysql', '--regid', 'mysql', '--init-groups'];
    // Not execFileSync: the harness's timers (the run's monitor, the workers' bounds) must keep running meanwhile.
    const child = spawn('ip', ['netns', 'exec', this.netns, 'setpriv', ...user, file, ...args, '--wsrep-recover', `--log-error=${log}`], { stdio: 'ignore' });
    let exited = false;
    const exit = new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    }).then(() => (exited = true));
    const readLog = () => {
      try {
        return readFileSync(log, 'utf8');
      } catch {
        return '';
      }
    };
    // Bounded: RECOVER_TIMEOUT_MS in 200 ms looks; once the position is printed the run has done its part.
    for (let i = 0; i < RECOVER_TIMEOUT_MS / 200 && !exited && !POSITION.test(readLog()); i++) await sleep(200);
    if (!exited) {
      child.kill('SIGKILL');
      await exit;
    }
    const text = readLog();
    this.startPosition = POSITION.exec(text)?.[1] ?? null;
    return this.startPosition;
  }
}

const RECOVER_TIMEOUT_MS = 20_000;
const POSITION = /WSREP: Recovered position:\s*(\S+:-?\d+)/;

async function startPostgres(netns: string | null, host: string, options: PostgresHostOptions): Promise<DatabaseHost> {
  const bin = postgresBinDir();
  const urlOf = (port: number, database: string) => `postgres://${WORKER_ACCOUNT.user}:${WORKER_ACCOUNT.password}@${host}:${port}/${database}`;
  const { standbyOf } = options;
  // The harness (on the bridge, in the same subnet) takes the base backup; the standby streams with the same account.
  const baseBackup = (dir: string, primary: { host: string; port: number }) => ({
    file: join(bin, 'pg_basebackup'),
    args: ['-D', join(dir, 'data'), '-h', primary.host, '-p', String(primary.port), '-U', WORKER_ACCOUNT.user, '-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
  });
  // A standby must have at least the primary's max_connections and max_wal_senders, so both get the same settings.
  const replication = options.allowReplication || standbyOf ? ['-c', 'wal_level=replica', '-c', 'max_wal_senders=4', '-c', 'hot_standby=on'] : [];
  const spec: ServerSpec = {
    name: 'PostgreSQL',
    user: 'postgres',
    init: (dir) =>
      standbyOf ? baseBackup(dir, standbyOf) : { file: join(bin, 'initdb'), args: ['-D', join(dir, 'data'), '-U', WORKER_ACCOUNT.user, '--auth=trust', '-E', 'UTF8', '--no-sync'] },
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
  const running = await PrivateServer.start(spec, netns === null ? null : { netns, host, port: 5432 });
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
