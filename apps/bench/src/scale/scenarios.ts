/**
 * The scale-out scenarios: worker hosts (network namespaces of the run's own) running `statusq work
 * --processes P` against a database host of the run's own, with the exactly-once ledger proof after each run.
 *   hosts:   1, 2, 4 worker hosts against one database: jobs/s, claims lost to other workers, server CPU.
 *   latency: added round-trip time between the workers and the database, against the claim batch size.
 *   faults:  one host's connections dropped again and again, one host partitioned for longer than the lease
 *            (its late settles must be refused), one host killed outright, all in one run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Store } from '@statusq/core';
import { openBenchDatabaseAt, type BenchDatabase } from '../databases.js';
import { startDatabaseHost, type DatabaseHost, type ServerDialect } from './db-host.js';
import { readLedgers, verifyLedger, type FinalRow, type LedgerVerdict } from './ledger-check.js';
import { Sidecar } from './sidecar.js';
import { Topology } from './topology.js';
import { WorkerHost, type ProcessCounters } from './worker-hosts.js';

export const SCALE_SCENARIOS = ['hosts', 'latency', 'faults'] as const;
export type ScaleScenario = (typeof SCALE_SCENARIOS)[number];
export const SCALE_DIALECTS: readonly ServerDialect[] = ['mysql', 'postgres'];

export interface ScalePlan {
  hosts: { hostCounts: number[]; processes: number; concurrency: number; jobs: number };
  /** Timed runs (a slow link would take minutes over a fixed count): rows enough for the fastest, stopped after durationMs. */
  latency: { hosts: number; concurrency: number; delaysMs: number[]; batches: number[]; jobs: number; durationMs: number };
  faults: { processes: number; concurrency: number; jobs: number; leaseMs: number; workMs: number; drops: number };
  /** Longest one run may take before it is stopped and reported as failed. */
  runTimeoutMs: number;
}

export const FULL_SCALE_PLAN: ScalePlan = {
  hosts: { hostCounts: [1, 2, 4], processes: 2, concurrency: 16, jobs: 30_000 },
  latency: { hosts: 2, concurrency: 32, delaysMs: [0, 5, 20, 50], batches: [1, 8, 32], jobs: 40_000, durationMs: 6000 },
  faults: { processes: 2, concurrency: 16, jobs: 12_000, leaseMs: 2000, workMs: 10, drops: 8 },
  runTimeoutMs: 180_000,
};

export const QUICK_SCALE_PLAN: ScalePlan = {
  hosts: { hostCounts: [1, 2], processes: 1, concurrency: 8, jobs: 2000 },
  latency: { hosts: 1, concurrency: 16, delaysMs: [0, 20], batches: [1, 16], jobs: 10_000, durationMs: 2500 },
  faults: { processes: 2, concurrency: 8, jobs: 3000, leaseMs: 2000, workMs: 10, drops: 4 },
  runTimeoutMs: 120_000,
};

export interface ScaleRecord {
  scenario: ScaleScenario;
  dialect: ServerDialect;
  server: string;
  hosts: number;
  processes: number;
  concurrency: number;
  batch: number;
  /** Added round trip between each worker host and the database. */
  addedRttMs: number;
  jobs: number;
  /** From the first settle to the last (finished_at): the drain itself, without process start-up. */
  jobsPerSec: number;
  wallSeconds: number;
  /** Claims whose candidate another worker took first (the SELECT saw it, the guarded UPDATE lost). */
  candidatesLost: number;
  /** Database server CPU, in cores, over the run. */
  serverCores: number;
  ledger: LedgerVerdict;
  /** What the fault run did: connections dropped, seconds partitioned, processes killed. */
  faults?: { dropped: number; drops: number; partitionedSeconds: number; killed: number; claimsTakenOver: Record<string, number> };
}

export interface ScaleContext {
  plan: ScalePlan;
  dialects: readonly ServerDialect[];
  only: readonly ScaleScenario[];
  onRecord(record: ScaleRecord): void;
  log(line: string): void;
}

