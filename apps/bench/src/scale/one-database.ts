/**
 * Scale-out against one database host: worker hosts (network namespaces of the run's own) running `statusq work
 * --processes P` against a MariaDB or PostgreSQL server of the run's own, with the exactly-once ledger proof
 * after each run.
 *   hosts:   1, 2, 4 worker hosts against one database: jobs/s, claims lost to other workers, server CPU.
 *   latency: added round-trip time between the workers and the database, against the claim batch size.
 *   faults:  one host's connections dropped again and again, one host partitioned for longer than the lease
 *            (its late settles must be refused), one host killed outright, all in one run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openBenchDatabaseAt, type BenchDatabase } from '../databases.js';
import { startDatabaseHost, type DatabaseHost } from './db-host.js';
import type { ScaleContext, ScaleSection } from './records.js';
import { RunKit, round } from './run-kit.js';
import { faultsTable, hostsChart, hostsTable, latencyChart, latencyTable } from './scale-report.js';
import { Sidecar } from './sidecar.js';
import { Topology } from './topology.js';

interface OneDatabasePlan {
  hosts: { hostCounts: number[]; processes: number; concurrency: number; jobs: number };
  /** Timed runs (a slow link would take minutes over a fixed count): rows enough for the fastest, stopped after durationMs. */
  latency: { hosts: number; concurrency: number; delaysMs: number[]; batches: number[]; jobs: number; durationMs: number };
  faults: { processes: number; concurrency: number; jobs: number; leaseMs: number; workMs: number; drops: number };
  /** Longest one run may take before it is stopped and reported as failed. */
  runTimeoutMs: number;
}

const FULL_PLAN: OneDatabasePlan = {
  // 150,000 rows: at 30,000 a run lasted about 6 s, and eight worker processes starting on the machine's two
  // cores took enough of it that 4 hosts read 0.76-0.88x of 1 (2026-12-06); at 150,000, 0.90-1.03x.
  hosts: { hostCounts: [1, 2, 4], processes: 2, concurrency: 16, jobs: 150_000 },
  latency: { hosts: 2, concurrency: 128, delaysMs: [0, 5, 20, 50], batches: [1, 16, 128], jobs: 80_000, durationMs: 6000 },
  faults: { processes: 2, concurrency: 16, jobs: 12_000, leaseMs: 2000, workMs: 10, drops: 8 },
  runTimeoutMs: 180_000,
};

const QUICK_PLAN: OneDatabasePlan = {
  hosts: { hostCounts: [1, 2], processes: 1, concurrency: 8, jobs: 2000 },
  latency: { hosts: 1, concurrency: 64, delaysMs: [0, 20], batches: [1, 64], jobs: 20_000, durationMs: 1500 },
  faults: { processes: 2, concurrency: 8, jobs: 3000, leaseMs: 2000, workMs: 10, drops: 4 },
  runTimeoutMs: 120_000,
};

const NAMES = ['hosts', 'latency', 'faults'] as const;

function plan(run: RunKit): OneDatabasePlan {
  return run.context.quick ? QUICK_PLAN : FULL_PLAN;
}

export const oneDatabase: ScaleSection = {
  names: NAMES,
  run: runOneDatabase,
  markdown(records) {
    const parts: string[] = [];
    if (records.some((r) => r.scenario === 'hosts')) parts.push('### Worker hosts against one database host', '', hostsTable(records), '', '![jobs/s by worker hosts](scale-out/hosts.svg)', '');
    if (records.some((r) => r.scenario === 'latency')) parts.push('### Round-trip latency against the claim batch size', '', latencyTable(records), '', '![jobs/s by added latency and batch size](scale-out/latency.svg)', '');
    if (records.some((r) => r.scenario === 'faults')) parts.push('### Faults: dropped connections, a partition longer than the lease, a killed host', '', faultsTable(records), '');
    return parts.length > 0 ? parts.join('\n') : null;
  },
  charts: (records) => ({ 'hosts.svg': hostsChart(records), 'latency.svg': latencyChart(records) }),
};

