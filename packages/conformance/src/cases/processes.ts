import { skipFor } from '../skips.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Queue, StoreError, type Row, type TableConfig } from '@statusq/core';
import type { ColumnGroup } from '@statusq/core/adapter';
import { expectedStatus, generateTableARows, handlerPath, type TableARow } from '@statusq/test-fixtures';
import type { ChildWorkerArgs, ChildWorkerResult } from '../child-worker.js';
import type { ChildSessionArgs } from '../child-session.js';
import { FAST, Ledger, drainingJobs, childScript, countsOf, deferred, idKey, readRows, statusOf, waitFor, withDeadline, type TestEnv } from '../harness.js';
import type { ConformanceOptions } from '../options.js';
import { checkTableARun, expectedAttempts, readLedgerFile, startTableARun, superviseChildWorkers, tally, writeSlowFixtureHandler } from '../supervised-run.js';
import { createJobs, createTableA, enqueueJobs } from '../tables.js';

/** Logs every run; with STATUSQ_HANG=1 it announces the job on stdout and never finishes it. */
function writeHangingHandler(dir: string): string {
  const path = join(dir, 'hang.mjs');
  writeFileSync(
    path,
    [
      "import { appendFileSync } from 'node:fs';",
      'export default async function handle(job) {',
      '  appendFileSync(process.env.STATUSQ_LEDGER, `${job.id} ${job.attempt} ${process.pid}\\n`);',
      "  if (process.env.STATUSQ_HANG === '1') {",
      '    process.stdout.write(`hanging ${job.id}\\n`);',
      '    await new Promise(() => {});',
      '  }',
      '  return { ok: true };',
      '}',
      '',
    ].join('\n'),
  );
  return path;
}

/** A child worker process of 4 slots on `table_a`, running `handlerPath` with the suite's fast timings and `worker` over them. */
function tableAChild(env: () => TestEnv, handlerPath: string, worker: ChildWorkerArgs['worker']): ChildWorkerArgs {
  return { adapterModule: env().adapterModulePath, url: env().url, table: { table: 'table_a' }, handlerPath, concurrency: 4, worker: { ...FAST, ...worker } };
}

