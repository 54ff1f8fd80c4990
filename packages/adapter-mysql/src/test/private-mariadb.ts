/**
 * A MariaDB server of the test's own, for the conformance suite's outage cases (a restart, every connection
 * dropped): mariadb-install-db into a temp dir, `mariadbd` on a free port of 127.0.0.1, root without a
 * password, nothing read from the machine's option files. The shared server on 3306 is never touched.
 * Binaries: STATUSQ_MARIADB_BIN (the directory of mariadbd and mariadb-install-db), else the Debian paths.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { PrivateServer, type DisposableServer, type ServerSpec } from '@statusq/conformance';

const DATABASE = 'statusq_outage';

function binary(name: 'mariadbd' | 'mariadb-install-db'): string {
  const dirs = process.env.STATUSQ_MARIADB_BIN ? [process.env.STATUSQ_MARIADB_BIN] : ['/usr/sbin', '/usr/bin', '/usr/local/bin', '/usr/local/mysql/bin'];
  const found = dirs.map((dir) => join(dir, name)).find((path) => existsSync(path));
  if (!found) throw new Error(`no ${name} in ${dirs.join(', ')}; set STATUSQ_MARIADB_BIN to the directory of mariadbd and mariadb-install-db`);
  return found;
}

async function withConnection<T>(port: number, body: (conn: mysql.Connection) => Promise<T>): Promise<T> {
  const conn = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root', connectTimeout: 2000 });
  conn.on('error', () => undefined);
  try {
    return await body(conn);
  } finally {
    await conn.end().catch(() => conn.destroy());
  }
}

/** A private server started with settings of its own: the setting cases of issue 18 (binlog, read_only, limits). */
export interface PrivateMariadbSettings {
  /**
   * More mariadbd options (`--binlog-format=STATEMENT`, `--lower-case-table-names=1`, ...), after the
   * defaults; a function of the server's directory for options that name a file there (`--log-bin=<dir>/binlog`).
   */
  serverArgs?: readonly string[] | ((dir: string) => readonly string[]);
  /**
   * More mariadb-install-db options (it passes what it does not know to the bootstrapping mariadbd): a setting
   * the datadir must be created with. MySQL 8 refuses to start with a lower_case_table_names other than the
   * one its datadir was initialised with; MariaDB 10.11 starts either way (measured), but a datadir made with
   * the same setting is what production has.
   */
  installArgs?: readonly string[];
  /** SQL run as root once the database exists (CREATE USER, GRANT, SET GLOBAL ...). */
  setup?: readonly string[];
  /** The account in the URL instead of root (one that `setup` created as 'user'@'%'): `user` or `user:password`. */
  account?: string;
}

/** A started private server, as the outage cases take it, plus root's own SQL on it for the setting cases. */
export interface PrivateMariadb extends DisposableServer {
  port: number;
  /** Runs one statement as root on the private server (not through statusq): flip read_only, read a variable. */
  admin(sql: string, params?: readonly unknown[]): Promise<unknown>;
  /** A fresh empty database on this server (its URL, with the server's account and query), for one conformance test. */
  createDatabase(): Promise<string>;
  /** Drops a database that createDatabase made. */
  dropDatabase(url: string): Promise<void>;
  /** The server's directory (its data, its log, a binary log the options put there). */
  dir: string;
  /** The server's error log so far (warnings such as "Unsafe statement written to the binary log"). */
  log(): string;
}

