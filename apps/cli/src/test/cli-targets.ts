// The three dialects as the CLI tests drive them: a fresh database per test, SQL run beside the CLI, and the
// seed's table_a filled. SQLite files live in the test's scratch directory; PostgreSQL and MySQL/MariaDB get a
// database of their own on STATUSQ_POSTGRES_URL / STATUSQ_MYSQL_URL (default mysql://root@127.0.0.1:3306/test),
// dropped afterwards.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { sqliteDialect } from '@statusq/adapter-sqlite';
import { sqliteFixtures } from '@statusq/adapter-sqlite/testing';
import { postgresDialect } from '@statusq/adapter-postgres';
import { createTestDatabase, dropTestDatabase, postgresFixtures, postgresUnavailable } from '@statusq/adapter-postgres/testing';
import { mysqlFixtures } from '@statusq/adapter-mysql/testing';
import { routeThrough } from '@statusq/conformance';
import type { CliTarget } from './cli-target.js';

export const sqliteCliTarget: CliTarget = {
  dialect: 'sqlite',
  unavailable: null,
  capability: 'sqlite',
  fixtures: sqliteFixtures,
  async create(dir) {
    const path = join(dir, 'q.db');
    const run = <T>(body: (conn: Database.Database) => T): T => {
      const conn = new Database(path);
      try {
        return body(conn);
      } finally {
        conn.close();
      }
    };
    return {
      url: `sqlite:${path}`,
      query: async <T>(sql: string) =>
        run((conn) => {
          const statement = conn.prepare(sql);
          if (statement.reader) return statement.all() as T[];
          statement.run();
          return [];
        }),
      insertTableA: async (rows) =>
        run((conn) => {
          const insert = conn.prepare('INSERT INTO table_a (id, date, url, kind) VALUES (@id, @date, @url, @kind)');
          conn.transaction(() => rows.forEach((row) => insert.run(row)))();
        }),
      dispose: async () => undefined,
    };
  },
  dateLiteral: (iso) => String(Date.parse(iso)),
  now: sqliteDialect.now,
};

async function withClient<T>(url: string, body: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

export const postgresCliTarget: CliTarget = {
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
};

const base = new URL(process.env.STATUSQ_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test');
const server = {
  host: base.hostname,
  port: Number(base.port || 3306),
  user: decodeURIComponent(base.username) || 'root',
  password: decodeURIComponent(base.password),
  connectTimeout: 5000,
};

async function admin<T>(body: (conn: mysql.Connection) => Promise<T>, database?: string): Promise<T> {
  const conn = await mysql.createConnection({ ...server, ...(database ? { database } : {}) });
  try {
    return await body(conn);
  } finally {
    await conn.end();
  }
}

export const mysqlCliTarget: CliTarget = {
  dialect: 'mysql',
  unavailable: await admin((conn) => conn.query('SELECT 1')).then(
    () => null,
    (error: unknown) => `MySQL/MariaDB server at ${base.host} unreachable: ${error instanceof Error ? error.message : String(error)}`,
  ),
  capability: 'mysqlServer',
  fixtures: mysqlFixtures,
  async create() {
    const database = `statusq_${randomBytes(6).toString('hex')}`;
    await admin((conn) => conn.query(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`));
    const url = new URL(base);
    url.pathname = `/${database}`;
    return {
      url: url.toString(),
      query: <T>(sql: string) => admin(async (conn) => (await conn.query(sql))[0] as T[], database),
      insertTableA: (rows) =>
        admin(async (conn) => {
          await conn.query('INSERT INTO table_a (id, date, url, kind) VALUES ?', [rows.map((r) => [r.id, r.date, r.url, r.kind])]);
        }, database),
      dispose: () => admin(async (conn) => void (await conn.query(`DROP DATABASE IF EXISTS \`${database}\``))),
    };
  },
  throughProxy: (url, { connectTimeoutMs, queryTimeoutMs }) =>
    routeThrough(url, 3306, { connectTimeout: String(connectTimeoutMs), queryTimeout: String(queryTimeoutMs) }),
  dateLiteral: (iso) => `'${iso.replace('T', ' ').replace('Z', '')}'`,
  // The store's sessions run in UTC and so does claimed_at; this admin session may not, so not NOW(3).
  now: 'UTC_TIMESTAMP(3)',
};