export function processCases(env: () => TestEnv, options: ConformanceOptions): void {
  const scale = options.scale ?? 1;

  async function runChildren(
    count: number,
    table: TableConfig,
    worker: ChildWorkerArgs['worker'],
    ledgerPath: string,
    handler = handlerPath('table-a.mjs'),
  ): Promise<ChildWorkerResult[]> {
    const children = Array.from({ length: count }, (_, i) =>
      env().spawnChild(
        childScript('child-worker.js'),
        { adapterModule: env().adapterModulePath, url: env().url, table, handlerPath: handler, concurrency: 4, worker } satisfies ChildWorkerArgs,
        { STATUSQ_LEDGER: ledgerPath },
        `child worker ${i + 1}`,
      ),
    );
    return Promise.all(children.map((c) => c.result<ChildWorkerResult>(120_000)));
  }

  /**
   * Starts a worker process whose handler never returns, waits until it holds 4 claims (the ids it printed
   * as `hanging <id>`), and SIGKILLs it: a crash with claims in hand.
   */
  async function killWhileHolding(args: ChildWorkerArgs, ledgerPath: string) {
    const doomed = env().spawnChild(childScript('child-worker.js'), args, { STATUSQ_LEDGER: ledgerPath, STATUSQ_HANG: '1' }, 'doomed child');
    const hanging = new Set<string>();
    await doomed.line(
      (line) => {
        if (line.startsWith('hanging ')) hanging.add(line.slice('hanging '.length));
        return hanging.size === 4;
      },
      'the doomed child to hold 4 claims',
    );
    process.kill(doomed.pid, 'SIGKILL');
    const exit = await withDeadline(doomed.exited, 10_000, 'the doomed child to die');
    return { hanging, exit };
  }

  function checkTableA(
    rows: readonly TableARow[],
    dbRows: readonly Row[],
    ledger: Map<string, { attempts: number[]; pids: number[] }>,
    retries: boolean,
    maxAttempts: number,
  ): string[] {
    const problems: string[] = [];
    const codes = { done: 1, abuse: 2, failed: 0 } as const;
    const byId = new Map(dbRows.map((r) => [idKey(r.id), r]));
    for (const row of rows) {
      const db = byId.get(String(row.id));
      const ran = ledger.get(String(row.id))?.attempts ?? [];
      const want = expectedAttempts(row.kind, retries, maxAttempts);
      if (JSON.stringify(ran) !== JSON.stringify(want)) problems.push(`${row.kind} row ${row.id} ran attempts ${JSON.stringify(ran)}, expected ${JSON.stringify(want)}`);
      const status = statusOf(db);
      const expected = codes[expectedStatus(row.kind, retries)];
      if (status !== expected) problems.push(`${row.kind} row ${row.id} ended with status ${status}, expected ${expected}`);
      if (retries && db) {
        const attempts = Number(db.attempt_count);
        const wantCount = row.kind === 'poison' ? maxAttempts : row.kind === 'flaky' ? 1 : 0;
        if (attempts !== wantCount) problems.push(`${row.kind} row ${row.id} has attempt_count ${attempts}, expected ${wantCount}`);
        if (row.kind === 'poison' && !/unreachable host/.test(String(db.last_error))) problems.push(`poison row ${row.id} last_error ${String(db.last_error)}`);
      }
    }
    if (ledger.size !== rows.length) problems.push(`ledger holds ${ledger.size} rows, table ${rows.length}`);
    return problems.slice(0, 20);
  }

  describe('several OS processes on one database', () => {
    for (const strategy of ['native', 'conditional-update'] as const) {
      const big = Math.max(400, Math.round((strategy === 'native' ? 4000 : 2000) * scale));
      it(`${strategy}: 4 worker processes over ${big} table_a rows with leases and retries: each row runs exactly its expected attempts`, async () => {
        const setup = await env().store('setup store');
        const rows = generateTableARows(big, { poisonEvery: 50, abuseEvery: 40, flakyEvery: 30 });
        const groups: ColumnGroup[] = ['leases', 'retries'];
        await createTableA(env().fixtures, setup, rows, { migrate: groups });
        const ledgerPath = join(env().tempDir(), 'ledger.txt');
        const maxAttempts = 3;
        const results = await runChildren(4, { table: 'table_a' }, { claimStrategy: strategy, maxAttempts, retryDelayMs: 20, maxRetryDelayMs: 100, leaseMs: 60_000, ...FAST }, ledgerPath);

        const ledger = readLedgerFile(ledgerPath);
        expect(checkTableA(rows, await readRows(setup, 'table_a'), ledger, true, maxAttempts)).toEqual([]);
        const t = tally(rows);
        expect(await countsOf(setup, 'table_a')).toEqual({ pending: 0, processing: 0, done: t.ok + t.flaky, abuse: t.abuse, failed: t.poison, other: 0 });
        const sum = (key: string) => results.reduce((n, r) => n + (r.counters[key] ?? 0), 0);
        expect(sum('completed')).toBe(t.ok + t.flaky);
        expect(sum('abused')).toBe(t.abuse);
        expect(sum('failed')).toBe(t.poison);
        expect(sum('retried')).toBe(t.poison * (maxAttempts - 1) + t.flaky);
        expect(sum('claimed')).toBe([...ledger.values()].reduce((n, e) => n + e.attempts.length, 0));
        expect(sum('claimLost')).toBe(0);
        if (strategy === 'native' && setup.capabilities.skipLocked) expect(sum('candidatesLost')).toBe(0);
        if (strategy === 'conditional-update') console.info(`[${options.name}] conditional-update across processes: ${sum('candidatesLost')} candidates lost for ${big} rows`);
        // Each child did some of the work.
        const pids = new Set([...ledger.values()].flatMap((e) => e.pids));
        expect(pids.size).toBeGreaterThan(1);
        for (const r of results) expect(r.errors['settle'] ?? 0).toBe(0);
        await env().closeStores();
      });
    }

    const small = Math.max(200, Math.round(1000 * scale));
    it(`2 worker processes over ${small} rows of the seed's status-only table_a: every row runs once, failures are final`, async () => {
      const setup = await env().store('setup store');
      const rows = generateTableARows(small, { poisonEvery: 50, abuseEvery: 40, flakyEvery: 30 });
      await createTableA(env().fixtures, setup, rows);
      const ledgerPath = join(env().tempDir(), 'ledger.txt');
      const results = await runChildren(2, { table: 'table_a' }, { ...FAST }, ledgerPath);
      const ledger = readLedgerFile(ledgerPath);
      expect(checkTableA(rows, await readRows(setup, 'table_a'), ledger, false, 1)).toEqual([]);
      const t = tally(rows);
      expect(await countsOf(setup, 'table_a')).toEqual({ pending: 0, processing: 0, done: t.ok, abuse: t.abuse, failed: t.poison + t.flaky, other: 0 });
      expect(results.reduce((n, r) => n + (r.counters.completed ?? 0), 0)).toBe(t.ok);
      await env().closeStores();
    });

    it('chaos: worker processes under the Supervisor are SIGKILLed at random moments; every row ends right, re-runs only after a kill', async () => {
      const setup = await env().store('setup store');
      const run = await startTableARun(env(), setup, env().url, Math.max(600, Math.round(2400 * scale)), 3000);

      // A fixed seed: the kill moments vary with the machine's speed, never with chance.
      let seed = 7;
      const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
      const killed = new Set<number>();
      await waitFor('the first rows to be done', async () => run.ended() || (await countsOf(setup, 'table_a')).done >= 50, { timeoutMs: 60_000 });
      while (!run.ended() && killed.size < 4) {
        // A victim that has been up a while is working, not still connecting.
        const live = run.supervisor.pids.filter((pid) => Date.now() - (run.startedAt.get(pid) ?? 0) > 500);
        if (live.length > 0) {
          const victim = live[Math.floor(random() * live.length)]!;
          process.kill(victim, 'SIGKILL');
          killed.add(victim);
        }
        await Promise.race([run.finished, new Promise((resolve) => setTimeout(resolve, 150 + random() * 300))]);
      }
      expect(await withDeadline(run.finished, 120_000, 'the supervised workers to empty the queue')).toBe(0);
      expect(killed.size).toBeGreaterThanOrEqual(2);

      const { problems, reruns, unconfirmed } = await checkTableARun(run, setup);
      const exits = run.exits.map((e) => `${e.pid}:${e.signal ?? e.code}`).join(' ');
      expect(problems, `exits ${exits}; killed ${[...killed].join(' ')}`).toEqual([]);
      // Nothing but the kills disturbed this run: every run whose outcome never landed was in a killed process.
      expect(unconfirmed.filter((u) => !killed.has(u.pid))).toEqual([]);
      const ledger = readLedgerFile(run.ledgerPath);
      const killedRuns = [...ledger.values()].reduce((n, e) => n + e.pids.filter((pid) => killed.has(pid)).length, 0);
      console.info(`[${options.name}] chaos: ${run.rows.length} rows, ${killed.size} processes killed (they had run ${killedRuns} jobs), ${reruns} re-runs, 0 lost`);
      await env().closeStores();
    });

    it('graceful drain: SIGTERM to the Supervisor mid-run lets running jobs finish; nothing is left processing and it exits 0', async () => {
      const setup = await env().store('setup store');
      const rows = generateTableARows(Math.max(600, Math.round(2400 * scale)), { poisonEvery: 50, abuseEvery: 40, flakyEvery: 30 });
      await createTableA(env().fixtures, setup, rows, { migrate: ['leases', 'retries'] });
      const dir = env().tempDir();
      const ledgerPath = join(dir, 'ledger.txt');
      const args = tableAChild(env, writeSlowFixtureHandler(dir), { maxAttempts: 3, retryDelayMs: 20, maxRetryDelayMs: 100, leaseMs: 60_000, exitWhenEmpty: false });
      const supervisor = superviseChildWorkers(env(), args, ledgerPath, { processes: 2, gracePeriodMs: 30_000 });
      const finished = supervisor.run();
      await waitFor('the first rows to be done', async () => (await countsOf(setup, 'table_a')).done >= 100, { timeoutMs: 60_000 });
      supervisor.stop('SIGTERM');
      expect(await withDeadline(finished, 60_000, 'the supervised workers to drain')).toBe(0);

      const counts = await countsOf(setup, 'table_a');
      expect(counts.processing).toBe(0);
      expect(counts.pending).toBeGreaterThan(0);
      expect(counts.pending + counts.done + counts.abuse + counts.failed).toBe(rows.length);
      // Nothing was killed, so nothing ran twice: every run so far was one attempt of its row, once.
      const ledger = readLedgerFile(ledgerPath);
      const repeated = [...ledger].filter(([, e]) => new Set(e.attempts).size !== e.attempts.length).map(([id]) => id);
      expect(repeated).toEqual([]);
      const unsettled = (await readRows(setup, 'table_a')).filter((r) => statusOf(r) === null && ledger.has(idKey(r.id)) && Number(r.attempt_count) === 0);
      // A row that ran and is pending again must be waiting for a scheduled retry, never abandoned mid-run.
      expect(unsettled.map((r) => idKey(r.id))).toEqual([]);
      await env().closeStores();
    });

    it("status-only table: a killed process's claims stay processing; counts show them, requeue returns them, a second run finishes every row", async () => {
      const setup = await env().store('setup store');
      const rows = generateTableARows(200, { poisonEvery: 0, abuseEvery: 0 });
      await createTableA(env().fixtures, setup, rows);
      const dir = env().tempDir();
      const ledgerPath = join(dir, 'ledger.txt');
      const args = tableAChild(env, writeHangingHandler(dir), {});
      const { hanging } = await killWhileHolding(args, ledgerPath);

      // Without leases nothing can tell a dead worker's row from a live one: a survivor finishes the rest and
      // exits (it does not wait for rows in processing), and those four stay where the crash left them.
      await env().spawnChild(childScript('child-worker.js'), args, { STATUSQ_LEDGER: ledgerPath }, 'survivor').result<ChildWorkerResult>(60_000);
      expect(await countsOf(setup, 'table_a')).toEqual({ pending: 0, processing: 4, done: rows.length - 4, abuse: 0, failed: 0, other: 0 });

      const queue = await Queue.open(setup, { table: 'table_a' });
      // Every worker is stopped, so the rows still in processing are the killed one's: force.
      expect(await queue.requeue('processing', undefined, { force: true })).toBe(4);
      await env().spawnChild(childScript('child-worker.js'), args, { STATUSQ_LEDGER: ledgerPath }, 'second run').result<ChildWorkerResult>(60_000);
      expect(await countsOf(setup, 'table_a')).toEqual({ pending: 0, processing: 0, done: rows.length, abuse: 0, failed: 0, other: 0 });
      const ledger = readLedgerFile(ledgerPath);
      const problems = rows.filter((r) => (ledger.get(String(r.id))?.attempts.length ?? 0) !== (hanging.has(String(r.id)) ? 2 : 1)).map((r) => r.id);
      expect(problems).toEqual([]);
      await env().closeStores();
    });

    it('a worker process killed with SIGKILL while holding claims: another process reaps them after the lease and finishes every row', async () => {
      const setup = await env().store('setup store');
      const rows = generateTableARows(200, { poisonEvery: 0, abuseEvery: 0 });
      await createTableA(env().fixtures, setup, rows, { migrate: ['leases', 'retries'] });
      const dir = env().tempDir();
      const ledgerPath = join(dir, 'ledger.txt');
      const hangingHandler = writeHangingHandler(dir);
      const args = (lease: number) => tableAChild(env, hangingHandler, { leaseMs: lease, reapIntervalMs: 50, maxAttempts: 3 });
      const { hanging, exit } = await killWhileHolding(args(60_000), ledgerPath);
      expect(exit.signal).toBe('SIGKILL');
      expect((await countsOf(setup, 'table_a')).processing).toBe(4);

      const survivor = env().spawnChild(childScript('child-worker.js'), args(300), { STATUSQ_LEDGER: ledgerPath }, 'survivor child');
      const result = await survivor.result<ChildWorkerResult>(60_000);
      const ledger = readLedgerFile(ledgerPath);
      const problems: string[] = [];
      for (const row of rows) {
        const ran = ledger.get(String(row.id));
        const want = hanging.has(String(row.id)) ? [1, 2] : [1];
        if (JSON.stringify(ran?.attempts) !== JSON.stringify(want)) problems.push(`row ${row.id} ran ${JSON.stringify(ran?.attempts)}, expected ${JSON.stringify(want)}`);
      }
      expect(problems.slice(0, 10)).toEqual([]);
      expect(await countsOf(setup, 'table_a')).toEqual({ pending: 0, processing: 0, done: rows.length, abuse: 0, failed: 0, other: 0 });
      expect(result.counters.completed).toBe(rows.length);
      const reaped = (await readRows(setup, 'table_a')).filter((r) => hanging.has(idKey(r.id)));
      expect(reaped.map((r) => Number(r.attempt_count))).toEqual([1, 1, 1, 1]);
      expect(reaped.every((r) => /lease expired/.test(String(r.last_error)))).toBe(true);
      await env().closeStores();
    });

    it('[needs writeLock] a claim that meets another process holding the write lock rejects with StoreError Busy; the worker retries and loses no job', async (ctx) => {
      const writeLock = env().options.writeLock;
      if (!writeLock) return skipFor(ctx, 'writeLock');
      const setup = await env().store('setup store');
      const queue = await createJobs(setup);
      const ids = await enqueueJobs(queue, Array.from({ length: 20 }, (_, n) => ({ n })));
      const impatient = (await env().impatientStore())!;
      const impatientQueue = await Queue.open(impatient, { table: 'jobs' });

      const holder = env().spawnChild(
        childScript('child-session.js'),
        { adapterModule: env().adapterModulePath, url: env().url, before: writeLock.take, after: writeLock.release } satisfies ChildSessionArgs,
        {},
        'lock holder',
      );
      await holder.line((l) => l === 'ready', 'the lock holder to take the write lock');

      const error = await impatientQueue.claim({ limit: 1, token: 'x' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(StoreError);
      expect((error as StoreError).kind).toBe('Busy');
      expect(String((error as StoreError).nativeCode)).toMatch(writeLock.nativeCode);
      expect((error as StoreError).retryable).toBe(true);
      const settle = await impatientQueue.apply([impatientQueue.sql.release(ids[0]!, null)]).then(
        () => null,
        (e: unknown) => e,
      );
      expect((settle as StoreError).kind).toBe('Busy');
      expect((await countsOf(setup, 'jobs')).pending).toBe(20);

      const ledger = new Ledger();
      const busySeen = deferred();
      const w = await env().startWorker(
        drainingJobs(impatient, ledger),
        'impatient worker',
        (worker) =>
          worker.on('error', ({ error: e }) => {
            if (e instanceof StoreError && e.kind === 'Busy') busySeen.resolve();
          }),
      );
      await withDeadline(busySeen.promise, 10_000, 'the worker to meet the lock');
      expect(ledger.order).toHaveLength(0);
      holder.send('go');
      await holder.line((l) => l === 'done', 'the lock holder to commit');
      expect((await withDeadline(holder.exited, 10_000, 'the lock holder to exit')).code).toBe(0);

      const counters = await withDeadline(w.done, 30_000, 'the worker to drain the queue');
      expect(ledger.notExactlyOnce(ids)).toEqual([]);
      expect(counters.completed).toBe(20);
      expect(await countsOf(setup, 'jobs')).toEqual({ pending: 0, processing: 0, done: 20, abuse: 0, failed: 0, other: 0 });
      expect(w.errors.length).toBeGreaterThan(0);
      const notBusy = w.errors.filter((e) => !(e.error instanceof StoreError && e.error.kind === 'Busy'));
      expect(notBusy).toEqual([]);
      await env().closeStores();
    });
  });
}
