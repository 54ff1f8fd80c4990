// The CLI as a user runs it against MySQL/MariaDB (STATUSQ_MYSQL_URL, default mysql://root@127.0.0.1:3306/test):
// the shared scenarios, each test in its own database, plus a wrong password.
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { expect, it } from 'vitest';
import { mysqlFixtures } from '@statusq/adapter-mysql/testing';
import { routeThrough } from '@statusq/conformance';
import { cliScenarios } from './test/cli-scenarios.js';

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

cliScenarios(
  'statusq CLI on MySQL/MariaDB',
  {
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
  },
  (ctx) => {
    it('a wrong password is a clear error with the password redacted, and nothing is touched', async () => {
      const { statusq, stats, db } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const bad = new URL(db.url);
      bad.username = 'statusq_no_such_user';
      bad.password = 'hunter2';
      const denied = await statusq('stats', '--db', bad.toString(), '--table', 'jobs');
      expect(denied.code).not.toBe(0);
      expect(denied.stderr).not.toContain('hunter2');
      expect(denied.stderr.split('\n')).toHaveLength(1);
      expect(await stats()).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
    });
  },
);
