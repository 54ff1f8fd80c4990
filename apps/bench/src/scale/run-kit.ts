/**
 * What every scale run needs: a fresh table of pending rows, `statusq work` started on worker hosts, a bounded
 * wait for them to end, the table and the ledgers read back, and the exactly-once proof (ledger-check.ts).
 */
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isRetryableStoreError, type Store } from '@statusq/core';
import type { BenchDatabase } from '../databases.js';
import type { ServerDialect } from './db-host.js';
import { reapedChildrenCpuSeconds } from '../cpu.js';
import { readLedgers, verifyLedger, type FinalRow } from './ledger-check.js';
import type { ScaleContext, ScaleRecord } from './records.js';
import type { Sidecar } from './sidecar.js';

/** The pause before reading the done rows again after the server refused the read for a moment. */
const COUNT_RETRY_MS = 100;
import type { Topology } from './topology.js';
import { WorkerHost, type ProcessCounters } from './worker-hosts.js';

export const TABLE = 'scale_jobs';
/** Enough attempts that a row superseded by a partition and a kill in the same run still ends done. */
const MAX_ATTEMPTS = 10;

/** The database side of a run: one server, or a cluster presented as one (its CPU summed over nodes). */
export interface RunDatabase {
  readonly dialect: ServerDialect;
  readonly version: string;
  /** Where worker hosts reach it by default. */
  readonly address: { host: string; port: number };
  cpuSeconds(): number;
}

export interface StartOptions {
  /** A sidecar to connect through, or null for the database's own address (`url` overrides both). */
  via: Sidecar | null;
  url?: string;
  processes: number;
  concurrency: number;
  batch: number;
  leaseMs: number;
  workMs: number;
  runDir: string;
  /** Default true (see WorkOptions.exitWhenEmpty). */
  exitWhenEmpty?: boolean;
  /** --poll-max (default 200 ms: a drained host notices the end soon). */
  pollMaxMs?: number;
  /** More `work` flags. */
  args?: readonly string[];
}

/** A run's wall time and CPU seconds: the database's, and the worker hosts' (null without /proc). */
export interface Measured {
  wallSeconds: number;
  cpuSeconds: number;
  workersCpuSeconds: number | null;
}

export class RunKit {
  constructor(
    readonly context: ScaleContext,
    readonly topology: Topology,
    readonly database: RunDatabase,
    readonly bench: BenchDatabase,
    private readonly ledgerDir: string,
    /** Longest one run may take before its hosts are killed and it is reported as failed. */
    readonly runTimeoutMs: number,
  ) {}

  /** The database URL for workers: straight to `address` (default: the database's), or through a sidecar on the host's loopback. */
  urlFor(via: Sidecar | null, address: { host: string; port: number } = this.database.address): string {
    const url = new URL(this.bench.url);
    const target = via?.local ?? address;
    url.hostname = target.host;
    url.port = String(target.port);
    return url.toString();
  }

  /** A fresh table of `jobs` pending rows; returns a directory for this run's ledgers. */
  async fresh(jobs: number): Promise<string> {
    await this.bench.createTable(TABLE, { pending: jobs, finished: 0 });
    return mkdtempSync(join(this.ledgerDir, 'run-'));
  }

  start(host: string, options: StartOptions): WorkerHost {
    return WorkerHost.start(this.topology, host, {
      url: options.url ?? this.urlFor(options.via),
      table: TABLE,
      processes: options.processes,
      concurrency: options.concurrency,
      batch: options.batch,
      leaseMs: options.leaseMs,
      workMs: options.workMs,
      ledgerDir: options.runDir,
      ...(options.exitWhenEmpty !== undefined && { exitWhenEmpty: options.exitWhenEmpty }),
      args: ['--max-attempts', String(MAX_ATTEMPTS), '--poll-max', `${options.pollMaxMs ?? 200}ms`, ...(options.args ?? [])],
    });
  }

  /** Waits for every host to exit and `whileWaiting` to settle, within runTimeoutMs (past it, the hosts are killed and the run fails). */
  async finish(hosts: readonly WorkerHost[], whileWaiting: Promise<unknown> = Promise.resolve()): Promise<void> {
    const timeout = sleep(this.runTimeoutMs, 'timeout' as const);
    const outcome = await Promise.race([Promise.all([...hosts.map((h) => h.exited), whileWaiting]).then(() => 'done' as const), timeout]);
    if (outcome === 'timeout') {
      for (const host of hosts) this.topology.killAll(host.host);
      throw new Error(`the run did not finish within ${this.runTimeoutMs / 1000} s; hosts still running: ${hosts.filter((h) => h.running).map((h) => `${h.host}: ${h.problems().join(' | ')}`).join('; ')}`);
    }
  }

  async rows(): Promise<{ rows: FinalRow[]; spanSeconds: number }> {
    const store = await this.bench.connect();
    try {
      const q = (name: string) => store.dialect.quoteIdentifier(name);
      const { rows } = await store.execute({ sql: `SELECT ${q('id')}, ${q('status')}, ${q('result')}, ${q('finished_at')} FROM ${q(TABLE)}`, params: [] });
      let first = Infinity;
      let last = -Infinity;
      const finals = rows.map((row): FinalRow => {
        const finished = row.finished_at instanceof Date ? row.finished_at.getTime() : row.finished_at === null ? null : Date.parse(String(row.finished_at));
        if (finished !== null && !Number.isNaN(finished)) {
          first = Math.min(first, finished);
          last = Math.max(last, finished);
        }
        return { id: String(row.id), status: row.status === null ? null : Number(row.status), resultPid: resultPid(row.result) };
      });
      return { rows: finals, spanSeconds: last > first ? (last - first) / 1000 : 0 };
    } finally {
      await store.close();
    }
  }

