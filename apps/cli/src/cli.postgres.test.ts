// The CLI as a user runs it against PostgreSQL: the built bin in a child process, each test in its own
// database (CREATE DATABASE statusq_cli_<random> on STATUSQ_POSTGRES_URL, dropped afterwards). An unreachable
// server skips this file, or fails it when STATUSQ_REQUIRE_DATABASES=1 (CI).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, databasesRequired, dropTestDatabase, postgresUnavailable } from '@statusq/adapter-postgres/testing';
import { generateTableARows, handlerPath, tableASchema } from '@statusq/test-fixtures';
import { parseStats, runCliAsync, writeFixture } from './cli-harness.js';

const unavailable = await postgresUnavailable();
let dir: string;
let db: string;

const statusq = (...args: string[]) => runCliAsync(dir, args);
const stats = async (table = 'jobs') => parseStats(await statusq('stats', '--db', db, '--table', table, '--json'));

async function query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: db });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}

const file = (name: string, text: string) => writeFixture(dir, name, text);

if (unavailable !== null) {
  if (databasesRequired()) {
    it('PostgreSQL server is reachable (STATUSQ_REQUIRE_DATABASES=1)', () => {
      throw new Error(unavailable);
    });
  } else {
    it.skip(`[needs postgres] statusq CLI on PostgreSQL: ${unavailable}`, () => undefined);
  }
} else {
  describe('statusq CLI on PostgreSQL', () => {
    beforeEach(async () => {
      dir = mkdtempSync(join(tmpdir(), 'statusq-cli-pg-'));
      db = await createTestDatabase('statusq_cli');
    });
    afterEach(async () => {
      rmSync(dir, { recursive: true, force: true });
      await dropTestDatabase(db);
    });

    it('init creates a managed table (with its NOTIFY trigger) once; a second init changes nothing', async () => {
      expect(await statusq('init', '--db', db)).toMatchObject({ code: 0, stdout: 'created table jobs' });
      expect(await statusq('init', '--db', db)).toMatchObject({ code: 0, stdout: 'table jobs already exists; nothing to do' });
      expect(await stats()).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0 });
      const triggers = await query<{ tgname: string }>(`SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal ORDER BY tgname`);
      expect(triggers.map((t) => t.tgname)).toEqual(['statusq_notify_insert', 'statusq_notify_update']);
    });

    it('enqueues payloads and works them to done, abuse and failed with retries', async () => {
      expect((await statusq('init', '--db', db, '--table', 'tasks')).code).toBe(0);
      expect((await statusq('enqueue', '--db', db, '--table', 'tasks', '--payload', '{"n":1}')).code).toBe(0);
      const rows = file('rows.ndjson', ['{"n":2}', '', '{"n":3,"kind":"abuse"}', '{"n":4,"kind":"poison"}'].join('\n'));
      expect(await statusq('enqueue', '--db', db, '--table', 'tasks', '--file', rows)).toMatchObject({ code: 0, stdout: 'enqueued 3 rows into tasks' });
      const handler = file(
        'handler.mjs',
        `export default async (job, ctx) => {
           if (job.payload.kind === 'abuse') return ctx.abuse('spam');
           if (job.payload.kind === 'poison') throw new Error('boom ' + job.attempt);
           return { doubled: job.payload.n * 2 };
         };`,
      );
      const run = await statusq('work', '--db', db, '--table', 'tasks', '--handler', handler, '--exit-when-empty', '--max-attempts', '3', '--retry-delay', '5ms');
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/done 2, failed 1, abuse 1, retried 2/);
      expect(await stats('tasks')).toEqual({ pending: 0, processing: 0, done: 2, abuse: 1, failed: 1 });
      expect(await query(`SELECT attempt_count, last_error FROM tasks WHERE status = 0`)).toEqual([{ attempt_count: 3, last_error: 'Error: boom 3' }]);
      const results = (await query<{ result: string }>(`SELECT result FROM tasks WHERE status = 1 ORDER BY id`)).map((r) => JSON.parse(r.result));
      expect(results).toEqual([{ doubled: 2 }, { doubled: 4 }]);
    });

    it('migrates the seed table_a (twice: the second run is a no-op) and works it with the plain .mjs fixture handler; requeue', async () => {
      for (const ddl of tableASchema('postgres')) await query(ddl);
      const rows = generateTableARows(300, { poisonEvery: 50, abuseEvery: 40 });
      await query(
        `INSERT INTO table_a (id, date, url, kind) SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[])`,
        [rows.map((r) => r.id), rows.map((r) => `${r.date}Z`), rows.map((r) => r.url), rows.map((r) => r.kind)],
      );

      expect(await statusq('migrate', '--db', db, '--table', 'table_a', '--with', 'leases,retries')).toMatchObject({
        code: 0,
        stdout: 'migrated table_a: added columns claimed_at, worker_id, attempt_count, next_attempt_at, last_error and index table_a_statusq_pending',
      });
      expect(await statusq('migrate', '--db', db, '--table', 'table_a', '--with', 'leases,retries')).toMatchObject({ code: 0, stdout: 'table table_a is up to date; nothing to do' });

      const run = await statusq('work', '--db', db, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--concurrency', '8', '--batch', '16', '--retry-delay', '1ms', '--lease', '30s', '--exit-when-empty');
      expect(run.code, run.stderr).toBe(0);
      expect(await stats('table_a')).toEqual({ pending: 0, processing: 0, done: 286, abuse: 8, failed: 6 });
      const poison = await query<{ n: string }>(`SELECT COUNT(*) AS n FROM table_a WHERE kind = 'poison' AND status = 0 AND attempt_count = 3`);
      expect(Number(poison[0]!.n)).toBe(6);

      expect(await statusq('requeue', '--db', db, '--table', 'table_a', '--status', 'failed', '--id', '50', '--id', '100')).toMatchObject({ code: 0, stdout: 'requeued 2 failed rows of table_a' });
      expect(await stats('table_a')).toMatchObject({ pending: 2, failed: 4 });
      expect(await statusq('requeue', '--db', db, '--table', 'table_a', '--status', 'abuse')).toMatchObject({ code: 0, stdout: 'requeued 8 abuse rows of table_a' });
      expect(await stats('table_a')).toMatchObject({ pending: 10, abuse: 0 });
    });

    it('newest-first by default and oldest-first with --order oldest', async () => {
      expect((await statusq('init', '--db', db)).code).toBe(0);
      await query(`INSERT INTO jobs (date, payload) VALUES ('2024-01-01T00:00:01Z', '{"n":1}'), ('2024-01-01T00:00:03Z', '{"n":3}'), ('2024-01-01T00:00:02Z', '{"n":2}')`);
      const seen = join(dir, 'seen.txt');
      const handler = file('order.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(seen)}, job.payload.n + '\\n'); };`);
      const runOnce = async (...extra: string[]) => {
        writeFileSync(seen, '');
        const run = await statusq('work', '--db', db, '--table', 'jobs', '--handler', handler, '--concurrency', '1', '--exit-when-empty', ...extra);
        expect(run.code, run.stderr).toBe(0);
        return readFileSync(seen, 'utf8').trim().split('\n').map(Number);
      };
      expect(await runOnce()).toEqual([3, 2, 1]);
      await query('UPDATE jobs SET status = NULL');
      expect(await runOnce('--order', 'oldest')).toEqual([1, 2, 3]);
    });

    it('a database that does not exist is a one-line database error (exit 1), with the password hidden', async () => {
      const missing = new URL(db);
      missing.pathname = '/statusq_no_such_database';
      const run = await statusq('stats', '--db', missing.toString(), '--table', 'jobs');
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/^statusq: database error/);
      expect(run.stderr.split('\n')).toHaveLength(1);
      if (missing.password) expect(run.stderr).not.toContain(`:${missing.password}@`);
    });
  });
}