const TABLE = 'scale_jobs';
/** Enough attempts that a row superseded by a partition and a kill in the same run still ends done. */
const MAX_ATTEMPTS = 10;

/** Every scenario of the plan on every dialect; each dialect gets a fresh topology and database host. */
export async function runScale(context: ScaleContext): Promise<void> {
  for (const dialect of context.dialects) {
    const hostCount = Math.max(...context.plan.hosts.hostCounts, context.plan.latency.hosts, 4); // the fault run uses four
    const names = Array.from({ length: hostCount }, (_, i) => `w${i + 1}`);
    const topology = Topology.create(['db', ...names]);
    let database: DatabaseHost | null = null;
    let bench: BenchDatabase | null = null;
    const ledgerDir = mkdtempSync(join(tmpdir(), 'statusq-scale-'));
    try {
      database = await startDatabaseHost(dialect, topology, 'db');
      bench = await openBenchDatabaseAt(dialect, database.adminUrl);
      context.log(`${database.version} on host db (${database.address.host}), worker hosts ${names.join(', ')}`);
      const run = new RunKit(context, topology, database, bench, ledgerDir);
      if (context.only.includes('hosts')) await hostsScenario(run);
      if (context.only.includes('latency')) await latencyScenario(run);
      if (context.only.includes('faults')) await faultsScenario(run);
    } finally {
      await bench?.close().catch(() => undefined);
      await database?.stop().catch(() => undefined);
      topology.destroy();
      rmSync(ledgerDir, { recursive: true, force: true });
    }
  }
}

/** What every scenario needs for one run: a fresh table, hosts started, a bounded wait, the proof. */
class RunKit {
  constructor(
    readonly context: ScaleContext,
    readonly topology: Topology,
    readonly database: DatabaseHost,
    readonly bench: BenchDatabase,
    private readonly ledgerDir: string,
  ) {}

  /** The database URL for workers: straight to the database host, or through a sidecar on the host's loopback. */
  urlFor(via: Sidecar | null): string {
    const url = new URL(this.bench.url);
    const target = via?.local ?? this.database.address;
    url.hostname = target.host;
    url.port = String(target.port);
    return url.toString();
  }

  async fresh(jobs: number): Promise<string> {
    await this.bench.createTable(TABLE, { pending: jobs, finished: 0 });
    const runDir = mkdtempSync(join(this.ledgerDir, 'run-'));
    return runDir;
  }

  start(host: string, options: { via: Sidecar | null; processes: number; concurrency: number; batch: number; leaseMs: number; workMs: number; runDir: string }): WorkerHost {
    return WorkerHost.start(this.topology, host, {
      url: this.urlFor(options.via),
      table: TABLE,
      processes: options.processes,
      concurrency: options.concurrency,
      batch: options.batch,
      leaseMs: options.leaseMs,
      workMs: options.workMs,
      ledgerDir: options.runDir,
      args: ['--max-attempts', String(MAX_ATTEMPTS), '--poll-max', '200ms'],
    });
  }

