// `statusq work` on every dialect: schedules, instance caps, rate limits, --processes with a child killed,
// claim order, --select, the tables it refuses, its log at --verbose, and a database that stops answering.
// Part of the CLI scenarios (cli-scenarios.ts).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect, it } from 'vitest';
import { TcpProxy, waitFor, type CallDeadlines } from '@statusq/conformance';
import { generateTableARows, handlerPath } from '@statusq/test-fixtures';
import { childPids, launchCli, logLines, until } from './cli-harness.js';
import type { CliContext, CliTarget } from './cli-target.js';

/** Short deadlines for the frozen-network scenario, so that each stuck call gives up within the test. */
const PROXY_DEADLINES: CallDeadlines = { connectTimeoutMs: 1000, queryTimeoutMs: 1000 };
const STOP_TIMEOUT_MS = 2000;
/**
 * After the stop timeout the worker hands the claim back (each try on the frozen database bounded by its 1 s
 * deadline) and the store closes (sockets that never answer cut after a 1 s grace): a few seconds here. Without
 * deadlines the process never exits.
 */
const EXIT_MARGIN_MS = 10_000;

export function workScenarios(ctx: () => CliContext, target: CliTarget): void {
  it("work with a handler module whose ctx.transaction writes through the store's own driver connection: one effect per done row, and a callback that throws leaves none", async () => {
    const { statusq, db, file, stats } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    await db.query('CREATE TABLE effects (job_id VARCHAR(64) NOT NULL, pid INTEGER NOT NULL)');
    for (const payload of ['{"n":1}', '{"n":2}', '{"n":3}', '{"refuse":true}']) expect((await statusq('enqueue', '--db', db.url, '--payload', payload)).code).toBe(0);
    // The fixture's insert takes whichever driver handle the store lends (told apart by shape), as a user's module would.
    const effects = pathToFileURL(handlerPath('table-a-effects.mjs')).href;
    const handler = file(
      'effects-in-transaction.mjs',
      [
        `import { insertEffect } from ${JSON.stringify(effects)};`,
        'export default async (job, ctx) => ctx.transaction(async (tx) => {',
        '  await insertEffect(tx, job.id, process.pid);',
        "  if (job.payload.refuse) throw Object.assign(new Error('refused after the write'), { retryable: false });",
        '  return job.payload;',
        '});',
      ].join('\n'),
    );
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--exit-when-empty', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/done 3, failed 1, abuse 0/);
    expect(await stats('jobs')).toMatchObject({ pending: 0, processing: 0, done: 3, failed: 1 });
    const counted = await db.query<{ job_id: unknown; n: unknown }>('SELECT job_id, COUNT(*) AS n FROM effects GROUP BY job_id');
    const done = await db.query<{ id: unknown }>('SELECT id FROM jobs WHERE status = 1 ORDER BY id');
    expect(counted.map((row) => [String(row.job_id), Number(row.n)]).sort()).toEqual(done.map((row) => [String(row.id), 1]).sort());
  });

  it('work --schedule (YAML) with --processes 2: every tick of an every-second schedule runs once, logged by the process that claimed it; a bad schedule file exits 2 before the database is touched', async () => {
    const { statusq, db, file, dir } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const schedules = file('schedules.yaml', ['schedules:', '  - name: heartbeat', "    cron: '* * * * * *'", '    payload: { ping: true }', '    catchUp: 0', ''].join('\n'));
    const seen = join(dir, 'seen.txt');
    const handler = file('record.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(seen)}, job.row.dedupe_key + '\\n'); };`);
    const run = launchCli(dir, ['work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--schedule', schedules, '--processes', '2', '--poll-max', '50ms']);
    const ran = () => (existsSync(seen) ? readFileSync(seen, 'utf8').trim().split('\n').filter(Boolean) : []);
    await waitFor('three ticks to run', () => ran().length >= 3, { timeoutMs: 30_000, intervalMs: 50 });
    run.child.kill('SIGTERM');
    const result = await run.ended;
    expect(result.code, result.stderr).toBe(0);
    const keys = ran();
    expect(new Set(keys).size).toBe(keys.length);
    const ticks = keys.map((key) => Date.parse(key.replace('schedule:heartbeat:', ''))).sort((a, b) => a - b);
    for (let i = 1; i < ticks.length; i++) expect(ticks[i]! - ticks[i - 1]!).toBe(1000);
    const logged = logLines(result.stdout).filter((line) => typeof line.msg === 'string' && line.msg.startsWith('schedule heartbeat: enqueued tick'));
    expect(logged.length).toBeGreaterThanOrEqual(keys.length);
    expect(new Set(logged.map((line) => line.tick)).size).toBe(logged.length);

    for (const [text, message] of [
      ['schedules: [{ name: x, cron: "every day" }]', /^statusq: .*bad\.yaml: schedule x: cron "every day" is not a cron expression/],
      ['{ not yaml', /^statusq: --schedule: .*bad\.yaml is neither YAML nor JSON/],
    ] as Array<[string, RegExp]>) {
      const refused = await statusq('work', '--db', 'sqlite:/nonexistent/dir/never.db', '--table', 'jobs', '--handler', handler, '--schedule', file('bad.yaml', text));
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(message);
    }
  });

  it('work --max-instances 1: a second instance exits 0 at once naming the holder; one with --wait starts when the first dies (its slot expires by --instance-lease) and runs jobs; bad cap flags exit 2 before the database is touched', async () => {
    const { statusq, db, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const handler = file('noop.mjs', 'export default async () => {};');
    const holding = (stdout: string) => stdout.includes('"msg":"holding instance slot 1 of 1"');
    const first = launchCli(ctx().dir, ['work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--max-instances', '1', '--instance-lease', '2s', '--processes', '2', '--poll-max', '50ms']);
    await waitFor('the first instance to hold its slot', () => holding(first.stdout()), { timeoutMs: 30_000, intervalMs: 50 });

    const over = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--max-instances', '1');
    expect(over.code, over.stderr).toBe(0);
    expect(logLines(over.stdout).map((line) => line.msg)).toContainEqual(expect.stringMatching(/^1 of 1 instance slots on jobs are held \(.+:\d+ \(slot 1\)\); exiting \(code 0\)/));

    const waiting = launchCli(ctx().dir, ['work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--max-instances', '1', '--wait', '--instance-lease', '2s', '--poll-max', '50ms']);
    await waitFor('the second instance to wait', () => waiting.stdout().includes('; waiting for one"'), { timeoutMs: 30_000, intervalMs: 50 });
    // The launcher dies without releasing its slot; its children drain and exit on their own.
    first.child.kill('SIGKILL');
    await first.ended;
    await waitFor('the waiting instance to take the expired slot', () => holding(waiting.stdout()), { timeoutMs: 30_000, intervalMs: 50 });
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
    await waitFor('the row to be done', async () => (await ctx().stats()).done === 1, { timeoutMs: 30_000, intervalMs: 50 });
    waiting.child.kill('SIGTERM');
    expect((await waiting.ended).code).toBe(0);
    // Released on the way out: the next instance gets the slot at once.
    const next = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--max-instances', '1', '--exit-when-empty');
    expect(next.code, next.stderr).toBe(0);
    expect(holding(next.stdout)).toBe(true);

    for (const [flags, message] of [
      [['--max-instances', '0'], /max instances must be a whole number from 1 to 1000, got 0/],
      [['--max-instances', 'two'], /--max-instances must be a whole number/],
      [['--wait'], /--wait needs --max-instances/],
      [['--max-instances', '2', '--instance-lease', '10ms'], /the instance lease must be from 1000 ms/],
    ] as Array<[string[], RegExp]>) {
      const refused = await statusq('work', '--db', 'sqlite:/nonexistent/dir/never.db', '--table', 'jobs', '--handler', handler, ...flags);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(message);
    }
  });

  it('work --rate 10/s --processes 3: one budget for every process, so 20 jobs take about two seconds and no second holds more than the limit and its burst; a bad rate exits 2 before the database is touched', async () => {
    const { statusq, db, file, dir } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--file', file('rows.ndjson', Array.from({ length: 20 }, (_, n) => `{"n":${n}}`).join('\n')))).code).toBe(0);
    const seen = join(dir, 'starts.txt');
    const handler = file('record.mjs', `import { appendFileSync } from 'node:fs';\nexport default async () => { appendFileSync(${JSON.stringify(seen)}, Date.now() + '\\n'); };`);
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--rate', '10/s', '--processes', '3', '--concurrency', '16', '--exit-when-empty', '--poll-max', '50ms');
    expect(run.code, run.stderr).toBe(0);
    const starts = readFileSync(seen, 'utf8').trim().split('\n').map(Number).sort((a, b) => a - b);
    expect(starts).toHaveLength(20);
    // 10 a second, a burst of 1: starts 100 ms apart, whichever process takes them.
    expect(starts.at(-1)! - starts[0]!).toBeGreaterThanOrEqual(18 * 100 - 100);
    for (let i = 0; i < starts.length; i++) expect(starts.filter((t) => t >= starts[i]! && t < starts[i]! + 1000).length).toBeLessThanOrEqual(12);

    for (const [rate, message] of [
      ['5/d', /--rate must be a number of jobs from 1 to 1000000 per s, m or h/],
      ['0/s', /--rate must be a number of jobs/],
    ] as Array<[string, RegExp]>) {
      const refused = await statusq('work', '--db', 'sqlite:/nonexistent/dir/never.db', '--table', 'jobs', '--handler', handler, '--rate', rate);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(message);
    }
  });

  it("issue 40's run: migrate --beside, then work --processes 3 over the seed's table_a with a child SIGKILLed mid-run and a handler that throws for some ids: every row ends in its rule's status, every run counted, nothing left processing, the table's columns unchanged", async () => {
    const { stats, db, dir, file } = ctx();
    for (const ddl of target.fixtures.tableA('table_a')) await db.query(ddl);
    const rows = generateTableARows(900, { poisonEvery: 50, abuseEvery: 40, flakyEvery: 30 });
    await db.insertTableA(rows);
    const mysql = db.url.startsWith('mysql');
    // SHOW CREATE TABLE less its index lines: what migrate --beside must leave as it was (MySQL/MariaDB).
    const definition = async () =>
      mysql ? String(Object.values((await db.query<Record<string, unknown>>('SHOW CREATE TABLE table_a'))[0]!)[1]).split('\n').filter((line) => !/^\s*(KEY|INDEX)\b/.test(line)).map((line) => line.replace(/,$/, '')) : [];
    const columnsOf = async () => Object.keys((await db.query<Record<string, unknown>>('SELECT * FROM table_a WHERE id = 1'))[0]!).sort();
    const [before, beforeColumns] = [await definition(), await columnsOf()];
    expect((await ctx().statusq('migrate', '--db', db.url, '--table', 'table_a', '--beside')).code).toBe(0);

    const ledger = join(dir, 'ledger.txt');
    const handler = file(
      'slow-table-a.mjs',
      `import fixture from ${JSON.stringify(pathToFileURL(handlerPath('table-a.mjs')).href)};\nexport default async (job, ctx) => { try { return await fixture(job, ctx); } finally { await new Promise((r) => setTimeout(r, 10)); } };\n`,
    );
    const run = launchCli(dir, ['work', '--db', db.url, '--table', 'table_a', '--handler', handler, '--processes', '3', '--concurrency', '4', '--lease', '2s', '--retry-delay', '1ms', '--exit-when-empty'], 120_000, { STATUSQ_LEDGER: ledger });
    await until('three worker processes', () => childPids(run.child.pid!).length === 3);
    await until('some rows done', async () => (await stats('table_a')).done >= 60, 60_000);
    const [victim] = childPids(run.child.pid!);
    process.kill(victim!, 'SIGKILL');
    const result = await run.ended;
    expect(result.code, result.stderr).toBe(0);
    expect(logLines(result.stdout).filter((line) => line.level === 'warn').map((line) => line.msg)).toContain(`worker process ${victim} killed by SIGKILL`);

    const t = { ok: 0, poison: 0, abuse: 0, flaky: 0 };
    for (const row of rows) t[row.kind]++;
    expect(await stats('table_a')).toEqual({ pending: 0, processing: 0, done: t.ok + t.flaky, abuse: t.abuse, failed: t.poison, other: 0 });
    const runs = new Map<string, number>();
    for (const line of readFileSync(ledger, 'utf8').trim().split('\n')) runs.set(line.split(' ')[0]!, (runs.get(line.split(' ')[0]!) ?? 0) + 1);
    const read = await db.query<{ id: unknown; status: unknown; attempts: unknown }>('SELECT t.id AS id, t.status AS status, s.attempt_count AS attempts FROM table_a t LEFT JOIN table_a_statusq s ON s.id = t.id');
    // Each attempt counted: those that failed, were retried or were cut off by the kill, plus the last one that a
    // success or an abuse does not count; a claim killed before its handler started may count without a run.
    const uncounted = read.filter((r) => Number(r.attempts ?? 0) + (Number(r.status) === 0 ? 0 : 1) < (runs.get(String(r.id)) ?? 0)).map((r) => `${String(r.id)}: ${String(r.attempts)} of ${runs.get(String(r.id))}`);
    expect(uncounted).toEqual([]);
    expect(read.filter((r) => Number(r.status) === 0 && Number(r.attempts) !== 3)).toEqual([]);
    expect(await columnsOf()).toEqual(beforeColumns);
    expect(await definition()).toEqual(before);
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

  it('work on a status-only table ends with one warn line naming the rows left processing and the command that returns them, exit 0; under --processes the launcher says it', async () => {
    // The probe's case: a killed --processes child left a row in 9, and work --exit-when-empty exited 0 without a word.
    const { statusq, stats, db } = ctx();
    for (const ddl of target.fixtures.tableA('table_a')) await db.query(ddl);
    await db.insertTableA(generateTableARows(20).map((row) => ({ ...row, kind: 'ok' as const })));
    await db.query('UPDATE table_a SET status = 9 WHERE id IN (3, 7)');
    const expected =
      '2 rows of table_a left processing (ids 3, 7) and the table has no lease column, so nothing returns them by itself: if no worker is running them (a worker was killed), ' +
      'stop every worker and run statusq requeue --table table_a --status processing --force; statusq migrate --with leases makes it automatic';
    for (const extra of [[], ['--processes', '2']]) {
      const run = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--exit-when-empty', ...extra);
      expect(run.code, run.stderr).toBe(0);
      expect(logLines(run.stdout).filter((line) => line.level === 'warn').map((line) => line.msg), extra.join(' ')).toEqual([expected]);
    }
    expect(await stats('table_a')).toMatchObject({ pending: 0, processing: 2, done: 18 });
    // With nothing left processing, nothing is said.
    await db.query('UPDATE table_a SET status = NULL WHERE id IN (3, 7)');
    const clean = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handlerPath('table-a.mjs'), '--exit-when-empty');
    expect(logLines(clean.stdout).filter((line) => line.level === 'warn')).toEqual([]);
  });

  it('work --select: job.row carries the named columns and statusq\'s own, not the rest; an unknown column exits 2 before any claim, a blank name is a usage error', async () => {
    const { statusq, stats, db, dir, file } = ctx();
    for (const ddl of target.fixtures.tableA('table_a')) await db.query(ddl);
    await db.insertTableA(generateTableARows(20).map((row) => ({ ...row, kind: 'ok' as const })));
    expect((await statusq('migrate', '--db', db.url, '--table', 'table_a', '--with', 'leases')).code).toBe(0);
    const seen = join(dir, 'keys.txt');
    const handler = file('keys.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(seen)}, Object.keys(job.row).sort().join(',') + '\\n'); };`);
    const refused = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handler, '--select', 'kind,nope', '--exit-when-empty');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/select column "nope"/);
    expect(await stats('table_a')).toMatchObject({ pending: 20, processing: 0 });
    expect((await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handler, '--select', 'kind,,url')).code).toBe(2);

    writeFileSync(seen, '');
    const run = await statusq('work', '--db', db.url, '--table', 'table_a', '--handler', handler, '--select', ' kind ', '--concurrency', '4', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    expect(new Set(readFileSync(seen, 'utf8').trim().split('\n'))).toEqual(new Set(['claimed_at,date,id,kind,status,worker_id']));
    expect(await stats('table_a')).toMatchObject({ pending: 0, done: 20 });
  });

  it('work refuses, exit 2 and one line, a table whose id is not unique on its own or whose status is not an integer, and changes no row; a unique index on id is enough', async () => {
    const { statusq, db, file } = ctx();
    for (const [kind, table] of [['sharedId', 'pairs'], ['textStatus', 'texty'], ['uniqueId', 'keyed']] as const) {
      for (const sql of target.fixtures.checked[kind]!(table)) await db.query(sql);
    }
    const date = "'2024-01-01 00:00:00.000'";
    await db.query(`INSERT INTO pairs (id, k, date) VALUES (1, 1, ${date}), (1, 2, ${date}), (2, 1, ${date})`);
    await db.query(`INSERT INTO keyed (id, k, date) VALUES (1, 1, ${date}), (2, 1, ${date})`);
    await db.query(`INSERT INTO texty (id, date) VALUES (1, ${date}), (2, ${date})`);
    const handler = file('ok.mjs', 'export default async () => {};');
    const work = (table: string) => statusq('work', '--db', db.url, '--table', table, '--handler', handler, '--exit-when-empty');
    const statuses = async (table: string) => (await db.query<{ status: unknown }>(`SELECT status FROM ${table} ORDER BY id`)).map((r) => (r.status === null ? null : Number(r.status)));

    const shared = await work('pairs');
    expect(shared.code, shared.stderr).toBe(2);
    expect(shared.stderr).toMatch(/id column "id" is not unique: it must be the primary key or have a unique index of its own/);
    expect(shared.stderr.split('\n')).toHaveLength(1);
    expect(await statuses('pairs')).toEqual([null, null, null]);

    const texty = await work('texty');
    expect(texty.code, texty.stderr).toBe(2);
    expect(texty.stderr).toMatch(/status column "status" is (varchar\(8\)|character varying), not an integer type/);
    expect(texty.stderr.split('\n')).toHaveLength(1);
    expect(await statuses('texty')).toEqual([null, null]);

    // keyed has the same PRIMARY KEY (id, k) as pairs plus a unique index on id alone.
    const keyed = await work('keyed');
    expect(keyed.code, keyed.stderr).toBe(0);
    expect(await statuses('keyed')).toEqual([1, 1]);
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
        const work = launchCli(dir, args, STOP_TIMEOUT_MS + EXIT_MARGIN_MS + 30_000);
        await waitFor('the job to start', () => existsSync(started), { timeoutMs: 30_000 });
        proxy.freeze();
        const signalled = Date.now();
        work.child.kill('SIGTERM');
        const run = await work.ended;
        const exitMs = Date.now() - signalled;
        expect(run.code, `the process did not exit by itself (killed after ${exitMs} ms); stderr: ${run.stderr}`).not.toBeNull();
        expect(exitMs, run.stderr).toBeLessThan(STOP_TIMEOUT_MS + EXIT_MARGIN_MS);
        // The call the frozen database never answered is logged, naming the database, once per outage.
        const outage = logLines(run.stdout).filter((line) => line.level === 'warn' && line.msg.startsWith('database unavailable'));
        expect(outage, run.stdout).toHaveLength(1);
        expect(outage[0]!.msg).toMatch(/PostgreSQL|MySQL/);
        console.info(`[${target.dialect}] frozen network: statusq work exited ${exitMs} ms after SIGTERM (--stop-timeout ${STOP_TIMEOUT_MS}ms), code ${run.code}`);
      } finally {
        await proxy.close();
      }
    },
    STOP_TIMEOUT_MS + EXIT_MARGIN_MS + 60_000,
  );

  it('--verbose (--log-level debug) logs one bounded line per job, however long the error', async () => {
    const { statusq, db, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
    const handler = file('huge.mjs', `export default async () => { throw new Error('x'.repeat(1_000_000) + '\\nsecond line'); };`);
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--verbose', '--max-attempts', '1', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    const lines = logLines(run.stdout);
    expect(lines.map((line) => line.level)).toEqual(['info', 'error', 'info']);
    expect(lines[0]!.msg).toBe('worker started on jobs');
    expect(lines[2]!.msg).toMatch(/^worked 1 job in /);
    expect(lines[1]!.msg).toBe(`job failed: Error: ${'x'.repeat(500 - 'Error: '.length)}… (1000019 chars)`);
    expect(lines[1]!.err!.message).toBe(`${'x'.repeat(500)}… (1000012 chars)`);
    expect(lines[1]!.err!.stack).toMatch(/^Error: x{4089}… \(\d+ chars\)$/);
    for (const line of run.stdout.split('\n')) expect(line.length).toBeLessThan(6_000);
  });
}
