// The CLI as a user runs it (the built bin in a child process) against a real MySQL/MariaDB server
// (STATUSQ_MYSQL_URL, default mysql://root@127.0.0.1:3306/test). Every test gets its own database. An
// unreachable server skips these tests ([needs mysqlServer]) unless STATUSQ_REQUIRE_DATABASES=1 (CI).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateTableARows, handlerPath, tableASchema } from '@statusq/test-fixtures';
import { parseStats, runCli, writeFixture } from './cli-harness.js';

const BASE_URL = process.env.STATUSQ_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const base = new URL(BASE_URL);
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

const unreachable = await admin((conn) => conn.query('SELECT 1')).then(
  () => null,
  (error: unknown) => `MySQL/MariaDB server at ${base.host} unreachable: ${error instanceof Error ? error.message : String(error)}`,
);

let dir: string;
let database: string;
let db: string;

const statusq = (...args: string[]) => runCli(dir, args, 90_000);
const stats = (table = 'jobs') => parseStats(statusq('stats', '--db', db, '--table', table, '--json'));

function query<T>(sql: string, values: unknown[] = []): Promise<T[]> {
  return admin(async (conn) => (await conn.query(sql, values))[0] as T[], database);
}

const file = (name: string, text: string) => writeFixture(dir, name, text);

function suite(title: string, body: () => void): void {
  if (unreachable === null) describe(title, body);
  else if (process.env.STATUSQ_REQUIRE_DATABASES === '1') {
    describe(title, () => {
      it('needs a reachable MySQL/MariaDB server (STATUSQ_REQUIRE_DATABASES=1)', () => {
        throw new Error(unreachable);
      });
    });
  } else {
    console.warn(`skipping ${title}: ${unreachable}`);
    describe.skip(`${title} [needs mysqlServer]`, body);
  }
}

suite('statusq CLI on MySQL/MariaDB', () => {
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'statusq-cli-mysql-'));
    database = `statusq_${randomBytes(6).toString('hex')}`;
    await admin((conn) => conn.query(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`));
    const url = new URL(BASE_URL);
    url.pathname = `/${database}`;
    db = url.toString();
  });
  afterEach(async () => {
    rmSync(dir, { recursive: true, force: true });
    await admin((conn) => conn.query(`DROP DATABASE IF EXISTS \`${database}\``));
  });

  it('init creates a managed table once; enqueue and work take payloads to done, abuse and failed with retries', async () => {
    expect(statusq('init', '--db', db, '--table', 'tasks')).toMatchObject({ code: 0, stdout: 'created table tasks' });
    expect(statusq('init', '--db', db, '--table', 'tasks')).toMatchObject({ code: 0, stdout: 'table tasks already exists; nothing to do' });
    expect(stats('tasks')).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0 });
    expect(statusq('enqueue', '--db', db, '--table', 'tasks', '--payload', '{"n":1,"text":"grüße ✓"}').code).toBe(0);
    const rows = file('rows.ndjson', ['{"n":2}', '', '{"n":3,"kind":"abuse"}', '{"n":4,"kind":"poison"}'].join('\n'));
    expect(statusq('enqueue', '--db', db, '--table', 'tasks', '--file', rows)).toMatchObject({ code: 0, stdout: 'enqueued 3 rows into tasks' });
    const handler = file(
      'handler.mjs',
      `export default async (job, ctx) => {
         if (job.payload.kind === 'abuse') return ctx.abuse('spam');
         if (job.payload.kind === 'poison') throw new Error('boom ' + job.attempt);
         return { doubled: job.payload.n * 2, text: job.payload.text };
       };`,
    );
    const run = statusq('work', '--db', db, '--table', 'tasks', '--handler', handler, '--exit-when-empty', '--max-attempts', '3', '--retry-delay', '5ms');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/done 2, failed 1, abuse 1, retried 2/);
    expect(stats('tasks')).toEqual({ pending: 0, processing: 0, done: 2, abuse: 1, failed: 1 });
    expect(await query(`SELECT attempt_count, last_error FROM tasks WHERE status = 0`)).toEqual([{ attempt_count: 3, last_error: 'Error: boom 3' }]);
    const results = (await query<{ result: string }>(`SELECT result FROM tasks WHERE status = 1 ORDER BY id`)).map((r) => JSON.parse(r.result));
    expect(results).toEqual([{ doubled: 2, text: 'grüße ✓' }, { doubled: 4 }]);
  });

  it("migrates the seed's table_a (twice: the second is a no-op), works it with the fixture handler, and requeues", async () => {
    await admin(async (conn) => {
      for (const ddl of tableASchema('mysql')) await conn.query(ddl);
      const rows = generateTableARows(300, { poisonEvery: 50, abuseEvery: 40 });
      await conn.query('INSERT INTO table_a (id, date, url, kind) VALUES ?', [rows.map((r) => [r.id, r.date, r.url, r.kind])]);
    }, database);

    expect(statusq('migrate', '--db', db, '--table', 'table_a', '--with', 'leases,retries')).toMatchObject({
      code: 0,
      stdout: 'migrated table_a: added columns claimed_at, worker_id, attempt_count, next_attempt_at, last_error and index table_a_statusq_pending',
    });
    expect(statusq('migrate', '--db', db, '--table', 'table_a', '--with', 'leases,retries')).toMatchObject({ code: 0, stdout: 'table table_a is up to date; nothing to do' });

    const run = statusq('work', '--db', db, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--concurrency', '8', '--batch', '16', '--retry-delay', '1ms', '--lease', '30s', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    expect(stats('table_a')).toEqual({ pending: 0, processing: 0, done: 286, abuse: 8, failed: 6 });
    const poison = await query<{ n: number }>(`SELECT COUNT(*) AS n FROM table_a WHERE kind = 'poison' AND status = 0 AND attempt_count = 3`);
    expect(Number(poison[0]!.n)).toBe(6);

    expect(statusq('requeue', '--db', db, '--table', 'table_a', '--status', 'failed', '--id', '50', '--id', '100')).toMatchObject({ code: 0, stdout: 'requeued 2 failed rows of table_a' });
    expect(stats('table_a')).toMatchObject({ pending: 2, failed: 4 });
    expect(statusq('requeue', '--db', db, '--table', 'table_a', '--status', 'abuse')).toMatchObject({ code: 0, stdout: 'requeued 8 abuse rows of table_a' });
    expect(stats('table_a')).toMatchObject({ pending: 10, abuse: 0 });
  });

  it('a missing table is one line on stderr and exit code 2; a wrong password is a clear error, with the password redacted', () => {
    expect(statusq('init', '--db', db).code).toBe(0);
    const missing = statusq('stats', '--db', db, '--table', 'nope');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/table "nope" does not exist/);
    const bad = new URL(db);
    bad.username = 'statusq_no_such_user';
    bad.password = 'hunter2';
    const denied = statusq('stats', '--db', bad.toString(), '--table', 'jobs');
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).not.toContain('hunter2');
    expect(stats()).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0 });
  });
});
