/**
 * statusq's side of each scenario: workers in this process (each with its own store, so its own
 * connections) or in child processes (burn-child.ts), over a table the caller filled.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Worker, emptyWorkerCounters, sleep, type ClaimStrategy, type Handler, type Store, type WorkerCounters } from '@statusq/core';
import { measureCpu, type CpuShare } from './cpu.js';
import type { BenchDatabase, Dialect } from './databases.js';
import type { BurnDownResult, PickupResult } from './peer-contract.js';

export interface StatusqRunOptions {
  table: string;
  workers: number;
  concurrency: number;
  strategy: ClaimStrategy;
  handlerDelayMs: number;
  timeoutMs: number;
}

export interface StatusqBurnDownResult extends BurnDownResult {
  counters: WorkerCounters;
  cpu: CpuShare;
  errors: Record<string, number>;
  /** Deadlocks the MySQL store met and re-ran (0 elsewhere). */
  deadlocks: number;
}

/** The messages a burn child and its parent exchange. */
export type ChildMessage = { type: 'ready' } | { type: 'done'; counters: WorkerCounters; deadlocks: number; handled: number; errors: Record<string, number>; cpuSeconds: number; error?: string };
export interface ChildConfig extends StatusqRunOptions {
  dialect: Dialect;
  url: string;
}

export function handlerFor(delayMs: number): Handler {
  return delayMs > 0 ? () => sleep(delayMs) : () => undefined;
}

/** The store's own deadlock and lock-wait-timeout counters, where it keeps them (MySQL). */
export function deadlocksOf(store: Store): number {
  const stats = (store as { stats?: { deadlocks?: unknown; lockWaitTimeouts?: unknown } }).stats;
  return (typeof stats?.deadlocks === 'number' ? stats.deadlocks : 0) + (typeof stats?.lockWaitTimeouts === 'number' ? stats.lockWaitTimeouts : 0);
}

/** Errors the workers survived (retried claims and settles), by where they happened: a run should have none. */
export function countErrors(worker: Worker, errors: Record<string, number>): void {
  worker.on('error', ({ error, during }) => {
    const key = `${during.replace(/ of job .*/, '')}: ${error instanceof Error ? error.message.slice(0, 80) : String(error)}`;
    errors[key] = (errors[key] ?? 0) + 1;
  });
}

export function sumCounters(all: readonly WorkerCounters[]): WorkerCounters {
  const total = emptyWorkerCounters();
  for (const counters of all) for (const key of Object.keys(total) as Array<keyof WorkerCounters>) total[key] += counters[key];
  return total;
}

export async function createBenchWorker(store: Store, options: StatusqRunOptions, exitWhenEmpty: boolean, errors: Record<string, number>): Promise<Worker> {
  const worker = await Worker.create({
    store,
    table: { table: options.table },
    handler: handlerFor(options.handlerDelayMs),
    concurrency: options.concurrency,
    strategy: options.strategy,
    exitWhenEmpty,
  });
  countErrors(worker, errors);
  return worker;
}

/** Stops every worker when `timeoutMs` passes first; true when it did. */
async function runBounded(workers: readonly Worker[], timeoutMs: number): Promise<boolean> {
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    for (const worker of workers) void worker.stop(1_000);
  }, timeoutMs);
  try {
    await Promise.all(workers.map((w) => w.run()));
  } finally {
    clearTimeout(timer);
  }
  return timedOut;
}

/** W workers in this process drain the table; the clock runs from their start to the last one's exit. */
export async function burnDownInProcess(db: BenchDatabase, options: StatusqRunOptions): Promise<StatusqBurnDownResult> {
  const stores: Store[] = [];
  const errors: Record<string, number> = {};
  try {
    const workers: Worker[] = [];
    for (let i = 0; i < options.workers; i++) {
      const store = await db.connect();
      stores.push(store);
      workers.push(await createBenchWorker(store, options, true, errors));
    }
    const cpu = measureCpu(db.dialect);
    const started = performance.now();
    const timedOut = await runBounded(workers, options.timeoutMs);
    const seconds = (performance.now() - started) / 1000;
    const counters = sumCounters(workers.map((w) => w.counters));
    return { handled: counters.completed, seconds, timedOut, counters, cpu: cpu(), errors, deadlocks: stores.reduce((n, s) => n + deadlocksOf(s), 0) };
  } finally {
    await Promise.all(stores.map((s) => s.close()));
  }
}

const CHILD_SCRIPT = fileURLToPath(new URL('./burn-child.js', import.meta.url));