  /**
   * Reads the outcome, proves it, and reports the record; throws when a host failed or the proof does. A
   * stopped run (`stopped`) may leave rows pending, which must then never have run; `jobs` becomes the rows done.
   * A run that failed over passes its ledgers' `failoverCut` (and, to an asynchronous standby, `lostCommitsAllowed`).
   */
  async conclude(
    base: Omit<ScaleRecord, 'jobsPerSec' | 'wallSeconds' | 'candidatesLost' | 'serverCores' | 'ledger' | 'server'>,
    hosts: readonly WorkerHost[],
    measured: Measured,
    killedPids: ReadonlySet<number>,
    stopped = false,
    failover: { failoverCut?: ReadonlyMap<string, number>; lostCommitsAllowed?: boolean } = {},
  ): Promise<ScaleRecord> {
    // A null code is a host killed by a signal, which only a fault run does.
    const failed = hosts.filter((h) => h.code !== 0 && h.code !== null);
    if (failed.length > 0) throw new Error(`worker hosts exited with an error (${base.scenario}, ${base.dialect}):\n${failed.map((h) => `${h.host} (code ${h.code}): ${h.problems().join('\n    ')}`).join('\n')}`);
    const { rows, spanSeconds } = await this.rows();
    const counters: ProcessCounters[] = hosts.flatMap((h) => h.counters());
    const executions = readLedgers(
      hosts.map((h) => h.ledgerPath),
      failover.failoverCut,
    );
    const ledger = verifyLedger(rows, executions, counters, killedPids, { pendingAllowed: stopped, lostCommitsAllowed: failover.lostCommitsAllowed ?? false });
    const jobs = stopped ? rows.filter((r) => r.status === 1).length : base.jobs;
    const record: ScaleRecord = {
      ...base,
      jobs,
      server: this.database.version,
      jobsPerSec: spanSeconds > 0 ? Math.round(jobs / spanSeconds) : 0,
      wallSeconds: round(measured.wallSeconds, 2),
      candidatesLost: counters.reduce((sum, c) => sum + c.counters.candidatesLost, 0),
      claimCalls: counters.reduce((sum, c) => sum + c.counters.claimCalls, 0),
      serverCores: round(measured.cpuSeconds / measured.wallSeconds, 2),
      ...(measured.workersCpuSeconds !== null && { workersCores: round(measured.workersCpuSeconds / measured.wallSeconds, 2) }),
      ledger,
    };
    this.context.onRecord(record);
    if (ledger.violations.length > 0) {
      const problems = hosts.flatMap((h) => h.problems().map((p) => `${h.host}: ${p}`)).slice(-10);
      throw new Error(`the ledger proof failed (${base.scenario}, ${base.dialect}):\n  ${ledger.violations.join('\n  ')}\n${problems.join('\n')}`);
    }
    return record;
  }

  /**
   * Starts timing a run: wall time, the database's CPU and the worker hosts' from now. The hosts' is read from
   * the processes this one reaped, so it is whole only once every host has exited (a run that stops them does).
   */
  measure(): () => Measured {
    const started = performance.now();
    const cpu = this.database.cpuSeconds();
    const workers = reapedChildrenCpuSeconds();
    return () => {
      const workersNow = reapedChildrenCpuSeconds();
      return { wallSeconds: (performance.now() - started) / 1000, cpuSeconds: this.database.cpuSeconds() - cpu, workersCpuSeconds: workers === null || workersNow === null ? null : workersNow - workers };
    };
  }

  /**
   * The done rows, read through `store`. A read the server refuses for a moment is read again: a Galera node
   * answers 1047 to every statement while the cluster re-forms its primary component (a node isolated or killed
   * beside it), and the watcher of a fault run must see through that, as the workers do (2026-12-07, a clean-clone
   * run's `scale --quick` failed on it once).
   */
  async countDone(store: Store): Promise<number> {
    const q = (name: string) => store.dialect.quoteIdentifier(name);
    for (let attempt = 1; ; attempt++) {
      try {
        const { rows } = await store.execute({ sql: `SELECT COUNT(*) AS n FROM ${q(TABLE)} WHERE ${q('status')} = 1`, params: [] });
        return Number(rows[0]?.n ?? 0);
      } catch (error) {
        if (!isRetryableStoreError(error) || attempt * COUNT_RETRY_MS >= this.runTimeoutMs) throw error;
        await sleep(COUNT_RETRY_MS);
      }
    }
  }

  /** Resolves once `share` of `jobs` rows are done (polled every 50 ms, within the run timeout). */
  async progressAt(store: Store, jobs: number, share: number): Promise<void> {
    for (let i = 0; i < this.runTimeoutMs / 50; i++) {
      if ((await this.countDone(store)) >= jobs * share) return;
      await sleep(50);
    }
    throw new Error(`the run never reached ${share * 100}% done`);
  }
}

function resultPid(result: unknown): number | null {
  if (result === null || result === undefined) return null;
  try {
    const parsed = (typeof result === 'string' ? JSON.parse(result) : result) as { pid?: unknown };
    return typeof parsed.pid === 'number' ? parsed.pid : null;
  } catch {
    return null;
  }
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
