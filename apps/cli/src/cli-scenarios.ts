// The CLI scenarios every dialect must pass, written once: each dialect's test file hands over a way to
// make a fresh database and run SQL in it, as the conformance suite takes a store factory.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TcpProxy, waitFor, type CallDeadlines, type ConformanceOptions } from '@statusq/conformance';
import { generateTableARows, handlerPath, tableASchema, type TableARow } from '@statusq/test-fixtures';
import { parseStats, runCliAsync, startCli, writeFixture, type CliRun, type StatusCounts } from './cli-harness.js';

export type Dialect = 'sqlite' | 'postgres' | 'mysql';

/** One test's database. */
export interface CliTestDatabase {
  /** What `--db` takes. */
  url: string;
  /** Runs SQL outside the CLI (to set a table up or look at it); no parameters, so no placeholder style. */
  query<T = Record<string, unknown>>(sql: string): Promise<T[]>;
  /** Inserts rows into the seed's table_a, created by tableASchema. */
  insertTableA(rows: readonly TableARow[]): Promise<void>;
  dispose(): Promise<void>;
}

export interface CliTarget {
  dialect: Dialect;
  /** Null when the database can be used, else why not (the suite then skips, or fails in CI). */
  unavailable: string | null;
  /** `[needs <capability>]` for the skip title. */
  capability: string;
  /** A fresh, empty database; `dir` is the test's scratch directory. */
  create(dir: string): Promise<CliTestDatabase>;
  /** A SQL literal for an ISO time in the managed table's `date` column. */
  dateLiteral(iso: string): string;
  /** As the conformance option of that name: a server dialect's URL through a TCP proxy, with deadlines. */
  throughProxy?: ConformanceOptions['throughProxy'];
}

/** Short deadlines for the frozen-network scenario, so that each stuck call gives up within the test. */
const PROXY_DEADLINES: CallDeadlines = { connectTimeoutMs: 1000, queryTimeoutMs: 1000 };
const STOP_TIMEOUT_MS = 2000;
/**
 * After the stop timeout the worker hands the claim back (each try on the frozen database bounded by its 1 s
 * deadline) and the store closes (sockets that never answer cut after a 1 s grace): a few seconds here. Without
 * deadlines the process never exits.
 */
const EXIT_MARGIN_MS = 10_000;

export interface CliContext {
  readonly dir: string;
  readonly db: CliTestDatabase;
  statusq(...args: string[]): Promise<CliRun>;
  stats(table?: string): Promise<StatusCounts>;
  file(name: string, text: string): string;
}

/**
 * Registers the shared scenarios under `title`, plus `extra(ctx)` for what only this dialect shows. An
 * unavailable database skips them with `[needs <capability>]` or, with STATUSQ_REQUIRE_DATABASES=1, fails.
 */