/** The scenarios of `context.only` it has, on every dialect; each dialect gets a fresh topology and database host. */
async function runOneDatabase(context: ScaleContext): Promise<void> {
  const wanted = NAMES.filter((name) => context.only.includes(name));
  if (wanted.length === 0) return;
  const chosen = context.quick ? QUICK_PLAN : FULL_PLAN;
  for (const dialect of context.dialects) {
    const hostCount = Math.max(...chosen.hosts.hostCounts, chosen.latency.hosts, 4); // the fault run uses four
    const names = Array.from({ length: hostCount }, (_, i) => `w${i + 1}`);
    const topology = Topology.create(['db', ...names]);
    let database: DatabaseHost | null = null;
    let bench: BenchDatabase | null = null;
    const ledgerDir = mkdtempSync(join(tmpdir(), 'statusq-scale-'));
    try {
      database = await startDatabaseHost(dialect, topology, 'db');
      bench = await openBenchDatabaseAt(dialect, database.adminUrl);
      context.log(`${database.version} on host db (${database.address.host}), worker hosts ${names.join(', ')}`);
      const run = new RunKit(context, topology, database, bench, ledgerDir, chosen.runTimeoutMs);
      if (wanted.includes('hosts')) await hostsScenario(run);
      if (wanted.includes('latency')) await latencyScenario(run);
      if (wanted.includes('faults')) await faultsScenario(run);
    } finally {
      await bench?.close().catch(() => undefined);
      await database?.stop().catch(() => undefined);
      topology.destroy();
      rmSync(ledgerDir, { recursive: true, force: true });
    }
  }
}

async function hostsScenario(run: RunKit): Promise<void> {
  const { hostCounts, processes, concurrency, jobs } = plan(run).hosts;
  for (const count of hostCounts) {
    const runDir = await run.fresh(jobs);
    const measure = run.measure();
    const hosts = Array.from({ length: count }, (_, i) => run.start(`w${i + 1}`, { via: null, processes, concurrency, batch: concurrency, leaseMs: 30_000, workMs: 0, runDir }));
    await run.finish(hosts);
    const record = await run.conclude({ scenario: 'hosts', dialect: run.database.dialect, hosts: count, processes, concurrency, batch: concurrency, addedRttMs: 0, jobs }, hosts, measure(), new Set());
    run.context.log(`hosts ${count} x ${processes} processes x ${concurrency}: ${record.jobsPerSec} jobs/s, lost candidates ${record.candidatesLost}, ${record.claimCalls} claims, server ${record.serverCores} cores, workers ${record.workersCores ?? '?'} cores, re-runs ${record.ledger.reRuns}`);
  }
}

async function latencyScenario(run: RunKit): Promise<void> {
  const { hosts: hostCount, concurrency, delaysMs, batches, jobs, durationMs } = plan(run).latency;
  const names = Array.from({ length: hostCount }, (_, i) => `w${i + 1}`);
  const sidecars: Sidecar[] = [];
  const monitor = await run.bench.connect();
  try {
    for (const name of names) sidecars.push(await Sidecar.start(run.topology, name, run.database.address));
    for (const delayMs of delaysMs) {
      for (const sidecar of sidecars) await sidecar.delay(delayMs);
      for (const batch of batches) {
        const runDir = await run.fresh(jobs);
        const measure = run.measure();
        const hosts = names.map((name, i) => run.start(name, { via: sidecars[i]!, processes: 1, concurrency, batch, leaseMs: 30_000, workMs: 0, runDir }));
        // The run lasts durationMs from its first finished row (process start-up is not part of it); the stop
        // is its planned end, not a wait for something to happen.
        const stopAt = run
          .progressAt(monitor, 1, 1)
          .then(() => sleep(durationMs))
          .then(() => hosts.forEach((h) => h.stop()));
        await run.finish(hosts, stopAt);
        const record = await run.conclude({ scenario: 'latency', dialect: run.database.dialect, hosts: hostCount, processes: 1, concurrency, batch, addedRttMs: delayMs, jobs }, hosts, measure(), new Set(), true);
        run.context.log(`latency +${delayMs} ms, batch ${batch}: ${record.jobsPerSec} jobs/s`);
      }
    }
  } finally {
    for (const sidecar of sidecars) sidecar.stop();
    await monitor.close();
  }
}

/**
 * One run, four hosts: w1's connections are cut every few hundred milliseconds (through its sidecar), w2 is
 * partitioned for two and a half leases from a tenth of the way in, w3 is killed (every process, SIGKILL) a
 * fifth of the way in, w4 works undisturbed. The run ends when every host has exited (w3 never will: it is
 * dead), and the proof must hold.
 */
async function faultsScenario(run: RunKit): Promise<void> {
  const { processes, concurrency, jobs, leaseMs, workMs, drops } = plan(run).faults;
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
    const progressAt = (share: number) => run.progressAt(monitor, jobs, share);
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
