/**
 * Supervised runs over table_a, shared by the cases that disturb worker processes (chaos: SIGKILL) and the
 * database under them (outages: a restart, every connection dropped): child-worker.js processes under the
 * core Supervisor, a handler ledger of every execution, a worker log of every settle the workers confirmed,
 * and the one end-state check they must all pass.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Supervisor, type Store, type SupervisorEvent, type SupervisorOptions } from '@statusq/core';
import { generateTableARows, handlerPath, type RowKind, type TableARow } from '@statusq/test-fixtures';
import type { ChildWorkerArgs, ChildWorkerResult } from './child-worker.js';
import { FAST, childScript, countsOf, type TestEnv } from './harness.js';
import { createTableA } from './tables.js';

/** Per row id, the attempts that ran (in ledger order) and the pids that ran them. */
export function readLedgerFile(path: string): Map<string, { attempts: number[]; pids: number[] }> {
  const byId = new Map<string, { attempts: number[]; pids: number[] }>();
  for (const line of readLines(path)) {
    const [id, attempt, pid] = line.split(' ');
    const entry = byId.get(id!) ?? { attempts: [], pids: [] };
    entry.attempts.push(Number(attempt));
    entry.pids.push(Number(pid));
    byId.set(id!, entry);
  }
  return byId;
}

/** Handler executions logged so far. */
export function countLedgerLines(path: string): number {
  return readLines(path).length;
}

export type SettleOutcome = 'completed' | 'retried' | 'failed' | 'abused' | 'claim-lost';

/** A worker log (STATUSQ_WORKER_LOG, see child-worker.ts): per row id the settles its workers saw, and each child's result. */
export function readWorkerLog(path: string): { settles: Map<string, Array<{ attempt: number; outcome: SettleOutcome; pid: number }>>; results: ChildWorkerResult[] } {
  const settles = new Map<string, Array<{ attempt: number; outcome: SettleOutcome; pid: number }>>();
  const results: ChildWorkerResult[] = [];
  for (const line of readLines(path)) {
    if (line.startsWith('{')) {
      results.push(JSON.parse(line) as ChildWorkerResult);
      continue;
    }
    const [id, attempt, outcome, pid] = line.split(' ');
    const list = settles.get(id!) ?? [];
    list.push({ attempt: Number(attempt), outcome: outcome as SettleOutcome, pid: Number(pid) });
    settles.set(id!, list);
  }
  return { settles, results };
}

function readLines(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  // A line still being appended (no newline yet) is left for the next read.
  return text.split('\n').slice(0, -1).map((l) => l.trim()).filter((l) => l !== '');
}

/**
 * The fixture's behaviour (it writes the ledger line first), then 10 ms of work, so that kills, signals and
 * outages land while logged jobs are still running.
 */
export function writeSlowFixtureHandler(dir: string): string {
  const path = join(dir, 'slow-table-a.mjs');
  writeFileSync(
    path,
    [
      `import fixture from ${JSON.stringify(pathToFileURL(handlerPath('table-a.mjs')).href)};`,
      'export default async function handle(job, ctx) {',
      '  try {',
      '    return await fixture(job, ctx);',
      '  } finally {',
      '    await new Promise((resolve) => setTimeout(resolve, 10));',
      '  }',
      '}',
      '',
    ].join('\n'),
  );
  return path;
}

/** The attempts a fixture row of this kind runs, in order. */
export function expectedAttempts(kind: RowKind, retries: boolean, maxAttempts: number): number[] {
  if (!retries) return [1];
  if (kind === 'poison') return Array.from({ length: maxAttempts }, (_, i) => i + 1);
  if (kind === 'flaky') return [1, 2];
  return [1];
}

export function tally(rows: readonly TableARow[]): Record<RowKind, number> {
  const t: Record<RowKind, number> = { ok: 0, poison: 0, abuse: 0, flaky: 0 };
  for (const r of rows) t[r.kind]++;
  return t;
}

/** child-worker.js processes under a Supervisor, logging to `ledgerPath`; killed after the test whatever happened. */
export function superviseChildWorkers(
  env: TestEnv,
  args: ChildWorkerArgs,
  ledgerPath: string,
  options: Omit<SupervisorOptions, 'modulePath' | 'args'>,
  onEvent?: (event: SupervisorEvent) => void,
  childEnv: Record<string, string> = {},
): Supervisor {
  const supervisor = new Supervisor(
    {
      modulePath: childScript('child-worker.js'),
      args: [JSON.stringify(args)],
      env: { ...process.env, ...childEnv, STATUSQ_LEDGER: ledgerPath },
      staggerMs: 50,
      stdio: 'pipe',
      ...options,
    },
    onEvent,
  );
  env.cleanups.push(() => {
    supervisor.stop();
    supervisor.stop();
  });
  return supervisor;
}

export const MAX_ATTEMPTS = 3;

/** A table_a run by three supervised worker processes, with leases and retries; see startTableARun. */
export interface TableARun {
  rows: TableARow[];
  supervisor: Supervisor;
  /** The Supervisor's exit code, once every child has exited. */
  finished: Promise<number>;
  ended(): boolean;
  /** Every child exit, in order. */
  exits: Array<{ pid: number; code: number | null; signal: NodeJS.Signals | null }>;
  /** When each child (by pid) was started. */
  startedAt: Map<number, number>;
  ledgerPath: string;
  workerLogPath: string;
}