export function cliScenarios(title: string, target: CliTarget, extra: (ctx: () => CliContext) => void = () => undefined): void {
  if (target.unavailable !== null) {
    if (process.env.STATUSQ_REQUIRE_DATABASES === '1') {
      it(`${title}: the database is reachable (STATUSQ_REQUIRE_DATABASES=1)`, () => {
        throw new Error(target.unavailable!);
      });
    } else {
      it.skip(`[needs ${target.capability}] ${title}: ${target.unavailable}`, () => undefined);
    }
    return;
  }
  let current: CliContext | null = null;
  const ctx = (): CliContext => {
    if (!current) throw new Error('no CLI test context outside a test');
    return current;
  };

  describe(title, () => {
    beforeEach(async () => {
      const dir = mkdtempSync(join(tmpdir(), `statusq-cli-${target.dialect}-`));
      const db = await target.create(dir);
      const statusq = (...args: string[]) => runCliAsync(dir, args);
      current = {
        dir,
        db,
        statusq,
        stats: async (table = 'jobs') => parseStats(await statusq('stats', '--db', db.url, '--table', table, '--json')),
        file: (name, text) => writeFixture(dir, name, text),
      };
    });
    afterEach(async () => {
      const test = current;
      current = null;
      if (!test) return;
      await test.db.dispose();
      rmSync(test.dir, { recursive: true, force: true });
    });

    it('init creates a managed table once; a second init changes nothing', async () => {
      const { statusq, stats, db } = ctx();
      expect(await statusq('init', '--db', db.url)).toMatchObject({ code: 0, stdout: 'created table jobs' });
      expect(await statusq('init', '--db', db.url)).toMatchObject({ code: 0, stdout: 'table jobs already exists; nothing to do' });
      expect(await stats()).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0 });
    });

    it('enqueues payloads (a file, a blank line, non-ASCII text) and works them to done, abuse and failed with retries', async () => {
      const { statusq, stats, db, file } = ctx();
      expect((await statusq('init', '--db', db.url, '--table', 'tasks')).code).toBe(0);
      expect((await statusq('enqueue', '--db', db.url, '--table', 'tasks', '--payload', '{"n":1,"text":"grüße ✓"}')).code).toBe(0);
      const rows = file('rows.ndjson', ['{"n":2}', '', '{"n":3,"kind":"abuse"}', '{"n":4,"kind":"poison"}'].join('\n'));
      expect(await statusq('enqueue', '--db', db.url, '--table', 'tasks', '--file', rows)).toMatchObject({ code: 0, stdout: 'enqueued 3 rows into tasks' });
      const handler = file(
        'handler.mjs',
        `export default async (job, ctx) => {
           if (job.payload.kind === 'abuse') return ctx.abuse('spam');
           if (job.payload.kind === 'poison') throw new Error('boom ' + job.attempt);
           return { doubled: job.payload.n * 2, text: job.payload.text };
         };`,
      );
      const run = await statusq('work', '--db', db.url, '--table', 'tasks', '--handler', handler, '--exit-when-empty', '--max-attempts', '3', '--retry-delay', '5ms');
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/done 2, failed 1, abuse 1, retried 2/);
      expect(await stats('tasks')).toEqual({ pending: 0, processing: 0, done: 2, abuse: 1, failed: 1 });
      const poison = await db.query<{ attempt_count: number; last_error: string }>('SELECT attempt_count, last_error FROM tasks WHERE status = 0');
      expect(poison.map((r) => ({ attempt_count: Number(r.attempt_count), last_error: r.last_error }))).toEqual([{ attempt_count: 3, last_error: 'Error: boom 3' }]);
      const results = (await db.query<{ result: string }>('SELECT result FROM tasks WHERE status = 1 ORDER BY id')).map((r) => JSON.parse(r.result) as unknown);
      expect(results).toEqual([{ doubled: 2, text: 'grüße ✓' }, { doubled: 4 }]);
    });

    it("migrates the seed's table_a (twice: the second is a no-op), works it with the plain .mjs fixture handler, and requeues", async () => {
      const { statusq, stats, db } = ctx();
      for (const ddl of tableASchema(target.dialect)) await db.query(ddl);
      await db.insertTableA(generateTableARows(300, { poisonEvery: 50, abuseEvery: 40 }));
      expect(await statusq('migrate', '--db', db.url, '--table', 'table_a', '--with', 'leases,retries')).toMatchObject({
        code: 0,
        stdout: 'migrated table_a: added columns claimed_at, worker_id, attempt_count, next_attempt_at, last_error and index table_a_statusq_pending',
      });
      expect(await statusq('migrate', '--db', db.url, '--table', 'table_a', '--with', 'leases,retries')).toMatchObject({ code: 0, stdout: 'table table_a is up to date; nothing to do' });

      const run = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--concurrency', '8', '--batch', '16', '--retry-delay', '1ms', '--lease', '30s', '--exit-when-empty');
      expect(run.code, run.stderr).toBe(0);
      expect(await stats('table_a')).toEqual({ pending: 0, processing: 0, done: 286, abuse: 8, failed: 6 });
      const [poison] = await db.query<{ n: unknown }>(`SELECT COUNT(*) AS n FROM table_a WHERE kind = 'poison' AND status = 0 AND attempt_count = 3`);
      expect(Number(poison!.n)).toBe(6);

      expect(await statusq('requeue', '--db', db.url, '--table', 'table_a', '--status', 'failed', '--id', '50', '--id', '100')).toMatchObject({ code: 0, stdout: 'requeued 2 failed rows of table_a' });
      expect(await stats('table_a')).toMatchObject({ pending: 2, failed: 4 });
      expect(await statusq('requeue', '--db', db.url, '--table', 'table_a', '--status', 'abuse')).toMatchObject({ code: 0, stdout: 'requeued 8 abuse rows of table_a' });
      expect(await stats('table_a')).toMatchObject({ pending: 10, abuse: 0 });
    });

    it('newest-first by default and oldest-first with --order oldest', async () => {
      const { statusq, db, dir, file } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const date = (s: number) => target.dateLiteral(`2024-01-01T00:00:0${s}.000Z`);
      await db.query(`INSERT INTO jobs (date, payload) VALUES (${date(1)}, '{"n":1}'), (${date(3)}, '{"n":3}'), (${date(2)}, '{"n":2}')`);
      const seen = join(dir, 'seen.txt');
      const handler = file('order.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(seen)}, job.payload.n + '\\n'); };`);
      const runOnce = async (...extra: string[]) => {
        writeFileSync(seen, '');
        const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--concurrency', '1', '--exit-when-empty', ...extra);
        expect(run.code, run.stderr).toBe(0);
        return readFileSync(seen, 'utf8').trim().split('\n').map(Number);
      };
      expect(await runOnce()).toEqual([3, 2, 1]);
      await db.query('UPDATE jobs SET status = NULL');
      expect(await runOnce('--order', 'oldest')).toEqual([1, 2, 3]);
    });

    it(
      '[needs throughProxy] work: the database stops answering (TCP open, no packets), then SIGTERM: the failing call is logged and the process exits within --stop-timeout plus a bounded margin',
      async (t) => {
        if (!target.throughProxy) t.skip();
        const { statusq, db, dir, file } = ctx();
        expect((await statusq('init', '--db', db.url)).code).toBe(0);
        expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
        const route = target.throughProxy!(db.url, PROXY_DEADLINES);
        const proxy = await TcpProxy.start(route.upstream);
        try {
          const started = join(dir, 'started.txt');
          // Gives up as soon as its signal aborts: only the database can hold the stop up.
          const handler = file(
            'wait.mjs',
            `import { writeFileSync } from 'node:fs';\nexport default async (job, ctx) => {\n  writeFileSync(${JSON.stringify(started)}, String(job.id));\n  await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));\n};`,
          );
          const args = ['work', '--db', route.via(proxy), '--table', 'jobs', '--handler', handler, '--concurrency', '1', '--stop-timeout', `${STOP_TIMEOUT_MS}ms`];
          const work = startCli(dir, args, STOP_TIMEOUT_MS + EXIT_MARGIN_MS + 30_000);
          await waitFor('the job to start', () => existsSync(started), { timeoutMs: 30_000 });
          proxy.freeze();
          const signalled = Date.now();
          work.child.kill('SIGTERM');
          const run = await work.ended;
          const exitMs = Date.now() - signalled;
          expect(run.code, `the process did not exit by itself (killed after ${exitMs} ms); stderr: ${run.stderr}`).not.toBeNull();
          expect(exitMs, run.stderr).toBeLessThan(STOP_TIMEOUT_MS + EXIT_MARGIN_MS);
          // The call the frozen database never answered is reported, naming the database.
          expect(run.stderr).toMatch(/^statusq: .*(PostgreSQL|MySQL)/m);
          console.info(`[${target.dialect}] frozen network: statusq work exited ${exitMs} ms after SIGTERM (--stop-timeout ${STOP_TIMEOUT_MS}ms), code ${run.code}`);
        } finally {
          await proxy.close();
        }
      },
      STOP_TIMEOUT_MS + EXIT_MARGIN_MS + 60_000,
    );

    describe('bad input: one line on stderr, exit code 2, nothing touched', () => {
      beforeEach(async () => {
        const { statusq, db } = ctx();
        expect((await statusq('init', '--db', db.url)).code).toBe(0);
        expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
      });
      const handler = () => ctx().file('ok.mjs', 'export default async () => {};');
      const db = () => ctx().db.url;
      const cases: Array<[string, () => string[], RegExp]> = [
        ['an unknown flag', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--bogus'], /Unknown option '--bogus'/],
        ['an invalid table name', () => ['work', '--db', db(), '--table', 'jobs; DROP TABLE jobs', '--handler', handler()], /invalid table name/],
        ['an invalid column name', () => ['work', '--db', db(), '--table', 'jobs', '--status-column', '1status', '--handler', handler()], /invalid status column/],
        ['a missing table', () => ['work', '--db', db(), '--table', 'nope', '--handler', handler()], /table "nope" does not exist/],
        ['a missing column', () => ['stats', '--db', db(), '--table', 'jobs', '--order-column', 'created'], /no order column "created"/],
        ['a missing handler file', () => ['work', '--db', db(), '--table', 'jobs', '--handler', join(ctx().dir, 'missing.mjs')], /handler file not found/],
        ['a handler without a default export', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handlerPath('no-default.mjs')], /no default export/],
        ['a default export that is not a function', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handlerPath('not-a-function.mjs')], /not a function/],
        ['a missing --table', () => ['work', '--db', db(), '--handler', handler()], /--table is required/],
        ['a bad --concurrency', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--concurrency', '0'], /concurrency must be an integer/],
        ['a bad --retry-delay', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--retry-delay', 'soon'], /invalid --retry-delay/],
        ['a bad --order', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--order', 'random'], /--order must be newest or oldest/],
        ['invalid JSON in an ndjson file', () => ['enqueue', '--db', db(), '--file', ctx().file('bad.ndjson', '{"n":2}\n{nope}\n')], /line 2 is not valid JSON/],
        ['a bad requeue status', () => ['requeue', '--db', db(), '--table', 'jobs', '--status', 'done'], /--status must be failed or abuse/],
        ['an unknown --with group', () => ['migrate', '--db', db(), '--table', 'jobs', '--with', 'leases,magic'], /unknown column group "magic"/],
      ];
      it.each(cases)('%s', async (_name, args, message) => {
        const run = await ctx().statusq(...args());
        expect(run.code).toBe(2);
        expect(run.stderr).toMatch(message);
        expect(run.stderr.split('\n')).toHaveLength(1);
        expect(await ctx().stats()).toEqual({ pending: 1, processing: 0, done: 0, abuse: 0, failed: 0 });
      });
    });

    extra(ctx);
  });
}
