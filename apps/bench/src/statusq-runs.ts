/**
 * statusq's side of the burn-down scenarios: workers in this process (each with its own store, so its own
 * connections) or in child processes (burn-child.ts), over a table the caller filled. Pick-up runs are in
 * pickup-latency.ts.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Worker, type Handler, type Store, type WorkerCounters } from '@statusq/core';
import { OPTIONAL_COLUMNS, emptyWorkerCounters, type Broker, type ClaimStrategy, type OptionalColumn, sleep } from '@statusq/core/tools';
import { openBroker, type BrokerTarget } from './brokers.js';
import { exited, onMessage } from './child-processes.js';
import { measureCpu, type CpuShare } from './cpu.js';
import type { BenchDatabase, ConnectionOptions, Dialect } from './databases.js';
import { poolSize } from './limits.js';
import type { BurnDownResult } from './peer-contract.js';

export interface StatusqRunOptions {
  table: string;
  workers: number;
  concurrency: number;
  /** Rows per claim; default (the worker's too): the concurrency. */
  batch?: number;
  strategy: ClaimStrategy;
  handlerDelayMs: number;
  timeoutMs: number;
  /**
   * `status only`: every optional column of the managed table turned off (`columns: { claimedAt: false, ...}`)
   * and the claim reading only statusq's own columns (`select: []`: id, status, date), so statusq runs the
   * same protocol as the minimal raw loop (status written, the id read back), as it does over an application
   * table that has only a status column and a handler that reads nothing else. Default `all`: leases, tokens,
   * attempts, results, and every column of each claimed row.
   */
  columns?: BenchColumns;
  /**
   * Run in a process of its own (burnDownInProcesses): rows each process drains first, untimed, from a table of
   * their own with the same settings, so the timed run measures warm code as a long-running worker runs it.
   */
  warmUpJobs?: number;
  /** The workers' shared rate limit (`50/s`); default none. */
  rateLimit?: string;
  /** Take jobs from this broker queue's messages (`Worker` option `from`), each worker on a connection of its own; default: poll the table. */
  from?: BrokerTarget;
  /** Store options set on the database URL of the workers' stores (`claimGate: '0'`); default none. */
  urlParameters?: Record<string, string>;
  /** The URL the workers connect with instead of the database's own (through a TCP proxy); default: the database's. */
  url?: string;
  /** Handlers by kind for these kinds (each the same no-op handler), instead of one handler for every row. */
  kinds?: readonly string[];
  /** The workers' group concurrency (`--group-concurrency`); default none. */
  groupConcurrency?: number;
}

export type BenchColumns = 'all' | 'status only';

/** The managed table with no optional column in use. */
const STATUS_ONLY: Partial<Record<OptionalColumn, false>> = Object.fromEntries(OPTIONAL_COLUMNS.map((c) => [c, false]));

export interface StatusqBurnDownResult extends BurnDownResult {
  counters: WorkerCounters;
  cpu: CpuShare;
  errors: Record<string, number>;
  /** Deadlocks the MySQL store met and re-ran (0 elsewhere). */
  deadlocks: number;
}

/** The messages a burn child and its parent exchange. */
export type ChildMessage =
  | { type: 'ready' }
  | { type: 'done'; counters: WorkerCounters; deadlocks: number; errors: Record<string, number>; cpuSeconds: number; span: Span; timedOut: boolean; error?: string };
export interface ChildConfig extends StatusqRunOptions {
  dialect: Dialect;
  url: string;
  connections: ConnectionOptions;
  /** The table the warm-up drains first (warmUpJobs rows per process), when there is one. */
  warmUpTable?: string;
}

/** The untimed warm-up's own table beside `table`. */
export function warmUpTableOf(table: string): string {
  return `${table}_warm`;
}

function handlerFor(delayMs: number): Handler {
  return delayMs > 0 ? () => sleep(delayMs) : () => undefined;
}

/** The store's own deadlock and lock-wait-timeout counters, where it keeps them (MySQL). */
function deadlocksOf(store: Store): number {
  const stats = (store as { stats?: { deadlocks?: unknown; lockWaitTimeouts?: unknown } }).stats;
  return (typeof stats?.deadlocks === 'number' ? stats.deadlocks : 0) + (typeof stats?.lockWaitTimeouts === 'number' ? stats.lockWaitTimeouts : 0);
}