/**
 * Fills table_a with `count` rows of every kind (poison, abuse, flaky, ok) through `setup` and starts three
 * supervised child workers on `url` (4 slots each, 10 ms jobs, leases of `leaseMs` with heartbeats, fast
 * retries). A child that dies is restarted after 100-400 ms.
 */
export async function startTableARun(
  env: TestEnv,
  setup: Store,
  url: string,
  count: number,
  leaseMs: number,
  options: { beside?: boolean; handler?: 'slow' | 'effects' } = {},
): Promise<TableARun> {
  const rows = generateTableARows(count, { poisonEvery: 50, abuseEvery: 40, flakyEvery: 30 });
  // `beside`: the claim state in a claims table (migrate --beside) instead of the table's own columns.
  await createTableA(env.fixtures, setup, rows, options.beside ? { beside: true } : { migrate: ['leases', 'retries'] });
  const dir = env.tempDir();
  const ledgerPath = join(dir, 'ledger.txt');
  const workerLogPath = join(dir, 'workers.txt');
  const args: ChildWorkerArgs = {
    adapterModule: env.adapterModulePath,
    url,
    table: { table: 'table_a' },
    // `effects`: each successful run writes its effect in ctx.transaction (the caller creates the effects table).
    handlerPath: options.handler === 'effects' ? handlerPath('table-a-effects.mjs') : writeSlowFixtureHandler(dir),
    concurrency: 4,
    worker: { maxAttempts: MAX_ATTEMPTS, retryDelayMs: 20, maxRetryDelayMs: 100, leaseMs, heartbeatMs: 200, reapIntervalMs: 50, ...FAST },
  };
  const exits: TableARun['exits'] = [];
  const startedAt = new Map<number, number>();
  // Disturbances land on children of any age here, so none of them counts as a start-up crash loop.
  const supervisor = superviseChildWorkers(
    env,
    args,
    ledgerPath,
    { processes: 3, restartBaseMs: 100, restartMaxMs: 400, minUptimeMs: 0, gracePeriodMs: 10_000 },
    (event) => {
      if (event.type === 'exited') exits.push({ pid: event.pid, code: event.code, signal: event.signal });
      if (event.type === 'started') startedAt.set(event.pid, Date.now());
    },
    { STATUSQ_WORKER_LOG: workerLogPath },
  );
  const finished = supervisor.run();
  let ended = false;
  void finished.then(() => (ended = true));
  return { rows, supervisor, finished, ended: () => ended, exits, startedAt, ledgerPath, workerLogPath };
}

/**
 * The end state a finished run must reach however it was disturbed: every row in its kind's terminal status
 * (nothing pending, nothing left in processing); no attempt of a row ran twice; no row settled twice; and a
 * row ran again only after a run whose settle its worker never confirmed (the worker was killed or cut off
 * from the database, or its lease was taken over), which is the re-run a lease exists to make. Returns the
 * problems (empty when all is well), how many runs were re-runs, and the runs no worker confirmed.
 */
export async function checkTableARun(
  run: TableARun,
  store: Store,
): Promise<{ problems: string[]; reruns: number; unconfirmed: Array<{ id: string; attempt: number; pid: number }> }> {
  const problems: string[] = [];
  const t = tally(run.rows);
  const counts = await countsOf(store, 'table_a');
  const want = { pending: 0, processing: 0, done: t.ok + t.flaky, abuse: t.abuse, failed: t.poison, other: 0 };
  if (JSON.stringify(counts) !== JSON.stringify(want)) problems.push(`status counts ${JSON.stringify(counts)}, expected ${JSON.stringify(want)}`);
  const ledger = readLedgerFile(run.ledgerPath);
  const { settles } = readWorkerLog(run.workerLogPath);
  let reruns = 0;
  const unconfirmed: Array<{ id: string; attempt: number; pid: number }> = [];
  for (const row of run.rows) {
    const id = String(row.id);
    const ran = ledger.get(id);
    if (!ran) {
      problems.push(`${row.kind} row ${id} never ran`);
      continue;
    }
    if (new Set(ran.attempts).size !== ran.attempts.length) problems.push(`${row.kind} row ${id} ran an attempt twice: ${JSON.stringify(ran.attempts)}`);
    const confirmed = (settles.get(id) ?? []).filter((s) => s.outcome !== 'claim-lost');
    const byAttempt = new Map<number, SettleOutcome>();
    for (const s of confirmed) {
      if (byAttempt.has(s.attempt)) problems.push(`${row.kind} row ${id} attempt ${s.attempt} settled twice: ${byAttempt.get(s.attempt)} and ${s.outcome}`);
      byAttempt.set(s.attempt, s.outcome);
    }
    const terminal = confirmed.filter((s) => s.outcome !== 'retried');
    if (terminal.length > 1) problems.push(`${row.kind} row ${id} settled ${terminal.length} times: ${terminal.map((s) => s.outcome).join(', ')}`);
    const attempts = [...ran.attempts].sort((a, b) => a - b);
    for (let i = 1; i < attempts.length; i++) {
      const before = byAttempt.get(attempts[i - 1]!);
      if (before !== undefined && before !== 'retried') problems.push(`${row.kind} row ${id} ran attempt ${attempts[i]} after attempt ${attempts[i - 1]} was settled ${before}`);
    }
    ran.attempts.forEach((attempt, i) => {
      if (!byAttempt.has(attempt)) unconfirmed.push({ id, attempt, pid: ran.pids[i]! });
    });
    reruns += Math.max(0, attempts.length - expectedAttempts(row.kind, true, MAX_ATTEMPTS).length);
  }
  return { problems: problems.slice(0, 20), reruns, unconfirmed };
}
