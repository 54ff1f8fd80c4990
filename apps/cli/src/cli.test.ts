// The CLI as a user runs it: the built bin in a child process, over real SQLite files.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { parseStats, runCli, writeFixture } from './cli-harness.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateTableARows, handlerPath, tableASchema } from '@statusq/test-fixtures';

let dir: string;
let db: string;

const statusq = (...args: string[]) => runCli(dir, args);
const stats = (table = 'jobs') => parseStats(statusq('stats', '--db', db, '--table', table, '--json'));

function query<T>(sql: string): T[] {
  const conn = new Database(join(dir, 'q.db'));
  try {
    return conn.prepare(sql).all() as T[];
  } finally {
    conn.close();
  }
}

const file = (name: string, text: string) => writeFixture(dir, name, text);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'statusq-cli-'));
  db = `sqlite:${join(dir, 'q.db')}`;
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('statusq CLI on SQLite', () => {
  it('init creates a managed table once; a second init changes nothing', () => {
    expect(statusq('init', '--db', db)).toMatchObject({ code: 0, stdout: 'created table jobs' });
    expect(statusq('init', '--db', db)).toMatchObject({ code: 0, stdout: 'table jobs already exists; nothing to do' });
    expect(stats()).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0 });
  });

  it('enqueues payloads and works them to done, abuse and failed with retries', () => {
    statusq('init', '--db', db, '--table', 'tasks');
    expect(statusq('enqueue', '--db', db, '--table', 'tasks', '--payload', '{"n":1}').code).toBe(0);
    const rows = file('rows.ndjson', ['{"n":2}', '', '{"n":3,"kind":"abuse"}', '{"n":4,"kind":"poison"}'].join('\n'));
    expect(statusq('enqueue', '--db', db, '--table', 'tasks', '--file', rows)).toMatchObject({ code: 0, stdout: 'enqueued 3 rows into tasks' });
    const handler = file(
      'handler.mjs',
      `export default async (job, ctx) => {
         if (job.payload.kind === 'abuse') return ctx.abuse('spam');
         if (job.payload.kind === 'poison') throw new Error('boom ' + job.attempt);
         return { doubled: job.payload.n * 2 };
       };`,
    );
    const run = statusq('work', '--db', db, '--table', 'tasks', '--handler', handler, '--exit-when-empty', '--max-attempts', '3', '--retry-delay', '5ms');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/done 2, failed 1, abuse 1, retried 2/);
    expect(stats('tasks')).toEqual({ pending: 0, processing: 0, done: 2, abuse: 1, failed: 1 });
    const poison = query<{ attempt_count: number; last_error: string }>(`SELECT attempt_count, last_error FROM tasks WHERE status = 0`);
    expect(poison).toEqual([{ attempt_count: 3, last_error: 'Error: boom 3' }]);
    const results = query<{ result: string }>(`SELECT result FROM tasks WHERE status = 1 ORDER BY id`).map((r) => JSON.parse(r.result));
    expect(results).toEqual([{ doubled: 2 }, { doubled: 4 }]);
  });

  it('migrates the seed table_a and works it with the plain .mjs fixture handler', () => {
    const conn = new Database(join(dir, 'q.db'));
    for (const ddl of tableASchema('sqlite')) conn.exec(ddl);
    const insert = conn.prepare('INSERT INTO table_a (id, date, url, kind) VALUES (@id, @date, @url, @kind)');
    for (const row of generateTableARows(300, { poisonEvery: 50, abuseEvery: 40 })) insert.run(row);
    conn.close();

    expect(statusq('migrate', '--db', db, '--table', 'table_a', '--with', 'leases,retries')).toMatchObject({
      code: 0,
      stdout: 'migrated table_a: added columns claimed_at, worker_id, attempt_count, next_attempt_at, last_error and index table_a_statusq_pending',
    });
    expect(statusq('migrate', '--db', db, '--table', 'table_a', '--with', 'leases,retries')).toMatchObject({ code: 0, stdout: 'table table_a is up to date; nothing to do' });

    const run = statusq('work', '--db', db, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--concurrency', '8', '--batch', '16', '--retry-delay', '1ms', '--lease', '30s', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    expect(stats('table_a')).toEqual({ pending: 0, processing: 0, done: 286, abuse: 8, failed: 6 });
    const poison = query<{ n: number }>(`SELECT COUNT(*) AS n FROM table_a WHERE kind = 'poison' AND status = 0 AND attempt_count = 3`);
    expect(poison[0]!.n).toBe(6);

    expect(statusq('requeue', '--db', db, '--table', 'table_a', '--status', 'failed', '--id', '50', '--id', '100')).toMatchObject({ code: 0, stdout: 'requeued 2 failed rows of table_a' });
    expect(stats('table_a')).toMatchObject({ pending: 2, failed: 4 });
    expect(statusq('requeue', '--db', db, '--table', 'table_a', '--status', 'abuse')).toMatchObject({ code: 0, stdout: 'requeued 8 abuse rows of table_a' });
    expect(stats('table_a')).toMatchObject({ pending: 10, abuse: 0 });
  });

  it('newest-first by default and oldest-first with --order oldest', () => {
    statusq('init', '--db', db);
    const conn = new Database(join(dir, 'q.db'));
    conn.exec(`INSERT INTO jobs (date, payload) VALUES (1000, '{"n":1}'), (3000, '{"n":3}'), (2000, '{"n":2}')`);
    conn.close();
    const seen = join(dir, 'seen.txt');
    const handler = file('order.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(seen)}, job.payload.n + '\\n'); };`);
    const runOnce = (...extra: string[]) => {
      writeFileSync(seen, '');
      expect(statusq('work', '--db', db, '--table', 'jobs', '--handler', handler, '--concurrency', '1', '--exit-when-empty', ...extra).code).toBe(0);
      return readFileSync(seen, 'utf8').trim().split('\n').map(Number);
    };
    expect(runOnce()).toEqual([3, 2, 1]);
    const conn2 = new Database(join(dir, 'q.db'));
    conn2.exec('UPDATE jobs SET status = NULL');
    conn2.close();
    expect(runOnce('--order', 'oldest')).toEqual([1, 2, 3]);
  });

  describe('bad input: one line on stderr, exit code 2, nothing touched', () => {
    beforeEach(() => {
      statusq('init', '--db', db);
      statusq('enqueue', '--db', db, '--payload', '{"n":1}');
    });
    const handler = () => file('ok.mjs', 'export default async () => {};');
    const cases: Array<[string, () => string[], RegExp]> = [
      ['an unknown flag', () => ['work', '--db', db, '--table', 'jobs', '--handler', handler(), '--bogus'], /Unknown option '--bogus'/],
      ['an invalid table name', () => ['work', '--db', db, '--table', 'jobs; DROP TABLE jobs', '--handler', handler()], /invalid table name/],
      ['an invalid column name', () => ['work', '--db', db, '--table', 'jobs', '--status-column', '1status', '--handler', handler()], /invalid status column/],
      ['a missing table', () => ['work', '--db', db, '--table', 'nope', '--handler', handler()], /table "nope" does not exist/],
      ['a missing column', () => ['stats', '--db', db, '--table', 'jobs', '--order-column', 'created'], /no order column "created"/],
      ['a missing handler file', () => ['work', '--db', db, '--table', 'jobs', '--handler', join(dir, 'missing.mjs')], /handler file not found/],
      ['a handler without a default export', () => ['work', '--db', db, '--table', 'jobs', '--handler', handlerPath('no-default.mjs')], /no default export/],
      ['a default export that is not a function', () => ['work', '--db', db, '--table', 'jobs', '--handler', handlerPath('not-a-function.mjs')], /not a function/],
      ['a missing --table', () => ['work', '--db', db, '--handler', handler()], /--table is required/],
      ['a bad --concurrency', () => ['work', '--db', db, '--table', 'jobs', '--handler', handler(), '--concurrency', '0'], /concurrency must be an integer/],
      ['a bad --retry-delay', () => ['work', '--db', db, '--table', 'jobs', '--handler', handler(), '--retry-delay', 'soon'], /invalid --retry-delay/],
      ['a bad --order', () => ['work', '--db', db, '--table', 'jobs', '--handler', handler(), '--order', 'random'], /--order must be newest or oldest/],
      ['a missing database file', () => ['work', '--db', `sqlite:${join(dir, 'absent.db')}`, '--table', 'jobs', '--handler', handler()], /cannot open SQLite database/],
      ['an unsupported URL', () => ['stats', '--db', 'oracle://x', '--table', 'jobs'], /unsupported database URL/],
      ['invalid JSON in an ndjson file', () => ['enqueue', '--db', db, '--file', file('bad.ndjson', '{"n":2}\n{nope}\n')], /line 2 is not valid JSON/],
      ['a bad requeue status', () => ['requeue', '--db', db, '--table', 'jobs', '--status', 'done'], /--status must be failed or abuse/],
      ['an unknown --with group', () => ['migrate', '--db', db, '--table', 'jobs', '--with', 'leases,magic'], /unknown column group "magic"/],
      ['an unknown command', () => ['frobnicate'], /unknown command "frobnicate"/],
    ];
    it.each(cases)('%s', (_name, args, message) => {
      const run = statusq(...args());
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stderr.split('\n')).toHaveLength(1);
      expect(stats()).toEqual({ pending: 1, processing: 0, done: 0, abuse: 0, failed: 0 });
    });
  });
});
