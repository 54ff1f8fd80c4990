/**
 * What tests of statusq on PostgreSQL use (`@statusq/adapter-postgres/testing`): the conformance suite's
 * fixture tables and plan reader, and throwaway databases: each test gets its own database on the server
 * named by STATUSQ_POSTGRES_URL (default postgres://postgres:postgres@127.0.0.1:5432/postgres), so suites can
 * run side by side. When the server is unreachable, tests skip locally and fail when
 * STATUSQ_REQUIRE_DATABASES=1 (CI).
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { redactUrl } from '@statusq/core/adapter';

import { connect } from './index.js';
import { postgresFixtures, postgresQueryPlans } from './postgres-fixtures.js';
import { withClient } from './with-client.js';

export { postgresFixtures, postgresQueryPlans, withClient };
export { pgBouncerBackend, pgBouncerSpec, pgBouncerUnavailable, pgBouncerVersion, throughPgBouncer, type PgBouncerBackend, type PgBouncerOptions, type PgBouncerSpec } from './pgbouncer-spec.js';

export const DEFAULT_POSTGRES_URL = 'postgres://postgres:postgres@127.0.0.1:5432/postgres';

/** The administrative URL tests create their databases through. */
export function adminUrl(): string {
  return process.env.STATUSQ_POSTGRES_URL || DEFAULT_POSTGRES_URL;
}

/** True when CI demands that database suites run (an unreachable server is then a failure, not a skip). */
export function databasesRequired(): boolean {
  return process.env.STATUSQ_REQUIRE_DATABASES === '1';
}

/** The URL of database `name` on the admin URL's server. */
export function databaseUrl(name: string, base = adminUrl()): string {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

// One admin pool per test process instead of a connection per database created or dropped: each PostgreSQL
// connection is a backend forked by the server, about 28 ms of its CPU on the CI machine (pgbench -C), and every
// test creates and drops a database. allowExitOnIdle: an idle admin connection never holds a process open.
let admin: { url: string; pool: pg.Pool } | undefined;

async function withAdmin<T>(body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const url = adminUrl();
  if (admin?.url !== url) {
    void admin?.pool.end().catch(() => undefined);
    const pool = new pg.Pool({ connectionString: url, max: 2, idleTimeoutMillis: 5_000, connectionTimeoutMillis: 5_000, allowExitOnIdle: true });
    pool.on('error', () => undefined);
    admin = { url, pool };
  }
  const client = await admin.pool.connect();
  let failure: Error | undefined;
  try {
    return await body(client);
  } catch (error) {
    failure = error as Error;
    throw error;
  } finally {
    // A failed statement may have lost the connection: the pool discards it rather than hand it out again.
    client.release(failure);
  }
}

/** Null when the server answers, else why it does not (for a skip reason or a CI failure). */
export async function postgresUnavailable(): Promise<string | null> {
  try {
    await withAdmin((c) => c.query('SELECT 1'));
    return null;
  } catch (error) {
    return `PostgreSQL at ${redactUrl(adminUrl())} is unreachable (${error instanceof Error ? error.message : String(error)}); set STATUSQ_POSTGRES_URL`;
  }
}

/** Creates an empty database `statusq_<random>` and returns its URL. */
export async function createTestDatabase(prefix = 'statusq'): Promise<string> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`bad test database name ${name}`);
  await withAdmin((c) => c.query(`CREATE DATABASE "${name}"`));
  return databaseUrl(name);
}

/** Drops the database of `url`, terminating whatever connections were left on it first. */
export async function dropTestDatabase(url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`refusing to drop database ${JSON.stringify(name)}`);
  await withAdmin(async (c) => {
    await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
    await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  });
}

/**
 * Everything `runConformance` needs from this adapter: a project's own conformance file is
 * `runConformance(postgresConformance)` (each test in a database of its own on STATUSQ_POSTGRES_URL's server).
 */
export const postgresConformance = {
  name: 'postgres',
  /** This package's entry, which the suite's child processes import. */
  adapterModule: fileURLToPath(new URL('./index.js', import.meta.url)),
  url: () => createTestDatabase(),
  dropDatabase: (url: string) => dropTestDatabase(url),
  createStore: (url: string) => connect(url),
  fixtures: postgresFixtures,
  queryPlans: postgresQueryPlans,
  /** The two pg handles enqueue's `transaction` takes: a Client, and a Pool's client. */
  callerConnections: (url: string) => [
    {
      label: 'pg Client',
      open: async () => {
        const client = new pg.Client({ connectionString: url });
        client.on('error', () => undefined);
        await client.connect();
        return callerClient(client, () => client.end());
      },
    },
    {
      label: 'pg PoolClient',
      open: async () => {
        const pool = new pg.Pool({ connectionString: url, max: 1 });
        pool.on('error', () => undefined);
        return callerClient(await pool.connect(), async (client) => {
          client.release();
          await pool.end();
        });
      },
    },
  ],
  knexConfig: (url: string) => ({ client: 'pg', connection: url, pool: { min: 0, max: 2 } }),
};

/** An application's open pg connection as the conformance suite drives it. */
function callerClient<C extends pg.Client | pg.PoolClient>(client: C, end: (client: C) => Promise<void>) {
  return {
    handle: client as unknown,
    run: async (sql: string, params: readonly unknown[] = []) => {
      await client.query(sql, [...params]);
    },
    close: () => end(client),
  };
}