/**
 * P child processes, each with `workers / P` workers of its own. The clock starts when every child has
 * connected and resolved the table (process start-up is not the queue's cost) and stops when the last exits.
 */
export async function burnDownInProcesses(db: BenchDatabase, options: StatusqRunOptions, processes: number): Promise<StatusqBurnDownResult> {
  const perChild = Math.max(1, Math.round(options.workers / processes));
  const config: ChildConfig = { ...options, workers: perChild, dialect: db.dialect, url: db.url };
  const children: ChildProcess[] = [];
  const results: Array<Extract<ChildMessage, { type: 'done' }>> = [];
  try {
    const ready: Array<Promise<void>> = [];
    const done: Array<Promise<void>> = [];
    for (let i = 0; i < processes; i++) {
      const child = fork(CHILD_SCRIPT, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      children.push(child);
      ready.push(onMessage(child, 'ready'));
      done.push(onMessage(child, 'done'));
      child.on('message', (message: ChildMessage) => {
        if (message.type === 'done') results.push(message);
      });
    }
    await Promise.all(ready);
    const cpu = measureCpu(db.dialect);
    const started = performance.now();
    for (const child of children) child.send('go');
    await Promise.all(done);
    const seconds = (performance.now() - started) / 1000;
    // Read before the children exit: a server's per-connection processes (PostgreSQL) take their CPU time with them.
    const share = cpu(results.reduce((n, r) => n + r.cpuSeconds, 0));
    for (const child of children) if (child.connected) child.send('close');
    await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(null)))));
    const failure = results.find((r) => r.error);
    if (failure) throw new Error(`a bench child failed: ${failure.error}`);
    const counters = sumCounters(results.map((r) => r.counters));
    const errors: Record<string, number> = {};
    for (const r of results) for (const [key, n] of Object.entries(r.errors)) errors[key] = (errors[key] ?? 0) + n;
    return { handled: counters.completed, seconds, timedOut: seconds * 1000 > options.timeoutMs, counters, cpu: share, errors, deadlocks: results.reduce((n, r) => n + r.deadlocks, 0) };
  } finally {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

/** Resolves on the child's first message of `type`; rejects if it exits before sending one. */
function onMessage(child: ChildProcess, type: ChildMessage['type']): Promise<void> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`bench child exited with ${code} before "${type}"`));
    child.once('exit', onExit);
    child.on('message', (message: ChildMessage) => {
      if (message.type !== type) return;
      child.off('exit', onExit);
      resolve();
    });
  });
}

/**
 * One idle worker; a row is inserted every `intervalMs`. Latency runs from just before the INSERT to the
 * handler's start. The worker idles first so a LISTEN connection (PostgreSQL) is in place, as it would be.
 */
export async function pickupLatency(
  db: BenchDatabase,
  table: string,
  options: { rows: number; intervalMs: number; timeoutMs: number; listen: boolean; strategy: ClaimStrategy },
): Promise<PickupResult> {
  const workerStore = await db.connect({ listen: options.listen });
  const inserter = await db.connect();
  const insertedAt: number[] = [];
  const latencies: number[] = new Array<number>(options.rows).fill(Number.NaN);
  let seen = 0;
  let allSeen!: () => void;
  const finished = new Promise<void>((resolve) => (allSeen = resolve));
  const worker = await Worker.create({
    store: workerStore,
    table: { table },
    concurrency: 16,
    strategy: options.strategy,
    handler: (job) => {
      const seq = Number(job.payload);
      latencies[seq] = performance.now() - insertedAt[seq]!;
      if (++seen === options.rows) allSeen();
    },
  });
  const running = worker.run();
  try {
    const q = inserter.dialect.quoteIdentifier(table);
    const placeholder = inserter.dialect.placeholder(1);
    // Deliberate: the worker must be idle (its empty first claims done, its LISTEN issued) before the first row.
    await sleep(500);
    const deadline = performance.now() + options.timeoutMs;
    for (let seq = 0; seq < options.rows && performance.now() < deadline; seq++) {
      insertedAt[seq] = performance.now();
      await inserter.execute({ sql: `INSERT INTO ${q} (payload) VALUES (${placeholder})`, params: [String(seq)] });
      await sleep(options.intervalMs);
    }
    await Promise.race([finished, sleep(Math.max(0, deadline - performance.now()))]);
    return { latenciesMs: latencies.filter((ms) => !Number.isNaN(ms)) };
  } finally {
    await worker.stop(1_000);
    await running;
    await Promise.all([workerStore.close(), inserter.close()]);
  }
}
