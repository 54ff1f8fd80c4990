/**
 * What every conformance test stands on: a fresh database per test, stores and workers the suite tracks (so
 * afterEach can prove none was left open or running), bounded waits instead of sleeps, and small helpers to
 * read the table back.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isAbsolute, join } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import {
  Queue,
  Worker,
  type Job,
  type Row,
  type SqlValue,
  type StatusCounts,
  type Store,
  type TableConfig,
  type WorkerCounters,
  type WorkerEventName,
  type WorkerEvents,
  type WorkerOptions,
} from '@statusq/core';
import type { ConformanceOptions } from './options.js';

export interface StartedWorker {
  worker: Worker;
  /** run()'s promise. */
  done: Promise<WorkerCounters>;
  /** Every `error` event the worker emitted (it survived them). */
  errors: Array<{ error: unknown; during: string }>;
  finished(): boolean;
}

interface TrackedStore {
  store: Store;
  closed: boolean;
  label: string;
}

interface TrackedChild {
  child: ChildProcess;
  label: string;
}

/** Fast polling for tests: workers notice new or due rows within milliseconds. */
export const FAST = { pollMinMs: 2, pollMaxMs: 20 } as const;

export class TestEnv {
  private readonly stores: TrackedStore[] = [];
  private readonly workers: Array<{ started: StartedWorker; label: string }> = [];
  private readonly children: TrackedChild[] = [];
  /** Run after the test whatever happened (release gates a handler still waits on, ...), last one first. */
  readonly cleanups: Array<() => unknown> = [];
  private scratch: string | undefined;
  private dialectName: string | undefined;

  constructor(
    readonly options: ConformanceOptions,
    readonly url: string,
  ) {}

  get adapterModuleUrl(): string {
    return moduleUrl(this.options.adapterModule);
  }

  get adapterModulePath(): string {
    const m = this.options.adapterModule;
    return m.startsWith('file:') ? fileURLToPath(m) : m;
  }

  /** A new connection to this test's database (or to `url`), closed by the test (afterEach checks). */
  async store(label = `store ${this.stores.length + 1}`, url = this.url, open?: (url: string) => Promise<Store>): Promise<Store> {
    return this.track(await (open ? open(url) : this.connect(url)), label);
  }

  /** A store that gives up on another connection's lock almost at once, or null if the adapter has none. */
  async impatientStore(label = 'impatient store'): Promise<Store | null> {
    if (!this.options.createImpatientStore) return null;
    return this.track(await this.options.createImpatientStore(this.url), label);
  }

  /** The dialect name of this adapter (`sqlite`, `postgres`, `mysql`). */
  async dialect(): Promise<string> {
    if (this.dialectName === undefined) {
      const probe = await this.store('dialect probe');
      this.dialectName = probe.dialect.name;
      await probe.close();
    }
    return this.dialectName;
  }

  private async connect(url: string): Promise<Store> {
    if (this.options.createStore) return this.options.createStore(url);
    const adapter = (await import(this.adapterModuleUrl)) as { connect(url: string): Promise<Store> };
    return adapter.connect(url);
  }

  private track(store: Store, label: string): Store {
    const entry: TrackedStore = { store, closed: false, label };
    const close = store.close.bind(store);
    store.close = async () => {
      entry.closed = true;
      await close();
    };
    this.stores.push(entry);
    return store;
  }

  /** Closes every store this test opened that is still open. */
  async closeStores(): Promise<void> {
    for (const s of this.stores) if (!s.closed) await s.store.close();
  }

  /** Worker.create + run(), tracked; `error` events are collected on `errors`. */
  async startWorker(options: WorkerOptions, label = `worker ${this.workers.length + 1}`, beforeRun?: (worker: Worker) => void): Promise<StartedWorker> {
    const worker = await Worker.create(options);
    const errors: StartedWorker['errors'] = [];
    worker.on('error', (e) => errors.push(e));
    beforeRun?.(worker);
    let finished = false;
    const done = worker.run();
    done.then(
      () => (finished = true),
      () => (finished = true),
    );
    const started: StartedWorker = { worker, done, errors, finished: () => finished };
    this.workers.push({ started, label });
    return started;
  }