  /** Waits for every host to exit (bounded by the plan's run timeout: past it, they are killed and the run fails). */
  async finish(hosts: readonly WorkerHost[], whileWaiting: Promise<unknown> = Promise.resolve()): Promise<void> {
    const timeout = sleep(this.context.plan.runTimeoutMs, 'timeout' as const);
    const outcome = await Promise.race([Promise.all([...hosts.map((h) => h.exited), whileWaiting]).then(() => 'done' as const), timeout]);
    if (outcome === 'timeout') {
      for (const host of hosts) this.topology.killAll(host.host);
      throw new Error(`the run did not finish within ${this.context.plan.runTimeoutMs / 1000} s; hosts still running: ${hosts.filter((h) => h.running).map((h) => `${h.host}: ${h.problems().join(' | ')}`).join('; ')}`);
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
   * Reads the outcome, proves it, and reports the record; throws when the proof fails. A stopped run (`stopped`)
   * may leave rows pending, which must then never have run; `jobs` becomes the rows done.
   */
  async conclude(base: Omit<ScaleRecord, 'jobsPerSec' | 'wallSeconds' | 'candidatesLost' | 'serverCores' | 'ledger' | 'server'>, hosts: readonly WorkerHost[], measured: { wallSeconds: number; cpuSeconds: number }, killedPids: ReadonlySet<number>, stopped = false): Promise<ScaleRecord> {
    const failed = hosts.filter((h) => h.code !== 0 && h.code !== null); // null: killed by a signal, which only a fault run does
    if (failed.length > 0) throw new Error(`worker hosts exited with an error (${base.scenario}, ${base.dialect}):\n${failed.map((h) => `${h.host} (code ${h.code}): ${h.problems().join('\n    ')}`).join('\n')}`);
    const { rows, spanSeconds } = await this.rows();
    const counters: ProcessCounters[] = hosts.flatMap((h) => h.counters());
    const ledger = verifyLedger(rows, readLedgers(hosts.map((h) => h.ledgerPath)), counters, killedPids, { pendingAllowed: stopped });
    const jobs = stopped ? rows.filter((r) => r.status === 1).length : base.jobs;
    const record: ScaleRecord = {
      ...base,
      jobs,
      server: this.database.version,
      jobsPerSec: spanSeconds > 0 ? Math.round(jobs / spanSeconds) : 0,
      wallSeconds: round(measured.wallSeconds, 2),
      candidatesLost: counters.reduce((sum, c) => sum + c.counters.candidatesLost, 0),
      serverCores: round(measured.cpuSeconds / measured.wallSeconds, 2),
      ledger,
    };
    this.context.onRecord(record);
    if (ledger.violations.length > 0) {
      const problems = hosts.flatMap((h) => h.problems().map((p) => `${h.host}: ${p}`)).slice(-10);
      throw new Error(`the ledger proof failed (${base.scenario}, ${base.dialect}):\n  ${ledger.violations.join('\n  ')}\n${problems.join('\n')}`);
    }
    return record;
  }

  measure(): () => { wallSeconds: number; cpuSeconds: number } {
    const started = performance.now();
    const cpu = this.database.cpuSeconds();
    return () => ({ wallSeconds: (performance.now() - started) / 1000, cpuSeconds: this.database.cpuSeconds() - cpu });
  }

  async countDone(store: Store): Promise<number> {
    const q = (name: string) => store.dialect.quoteIdentifier(name);
    const { rows } = await store.execute({ sql: `SELECT COUNT(*) AS n FROM ${q(TABLE)} WHERE ${q('status')} = 1`, params: [] });
    return Number(rows[0]?.n ?? 0);
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

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

async function hostsScenario(run: RunKit): Promise<void> {
  const { hostCounts, processes, concurrency, jobs } = run.context.plan.hosts;
  for (const count of hostCounts) {
    const runDir = await run.fresh(jobs);
    const measure = run.measure();
    const hosts = Array.from({ length: count }, (_, i) => run.start(`w${i + 1}`, { via: null, processes, concurrency, batch: concurrency, leaseMs: 30_000, workMs: 0, runDir }));
    await run.finish(hosts);
    const record = await run.conclude({ scenario: 'hosts', dialect: run.database.dialect, hosts: count, processes, concurrency, batch: concurrency, addedRttMs: 0, jobs }, hosts, measure(), new Set());
    run.context.log(`hosts ${count} x ${processes} processes x ${concurrency}: ${record.jobsPerSec} jobs/s, lost candidates ${record.candidatesLost}, server ${record.serverCores} cores, re-runs ${record.ledger.reRuns}`);
  }
}

async function latencyScenario(run: RunKit): Promise<void> {
  const { hosts: hostCount, concurrency, delaysMs, batches, jobs, durationMs } = run.context.plan.latency;
  const names = Array.from({ length: hostCount }, (_, i) => `w${i + 1}`);
  const sidecars: Sidecar[] = [];
  try {
    for (const name of names) sidecars.push(await Sidecar.start(run.topology, name, run.database.address));
    for (const delayMs of delaysMs) {
      for (const sidecar of sidecars) await sidecar.delay(delayMs);
      for (const batch of batches) {
        const runDir = await run.fresh(jobs);
        const measure = run.measure();
        const hosts = names.map((name, i) => run.start(name, { via: sidecars[i]!, processes: 1, concurrency, batch, leaseMs: 30_000, workMs: 0, runDir }));
        // The stop is the run's planned end, not a wait for something to happen.
        const stopAt = sleep(durationMs).then(() => hosts.forEach((h) => h.stop()));
        await run.finish(hosts, stopAt);
        const record = await run.conclude({ scenario: 'latency', dialect: run.database.dialect, hosts: hostCount, processes: 1, concurrency, batch, addedRttMs: delayMs, jobs }, hosts, measure(), new Set(), true);
        run.context.log(`latency +${delayMs} ms, batch ${batch}: ${record.jobsPerSec} jobs/s`);
      }
    }
  } finally {
    for (const sidecar of sidecars) sidecar.stop();
  }
}

/**
 * One run, four hosts: w1's connections are cut every few hundred milliseconds (through its sidecar), w2 is
 * partitioned for two and a half leases from a tenth of the way in, w3 is killed (every process, SIGKILL) a
 * fifth of the way in, w4 works undisturbed. The run ends when every host has exited (w3 never will: it is
 * dead), and the proof must hold.
 */
async function faultsScenario(run: RunKit): Promise<void> {
  const { processes, concurrency, jobs, leaseMs, workMs, drops } = run.context.plan.faults;
  const runDir = await run.fresh(jobs);
  const sidecar = await Sidecar.start(run.topology, 'w1', run.database.address);
  const monitor = await run.bench.connect();
  const killed = new Set<number>();
  const faults = { dropped: 0, drops: 0, partitionedSeconds: 0, killed: 0, claimsTakenOver: {} as Record<string, number> };
  try {
    const measure = run.measure();
    const common = { processes, concurrency, batch: concurrency, leaseMs, workMs, runDir };
    const w1 = run.start('w1', { via: sidecar, ...common });
    const w2 = run.start('w2', { via: null, ...common });
    const w3 = run.start('w3', { via: null, ...common });
    const w4 = run.start('w4', { via: null, ...common });
    const progressAt = async (share: number) => {
      // Bounded: the run timeout, polled every 50 ms.
      for (let i = 0; i < run.context.plan.runTimeoutMs / 50; i++) {
        if ((await run.countDone(monitor)) >= jobs * share) return;
        await sleep(50);
      }
      throw new Error(`the run never reached ${share * 100}% done`);
    };
    const injected = (async () => {
      await progressAt(0.1);
      run.topology.partition('w2');
      const partitionedAt = performance.now();
      await progressAt(0.2);
      for (const pid of run.topology.pids('w3')) killed.add(pid);
      faults.killed = run.topology.killAll('w3');
      for (let i = 0; i < drops; i++) {
        faults.dropped += await sidecar.drop();
        faults.drops++;
        await sleep(300);
      }
      // The partition outlasts the lease by half again, so every claim w2 held is taken over meanwhile.
      await sleep(Math.max(0, partitionedAt + leaseMs * 2.5 - performance.now()));
      run.topology.heal('w2');
      faults.partitionedSeconds = round((performance.now() - partitionedAt) / 1000, 1);
    })();
    await run.finish([w1, w2, w4], injected);
    await w3.exited;
    const hosts = [w1, w2, w3, w4];
    for (const h of hosts) faults.claimsTakenOver[h.host] = h.counters().reduce((sum, c) => sum + c.counters.claimLost, 0);
    const record = await run.conclude({ scenario: 'faults', dialect: run.database.dialect, hosts: 4, processes, concurrency, batch: concurrency, addedRttMs: 0, jobs, faults }, hosts, measure(), killed);
    run.context.log(
      `faults: ${faults.drops} drops (${faults.dropped} connections), w2 partitioned ${faults.partitionedSeconds} s, w3 killed (${faults.killed} processes): ` +
        `re-runs ${record.ledger.reRuns} (${record.ledger.reRunsAfterDeath} after the kill, ${record.ledger.reRunsFenced} fenced), proof holds`,
    );
  } finally {
    sidecar.stop();
    await monitor.close();
  }
}