/** Starts a private MariaDB server with an empty database `statusq_outage`; `query` is added to its URL. */
export async function startPrivateMariadb(query = '', settings: PrivateMariadbSettings = {}): Promise<PrivateMariadb> {
  const [server, install] = [binary('mariadbd'), binary('mariadb-install-db')];
  const scratch = mkdtempSync(join(tmpdir(), 'statusq-mariadb-tmp-'));
  // Writable by the server's own user (mariadbd runs as mysql), like /tmp.
  chmodSync(scratch, 0o1777);
  const spec: ServerSpec = {
    name: 'MariaDB',
    user: 'mysql',
    init: (dir) => ({
      file: install,
      // The install's bootstrap server clears its tmpdir's `#sql*` files as the server does (see --tmpdir below).
      args: ['--no-defaults', `--datadir=${join(dir, 'data')}`, `--tmpdir=${scratch}`, '--auth-root-authentication-method=normal', '--skip-test-db', '--skip-name-resolve', ...(settings.installArgs ?? [])],
    }),
    run: (dir, port) => ({
      file: server,
      args: [
        '--no-defaults',
        `--datadir=${join(dir, 'data')}`,
        `--port=${port}`,
        '--bind-address=127.0.0.1',
        `--socket=${join(dir, 'mariadbd.sock')}`,
        `--pid-file=${join(dir, 'mariadbd.pid')}`,
        '--skip-name-resolve',
        '--innodb-buffer-pool-size=64M',
        // A clean shutdown and start without saving and reloading the buffer pool: restarts take well under a second.
        '--innodb-buffer-pool-dump-at-shutdown=OFF',
        '--innodb-buffer-pool-load-at-startup=OFF',
        '--innodb-flush-log-at-trx-commit=2',
        // Temporary files of its own: a MariaDB server deletes every `#sql*` file in its tmpdir when it starts,
        // so with the default (/tmp, shared by every server on the machine) a private server's start took the
        // shared server's temporary tables from under a running information_schema query ("Error on delete of
        // '/tmp/#sql-temptable-....MAI' (Errcode: 2)").
        `--tmpdir=${scratch}`,
        ...(typeof settings.serverArgs === 'function' ? settings.serverArgs(dir) : (settings.serverArgs ?? [])),
      ],
    }),
    // A normal shutdown: every connection is ended, open transactions roll back, InnoDB stops cleanly.
    stopSignal: 'SIGTERM',
    ready: (port) =>
      withConnection(port, (c) => c.query('SELECT 1')).then(
        () => true,
        () => false,
      ),
  };
  let running: PrivateServer;
  try {
    running = await PrivateServer.start(spec);
  } catch (error) {
    rmSync(scratch, { recursive: true, force: true });
    throw error;
  }
  try {
    await withConnection(running.port, async (c) => {
      await c.query(`CREATE DATABASE ${DATABASE} CHARACTER SET utf8mb4`);
      for (const sql of settings.setup ?? []) await c.query(sql);
    });
  } catch (error) {
    await running.stop();
    rmSync(scratch, { recursive: true, force: true });
    throw error;
  }
  const urlOf = (database: string) => `mysql://${settings.account ?? 'root'}@127.0.0.1:${running.port}/${database}${query ? `?${query}` : ''}`;
  let databases = 0;
  return {
    url: urlOf(DATABASE),
    port: running.port,
    dir: running.dir,
    log: () => readFileSync(join(running.dir, 'server.log'), 'utf8'),
    admin: (sql, params = []) => withConnection(running.port, async (c) => (await c.query(sql, [...params]))[0]),
    createDatabase: async () => {
      const name = `${DATABASE}_${++databases}`;
      await withConnection(running.port, (c) => c.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4`));
      // An account of the setting's own (see PrivateMariadbSettings.account) gets the same rights on it as on statusq_outage.
      const user = settings.account?.split(':')[0];
      if (user !== undefined && user !== 'root') await withConnection(running.port, (c) => c.query(`GRANT ALL ON ${name}.* TO ?@'%'`, [user]));
      return urlOf(name);
    },
    dropDatabase: async (url) => {
      const name = decodeURIComponent(new URL(url).pathname.slice(1));
      if (!name.startsWith(`${DATABASE}_`)) throw new Error(`refusing to drop ${name}: not a database createDatabase made`);
      await withConnection(running.port, (c) => c.query(`DROP DATABASE IF EXISTS \`${name}\``));
    },
    restart: (downMs) => running.restart(downMs),
    dropConnections: () =>
      withConnection(running.port, async (c) => {
        const [rows] = await c.query('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()', [DATABASE]);
        let ended = 0;
        for (const { id } of rows as Array<{ id: number }>) {
          try {
            await c.query(`KILL CONNECTION ${Number(id)}`);
            ended++;
          } catch (error) {
            // 1094 unknown thread: that connection ended by itself in the meantime.
            if ((error as { errno?: number }).errno !== 1094) throw error;
          }
        }
        return ended;
      }),
    stop: async () => {
      await running.stop();
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}
