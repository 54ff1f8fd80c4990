/**
 * One test's environment: its database URL, and the stores, workers and child processes it opened, tracked
 * so that afterEach can prove none was left open or running and can clean up after a failed test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Worker, type Store, type WorkerCounters, type WorkerOptions } from '@statusq/core';
import type { FixtureTables } from './fixtures.js';
import type { ConformanceOptions } from './options.js';
import { ChildHandle, moduleUrl } from './child-handle.js';
import { delay } from './waiting.js';
import type { Ledger } from './rows.js';

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

/** A worker of 4 slots that drains the `jobs` table, recording each run in `ledger`, and exits once it is empty. */
export function drainingJobs(store: Store, ledger: Ledger): WorkerOptions {
  return {
    store,
    table: { table: 'jobs' },
    concurrency: 4,
    exitWhenEmpty: true,
    ...FAST,
    handler: async (job) => {
      ledger.record(job);
    },
  };
}

export class TestEnv {
  private readonly stores: TrackedStore[] = [];
  private readonly workers: Array<{ started: StartedWorker; label: string }> = [];
  private readonly children: TrackedChild[] = [];
  /** Run after the test whatever happened (release gates a handler still waits on, ...), last one first. */
  readonly cleanups: Array<() => unknown> = [];
  private scratch: string | undefined;

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
    if (!this.options.writeLock) return null;
    return this.track(await this.options.writeLock.createImpatientStore(this.url), label);
  }

  /** The adapter's fixture tables. */
  get fixtures(): FixtureTables {
    return this.options.fixtures;
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

  /**
   * Worker.create + run(), tracked; `error` events are collected on `errors`. With `startWhen`, run() waits
   * for it, so several workers created one after another can start claiming at the same moment.
   */
  async startWorker(options: WorkerOptions, label = `worker ${this.workers.length + 1}`, beforeRun?: (worker: Worker) => void, startWhen?: Promise<void>): Promise<StartedWorker> {
    const worker = await Worker.create(options);
    const errors: StartedWorker['errors'] = [];
    worker.on('error', (e) => errors.push(e));
    beforeRun?.(worker);
    let finished = false;
    const done = startWhen ? startWhen.then(() => worker.run()) : worker.run();
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
