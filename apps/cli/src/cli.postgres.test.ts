// The CLI as a user runs it against PostgreSQL: the shared scenarios, each test in its own database
// (CREATE DATABASE statusq_cli_<random> on STATUSQ_POSTGRES_URL, dropped afterwards), plus the NOTIFY
// triggers and a missing database.
import pg from 'pg';
import { expect, it } from 'vitest';
import { postgresDialect } from '@statusq/adapter-postgres';
import { createTestDatabase, dropTestDatabase, postgresFixtures, postgresUnavailable } from '@statusq/adapter-postgres/testing';
import { routeThrough } from '@statusq/conformance';
import { cliScenarios } from './test/cli-scenarios.js';

async function withClient<T>(url: string, body: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

cliScenarios(
  'statusq CLI on PostgreSQL',
  {
    dialect: 'postgres',
    unavailable: await postgresUnavailable(),
    capability: 'postgres',
    fixtures: postgresFixtures,
    async create() {
      const url = await createTestDatabase('statusq_cli');
      return {
        url,
        query: <T>(sql: string) => withClient(url, async (c) => (await c.query(sql)).rows as T[]),
        insertTableA: (rows) =>
          withClient(url, async (c) => {
            await c.query(`INSERT INTO table_a (id, date, url, kind) SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[])`, [
              rows.map((r) => r.id),
              rows.map((r) => `${r.date}Z`),
              rows.map((r) => r.url),
              rows.map((r) => r.kind),
            ]);
          }),
        dispose: () => dropTestDatabase(url),
      };
    },
    throughProxy: (url, { connectTimeoutMs, queryTimeoutMs }) =>
      routeThrough(url, 5432, { connectTimeout: String(connectTimeoutMs), queryTimeout: String(queryTimeoutMs) }),
    dateLiteral: (iso) => `'${iso}'`,
    now: postgresDialect.now,
  },
  (ctx) => {
    it('init installs the NOTIFY triggers that wake idle workers', async () => {
      const { statusq, db } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const triggers = await db.query<{ tgname: string }>(`SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal ORDER BY tgname`);
      expect(triggers.map((t) => t.tgname)).toEqual(['statusq_notify_insert', 'statusq_notify_update']);
    });

    it('a database that does not exist is a one-line database error (exit 1), with the password hidden', async () => {
      const missing = new URL(ctx().db.url);
      missing.pathname = '/statusq_no_such_database';
      const run = await ctx().statusq('stats', '--db', missing.toString(), '--table', 'jobs');
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/^statusq: database error/);
      expect(run.stderr.split('\n')).toHaveLength(1);
      if (missing.password) expect(run.stderr).not.toContain(`:${missing.password}@`);
    });
  },
);