  /** Spawns `node script JSON(args)` and tracks it; see runChild. */
  spawnChild(script: string, args: unknown, env: Record<string, string> = {}, label = `child ${this.children.length + 1}`): ChildHandle {
    const child = spawn(process.execPath, [script, JSON.stringify(args)], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.children.push({ child, label });
    return new ChildHandle(child, label);
  }

  /** A temp directory for this test's files (ledgers, handler modules), removed after the test. */
  tempDir(): string {
    if (this.scratch === undefined) {
      const dir = mkdtempSync(join(tmpdir(), 'statusq-conformance-'));
      this.scratch = dir;
    }
    return this.scratch;
  }

  /** What was left open or running: the leak check of afterEach. */
  leaks(): string[] {
    const leaks: string[] = [];
    for (const w of this.workers) if (!w.started.finished()) leaks.push(`${w.label}: run() has not resolved`);
    for (const s of this.stores) if (!s.closed) leaks.push(`${s.label}: not closed`);
    for (const c of this.children) if (c.child.exitCode === null && c.child.signalCode === null) leaks.push(`${c.label} (pid ${c.child.pid}): still running`);
    return leaks;
  }

  /** Stops and closes whatever is left, so one failed test cannot break the next. */
  async dispose(): Promise<void> {
    // Last registered, first run: what a test set up later (worker processes) may depend on what it set up
    // earlier (the server they talk to), never the other way round.
    for (const cleanup of this.cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch {
        // best effort
      }
    }
    for (const w of this.workers) {
      if (!w.started.finished()) await Promise.race([w.started.worker.stop(50).catch(() => undefined), delay(2000)]);
    }
    for (const c of this.children) {
      if (c.child.exitCode === null && c.child.signalCode === null && c.child.pid !== undefined) {
        try {
          process.kill(c.child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    for (const s of this.stores) {
      if (!s.closed) await s.store.close().catch(() => undefined);
    }
    if (this.scratch !== undefined) rmSync(this.scratch, { recursive: true, force: true });
  }
}

/**
 * The same store, with a macrotask of "network latency" before every call. In-process drivers that run
 * synchronously (better-sqlite3) otherwise never let two workers' SELECT and UPDATE interleave, so the
 * race between candidate selection and the conditional UPDATE would never happen in a test.
 */
export function withLatency(inner: Store): Store {
  const hop = () => new Promise<void>((resolve) => setImmediate(resolve));
  const store: Store = {
    dialect: inner.dialect,
    capabilities: inner.capabilities,
    execute: async (s) => {
      await hop();
      return inner.execute(s);
    },
    executeBatch: async (s) => {
      await hop();
      return inner.executeBatch(s);
    },
    describeTable: (t) => inner.describeTable(t),
    orderTimeEncoding: (c) => inner.orderTimeEncoding(c),
    nativeClaim: inner.nativeClaim,
    close: () => inner.close(),
  };
  if (inner.transaction) {
    store.transaction = async (body) => {
      await hop();
      return inner.transaction!(body);
    };
  }
  if (inner.waitForWork) store.waitForWork = (ms, signal) => inner.waitForWork!(ms, signal);
  return store;
}

/** A spawned child: its stdout lines, its exit, and its stdin. */
export class ChildHandle {
  private readonly lines: string[] = [];
  private readonly waiters: Array<{ test: (line: string) => boolean; resolve: (line: string) => void }> = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly child: ChildProcess,
    readonly label: string,
  ) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      this.lines.push(line);
      for (const w of [...this.waiters]) {
        if (w.test(line)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => this.stderr.push(chunk.toString()));
    this.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  }

  get pid(): number {
    return this.child.pid!;
  }

  get stdout(): string[] {
    return [...this.lines];
  }

  /** Resolves with the first stdout line (already printed or to come) that passes `test`. */
  line(test: (line: string) => boolean, what: string, timeoutMs = 20_000): Promise<string> {
    const seen = this.lines.find(test);
    if (seen !== undefined) return Promise.resolve(seen);
    return withDeadline(
      new Promise<string>((resolve) => this.waiters.push({ test, resolve })),
      timeoutMs,
      () => `${this.label}: ${what}; stdout so far: ${JSON.stringify(this.lines.slice(-5))}; stderr: ${this.stderr.join('').slice(-2000)}`,
    );
  }

  send(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }

  /** Waits for a clean exit (code 0) and returns the JSON object printed on the last stdout line. */
  async result<T>(timeoutMs = 60_000): Promise<T> {
    const { code, signal } = await withDeadline(this.exited, timeoutMs, () => `${this.label} did not exit; stderr: ${this.stderr.join('').slice(-2000)}`);
    if (code !== 0) throw new Error(`${this.label} exited with code ${code} signal ${signal}; stderr: ${this.stderr.join('').slice(-4000)}`);
    const last = this.lines.filter((l) => l.trim().startsWith('{')).at(-1);
    if (last === undefined) throw new Error(`${this.label} printed no JSON result; stdout: ${JSON.stringify(this.lines)}`);
    return JSON.parse(last) as T;
  }
}

export function moduleUrl(pathOrUrl: string): string {
  if (/^(file|data|node):/.test(pathOrUrl)) return pathOrUrl;
  if (isAbsolute(pathOrUrl)) return pathToFileURL(pathOrUrl).href;
  return pathOrUrl;
}

/** Compiled child scripts live next to this file (dist/). */
export function childScript(name: 'child-worker.js' | 'child-session.js'): string {
  return fileURLToPath(new URL(`./${name}`, import.meta.url));
}

// ---------------------------------------------------------------------------------------------------------
// Waiting without sleeping in place of synchronisation.

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Rejects with a clear message if `promise` has not settled within `timeoutMs`. */
export async function withDeadline<T>(promise: Promise<T>, timeoutMs: number, what: string | (() => string)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms: ${typeof what === 'string' ? what : what()}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Polls `check` until it returns something other than false/undefined/null, and returns that. Fails with
 * `what` and the last value seen once `timeoutMs` has passed. For state that only time changes (leases,
 * backoff), never as a stand-in for an event.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | false | null | undefined> | T | false | null | undefined,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 10;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    const value = await check();
    if (value !== false && value !== null && value !== undefined) return value;
    last = value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last check: ${String(last)})`);
    await delay(intervalMs);
  }
}

/** The next `name` event of a worker that passes `filter`, or a clear failure after `timeoutMs`. */
export function nextEvent<K extends WorkerEventName>(
  worker: Worker,
  name: K,
  options: { timeoutMs?: number; filter?: (event: WorkerEvents[K]) => boolean } = {},
): Promise<WorkerEvents[K]> {
  let off: () => void = () => undefined;
  const event = new Promise<WorkerEvents[K]>((resolve) => {
    off = worker.on(name, (e) => {
      if (options.filter && !options.filter(e)) return;
      off();
      resolve(e);
    });
  });
  return withDeadline(event, options.timeoutMs ?? 10_000, `worker event "${name}"`).finally(() => off());
}

/** Lets pending promise callbacks and I/O run (not a timing assumption: nothing is awaited by time). */
export function flushEventLoop(turns = 3): Promise<void> {
  return new Promise((resolve) => {
    const step = (n: number) => (n === 0 ? resolve() : setImmediate(() => step(n - 1)));
    step(turns);
  });
}

// ---------------------------------------------------------------------------------------------------------
// Rows.

/** A job id as a map key; drivers may hand back bigint ids as numbers, bigints or strings. */
export function idKey(id: unknown): string {
  return String(id);
}

/** A status column value as a number, or null for pending. */
export function statusOf(row: Row | undefined, column = 'status'): number | null {
  if (!row) throw new Error('row not found');
  const v = row[column];
  return v === null || v === undefined ? null : Number(v);
}

/** A time column's value in epoch milliseconds (epoch-ms integers, Date objects or date strings). */
export function toMs(value: unknown): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'string') {
    if (/^-?\d+(\.\d+)?$/.test(value)) return Number(value);
    const iso = /^\d{4}-\d\d-\d\d \d/.test(value) && !/[zZ]|[+-]\d\d:?\d\d$/.test(value) ? `${value.replace(' ', 'T')}Z` : value;
    const ms = Date.parse(iso);
    if (Number.isNaN(ms)) throw new Error(`not a time: ${JSON.stringify(value)}`);
    return ms;
  }
  throw new Error(`not a time: ${String(value)}`);
}

export function placeholders(store: Store, count: number, first = 1): string[] {
  return Array.from({ length: count }, (_, i) => store.dialect.placeholder(first + i));
}

export async function readRows(store: Store, table: string): Promise<Row[]> {
  const q = store.dialect.quoteIdentifier.bind(store.dialect);
  return (await store.execute({ sql: `SELECT * FROM ${q(table)} ORDER BY ${q('id')}`, params: [] })).rows;
}

export async function readRow(store: Store, table: string, id: unknown): Promise<Row> {
  const q = store.dialect.quoteIdentifier.bind(store.dialect);
  const { rows } = await store.execute({ sql: `SELECT * FROM ${q(table)} WHERE ${q('id')} = ${store.dialect.placeholder(1)}`, params: [id as SqlValue] });
  if (rows.length !== 1) throw new Error(`expected one row with id ${String(id)} in ${table}, found ${rows.length}`);
  return rows[0]!;
}

/** Row counts per status name. */
export async function countsOf(store: Store, table: TableConfig | string): Promise<StatusCounts> {
  const queue = await Queue.open(store, typeof table === 'string' ? { table } : table);
  return queue.counts();
}

/**
 * Records every execution of a handler: per job id, the attempt numbers in the order they ran, and the
 * global order of executions.
 */
export class Ledger {
  readonly attempts = new Map<string, number[]>();
  readonly order: Array<{ id: string; attempt: number; workerId: string }> = [];

  record(job: Job, workerId = ''): void {
    const key = idKey(job.id);
    const list = this.attempts.get(key) ?? [];
    list.push(job.attempt);
    this.attempts.set(key, list);
    this.order.push({ id: key, attempt: job.attempt, workerId });
  }

  count(id: unknown): number {
    return this.attempts.get(idKey(id))?.length ?? 0;
  }

  /** Ids handled other than exactly once. */
  notExactlyOnce(ids: Iterable<unknown>): string[] {
    const bad: string[] = [];
    for (const id of ids) if (this.count(id) !== 1) bad.push(`${idKey(id)}x${this.count(id)}`);
    return bad;
  }
}
