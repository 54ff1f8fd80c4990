/**
 * What the files of production server settings share (mysql.server-settings.test.ts,
 * mysql.server-session-settings.test.ts, mysql.binlog.test.ts): a private MariaDB per describe block, started
 * with the setting under test, fresh databases on it, and the conformance groups the setting can break run
 * there. A setting lives in the server, so each gets a server of its own: the shared one never changes under
 * the other tests.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { runConformance, type ConformanceGroup } from '@statusq/conformance';
import { mysqlConformance } from '../testing.js';
import { startPrivateMariadb, type PrivateMariadb, type PrivateMariadbSettings } from './private-mariadb.js';

const adapterModule = fileURLToPath(new URL('../../dist/index.js', import.meta.url));

/** A private server for one describe block, started in its beforeAll and stopped in its afterAll. */
export function privateServer(settings: PrivateMariadbSettings): () => PrivateMariadb {
  let server: PrivateMariadb | undefined;
  beforeAll(async () => {
    server = await startPrivateMariadb('', settings);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  }, 60_000);
  return () => {
    if (!server) throw new Error('the private server did not start');
    return server;
  };
}

/** A fresh database on the private server, in the URL's account (which `setup` granted `statusq\_%`). */
export async function freshDatabase(server: PrivateMariadb, query = ''): Promise<string> {
  const name = `statusq_${randomBytes(6).toString('hex')}`;
  await server.admin(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  url.search = query;
  return url.toString();
}

/** Drops a database freshDatabase made (and nothing else: the name must be one it gives). */
export async function dropFresh(server: PrivateMariadb, url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!/^statusq_[0-9a-f]+$/.test(name)) throw new Error(`refusing to drop ${name}: not a test database`);
  await server.admin(`DROP DATABASE IF EXISTS \`${name}\``);
}

/** The conformance suite's `groups` on the private server, each test in a database of its own there. */
export function conformanceOn(server: () => PrivateMariadb, name: string, groups: ConformanceGroup[]): void {
  runConformance({
    ...mysqlConformance,
    name,
    adapterModule,
    url: () => freshDatabase(server()),
    dropDatabase: (url) => dropFresh(server(), url),
    // Half the default job counts (1,500 racing jobs per claim strategy) keeps each setting's run short.
    scale: 0.5,
    groups,
  });
}