/** Errors the workers survived (retried claims and settles), by where they happened: a run should have none. */
function countErrors(worker: Worker, errors: Record<string, number>): void {
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

/**
 * When the run's first claim came back and its last settle was committed, on a clock shared by every process
 * (ms since the epoch). This is the span the peers are timed over too: first handler start to last job settled.
 */
export interface Span {
  first: number | null;
  last: number | null;
}

const epochNow = (): number => performance.timeOrigin + performance.now();

function trackSpan(worker: Worker, span: Span): void {
  worker.on('claimed', () => (span.first ??= epochNow()));
  for (const settled of ['completed', 'failed', 'abused', 'retried'] as const) worker.on(settled, () => (span.last = epochNow()));
}

function mergeSpans(spans: readonly Span[]): Span {
  const firsts = spans.map((s) => s.first).filter((t): t is number => t !== null);
  const lasts = spans.map((s) => s.last).filter((t): t is number => t !== null);
  return { first: firsts.length ? Math.min(...firsts) : null, last: lasts.length ? Math.max(...lasts) : null };
}

function spanSeconds(span: Span): number {
  return span.first === null || span.last === null ? Number.NaN : (span.last - span.first) / 1000;
}

/**
 * Each worker's connections: the same budget the peers get (see limits.ts). Burn-downs poll rather than LISTEN:
 * the clock stops at the last settle, so wake-ups at the empty tail would only cost a connection.
 */
function burnDownConnections(workers: number): ConnectionOptions {
  return { listen: false, connections: poolSize(4, workers, 1) };
}

async function createBenchWorker(store: Store, broker: Broker | null, options: StatusqRunOptions, errors: Record<string, number>, span: Span): Promise<Worker> {
  const worker = await Worker.create({
    ...(broker && { from: broker }),
    store,
    table: { table: options.table, ...(options.columns === 'status only' && { columns: STATUS_ONLY, select: [] }) },
    ...(options.kinds ? { handlers: Object.fromEntries(options.kinds.map((kind) => [kind, handlerFor(options.handlerDelayMs)])) } : { handler: handlerFor(options.handlerDelayMs) }),
    ...(options.groupConcurrency !== undefined && { groupConcurrency: options.groupConcurrency }),
    concurrency: options.concurrency,
    ...(options.batch !== undefined && { batch: options.batch }),
    claimStrategy: options.strategy,
    exitWhenEmpty: true,
    ...(options.rateLimit !== undefined && { rateLimit: options.rateLimit }),
  });
  countErrors(worker, errors);
  trackSpan(worker, span);
  return worker;
}

/**
 * Runs the workers until the queue is empty, stopping all of them when `timeoutMs` passes first (then true)
 * or when one fails (then that error, once the others have stopped: no store is closed under a running worker).
 */
async function runBounded(workers: readonly Worker[], timeoutMs: number): Promise<boolean> {
  let timedOut = false;
  // A worker whose run() failed rejects its stop() the same way; that error is reported once, below.
  const stopAll = () => Promise.all(workers.map((w) => w.stop(1_000).catch(() => undefined)));
  const timer = setTimeout(() => {
    timedOut = true;
    void stopAll();
  }, timeoutMs);
  try {
    const outcomes = await Promise.all(
      workers.map((w) =>
        w.run().then(
          () => null,
          async (error: unknown) => {
            await stopAll();
            return error;
          },
        ),
      ),
    );
    const failure = outcomes.find((e) => e !== null);
    if (failure !== undefined) throw failure;
  } finally {
    clearTimeout(timer);
  }
  return timedOut;
}

/** One process's bench workers, each on a store of its own, and what they report between them. */
export class BenchWorkers {
  readonly errors: Record<string, number> = {};
  readonly span: Span = { first: null, last: null };
  private readonly stores: Store[] = [];
  private readonly brokers: Broker[] = [];
  private readonly workers: Worker[] = [];

  /** Connects and resolves the table for `options.workers` workers; close() releases whatever was opened. */
  async open(connect: () => Promise<Store>, options: StatusqRunOptions, watch: (worker: Worker) => void = () => undefined): Promise<void> {
    for (let i = 0; i < options.workers; i++) {
      const store = await connect();
      this.stores.push(store);
      const broker = options.from ? await openBroker(options.from, options.table) : null;
      if (broker) this.brokers.push(broker);
      const worker = await createBenchWorker(store, broker, options, this.errors, this.span);
      watch(worker);
      this.workers.push(worker);
    }
  }

  run(timeoutMs: number): Promise<boolean> {
    return runBounded(this.workers, timeoutMs);
  }

  counters(): WorkerCounters {
    return sumCounters(this.workers.map((w) => w.counters));
  }

  deadlocks(): number {
    return this.stores.reduce((n, s) => n + deadlocksOf(s), 0);
  }

  async close(): Promise<void> {
    // Brokers first: a consumer's unacked messages go back to the queue, never to a worker whose store is gone.
    await Promise.all(this.brokers.map((b) => b.close()));
    await Promise.all(this.stores.map((s) => s.close()));
  }
}

/**
 * W workers in this process drain the table; timed from the first claim to the last settle. `watch` sees
 * each worker before it runs (cost growth times its claims).
 */
export async function burnDownInProcess(db: BenchDatabase, options: StatusqRunOptions, watch?: (worker: Worker) => void, beside?: AlongsideRun): Promise<StatusqBurnDownResult> {
  const bench = new BenchWorkers();
  try {
    await bench.open(() => db.connect(burnDownConnections(options.workers)), options, watch);
    const cpu = measureCpu(db.dialect);
    const timedOut = await alongside(bench.run(options.timeoutMs), beside);
    const counters = bench.counters();
    return { handled: counters.completed, seconds: spanSeconds(bench.span), timedOut, counters, cpu: cpu(), errors: bench.errors, deadlocks: bench.deadlocks() };
  } finally {
    await bench.close();
  }
}

const CHILD_SCRIPT = fileURLToPath(new URL('./burn-child.js', import.meta.url));

/** Ready, run, report and exit: whatever a child does beyond this much longer than the run's own bound is a hang. */
const CHILD_GRACE_MS = 30_000;

/**
 * P child processes, each with `workers / P` workers of its own. Children connect and resolve the table
 * before they are told to go (process start-up is not the queue's cost); timed from the first claim to the
 * last settle across them. A child that hangs past the run's bound is killed and the run fails.
 */
export async function burnDownInProcesses(db: BenchDatabase, options: StatusqRunOptions, processes: number, beside?: AlongsideRun): Promise<StatusqBurnDownResult> {
  const perChild = Math.max(1, Math.round(options.workers / processes));
  const warmUpTable = options.warmUpJobs ? warmUpTableOf(options.table) : undefined;
  if (warmUpTable) await db.createTable(warmUpTable, { pending: options.warmUpJobs! * processes, finished: 0 });
  const config: ChildConfig = { ...options, workers: perChild, dialect: db.dialect, url: withParameters(options.url ?? db.url, options.urlParameters), connections: burnDownConnections(options.workers), ...(warmUpTable && { warmUpTable }) };
  const children: ChildProcess[] = [];
  const results: Array<Extract<ChildMessage, { type: 'done' }>> = [];
  // The warm-up is bounded by the run's bound too.
  const deadline = AbortSignal.timeout((warmUpTable ? 2 : 1) * options.timeoutMs + CHILD_GRACE_MS);
  try {
    const ready: Array<Promise<void>> = [];
    const done: Array<Promise<void>> = [];
    for (let i = 0; i < processes; i++) {
      const child = fork(CHILD_SCRIPT, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      children.push(child);
      ready.push(onMessage(child, 'ready', deadline));
      done.push(onMessage(child, 'done', deadline));
      child.on('message', (message: ChildMessage) => {
        if (message.type === 'done') results.push(message);
      });
    }
    // Every promise is awaited together, so one child's early failure cannot leave another's unhandled.
    const readyAll = Promise.all(ready);
    const doneAll = Promise.all(done);
    doneAll.catch(() => undefined);
    await readyAll;
    const cpu = measureCpu(db.dialect);
    for (const child of children) child.send('go');
    await alongside(doneAll, beside);
    // Read before the children exit: a server's per-connection processes (PostgreSQL) take their CPU time with them.
    const share = cpu(results.reduce((n, r) => n + r.cpuSeconds, 0));
    for (const child of children) if (child.connected) child.send('close');
    const failure = results.find((r) => r.error);
    if (failure) throw new Error(`a bench child failed: ${failure.error}`);
    const counters = sumCounters(results.map((r) => r.counters));
    const errors: Record<string, number> = {};
    for (const r of results) for (const [key, n] of Object.entries(r.errors)) errors[key] = (errors[key] ?? 0) + n;
    return {
      handled: counters.completed,
      seconds: spanSeconds(mergeSpans(results.map((r) => r.span))),
      timedOut: results.some((r) => r.timedOut),
      counters,
      cpu: share,
      errors,
      deadlocks: results.reduce((n, r) => n + r.deadlocks, 0),
    };
  } finally {
    await Promise.all(children.map((child) => exited(child, deadline)));
    if (warmUpTable) await db.dropTable(warmUpTable);
  }
}

/** `url` with `parameters` set in its query, replacing any of the same name. */
function withParameters(url: string, parameters: Record<string, string> | undefined): string {
  if (parameters === undefined) return url;
  const parsed = new URL(url);
  for (const [name, value] of Object.entries(parameters)) parsed.searchParams.set(name, value);
  return parsed.toString();
}

/**
 * What runs in the bench process beside a burn-down's workers, started with them (the broker path's relay):
 * `start` when the workers go, `stop` once they are done; a failure of its run fails the burn-down.
 */
export interface AlongsideRun {
  start(): Promise<unknown>;
  stop(): Promise<unknown>;
}

/** Awaits `workers` with `beside` running from now until they are done (then stopped and awaited). */
async function alongside<T>(workers: Promise<T>, beside: AlongsideRun | undefined): Promise<T> {
  if (!beside) return workers;
  const running = beside.start();
  // Its failure is reported after the workers end, not left unhandled while they run.
  running.catch(() => undefined);
  try {
    return await workers;
  } finally {
    await beside.stop();
    await running;
  }
}
