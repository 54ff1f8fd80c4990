/**
 * Throwaway databases on a real MySQL/MariaDB server (`@statusq/adapter-mysql/testing`): every test gets its
 * own `CREATE DATABASE statusq_<random>`, dropped afterwards. The server is STATUSQ_MYSQL_URL (default
 * mysql://root@127.0.0.1:3306/test; only its credentials, host and port are used).
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { redactUrl } from '@statusq/core/adapter';
import { optionsFromUrl } from './index.js';

export const BASE_URL = process.env.STATUSQ_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

function adminOptions() {
  const { host, port, user, password } = optionsFromUrl(BASE_URL);
  return { host, port, user, password, connectTimeout: 5000, multipleStatements: false };
}

async function admin<T>(body: (conn: mysql.Connection) => Promise<T>): Promise<T> {
  const conn = await mysql.createConnection(adminOptions());
  try {
    return await body(conn);
  } finally {
    await conn.end().catch(() => conn.destroy());
  }
}

/** Null when the server answers, else why not (for a skip reason, or a CI failure). */
export async function mysqlUnavailable(): Promise<string | null> {
  try {
    await admin((conn) => conn.query('SELECT 1'));
    return null;
  } catch (error) {
    return `MySQL/MariaDB server at ${redactUrl(BASE_URL)} unreachable: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** The URL of the server with another database (and optional query string). */
export function urlFor(database: string, query = ''): string {
  const url = new URL(BASE_URL);
  url.pathname = `/${database}`;
  url.search = query;
  return url.toString();
}

/** Creates a fresh database and returns its URL. */
export async function createDatabase(query = ''): Promise<string> {
  const name = `statusq_${randomBytes(6).toString('hex')}`;
  await admin((conn) => conn.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`));
  return urlFor(name, query);
}

export async function dropDatabase(url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!/^statusq_[0-9a-f]+$/.test(name)) throw new Error(`refusing to drop ${name}: not a test database`);
  await admin((conn) => conn.query(`DROP DATABASE IF EXISTS \`${name}\``));
}

/** Runs `sql` on a fresh admin connection (KILL, SHOW PROCESSLIST, ...). */
export function adminQuery<T = unknown>(sql: string, values: unknown[] = []): Promise<T> {
  return admin(async (conn) => (await conn.query(sql, values))[0] as T);
}
