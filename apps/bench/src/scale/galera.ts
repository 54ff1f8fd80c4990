/**
 * Scale-out on a MariaDB Galera cluster: three nodes (hosts db1, db2, db3, each a private server in a
 * namespace of its own, replicating over the run's bridge) and three worker hosts, each reaching the cluster
 * through a haproxy of its own (balancer.ts) that prefers one node and falls back to the others.
 *
 * Galera certifies each transaction at commit against the others the cluster ordered before it, and shares no
 * row locks between nodes: two workers on different nodes can both lock and claim the same pending row, and
 * the later commit fails certification (the client sees a deadlock, 1213, at COMMIT). The guarded claim and
 * the fenced settle must keep every job exactly-once through that, and the conflicts must be retried (with
 * backoff) rather than reported. The runs:
 *   one node:  every worker host's balancer prefers db1 (the others only as backups): the baseline.
 *   spread:    w1 prefers db1, w2 db2, w3 db3: writes on every node, so conflicts between nodes.
 *   node kill: spread, and db2 SIGKILLed at 30% done; w2's balancer moves its workers to db3; db2 is started
 *              again and rejoins (state transfer) while the run goes on.
 * Each is proved from the ledger; conflicts are the servers' own counts (wsrep_local_cert_failures +
 * wsrep_local_bf_aborts, summed over the nodes).
 *
 * How workers find another node when theirs dies: a TCP balancer, the standard Galera deployment, and no
 * product change (a statusq URL names one address, the balancer's). Its connect check takes a killed node out
 * within about 0.6 s, a connect the dead node refuses before that is redispatched to a backup, and the store's
 * pool drops its lost connections and connects again through it. A host list in the adapter would redo this
 * for statusq alone and know less (no health checks). In production the check should also ask the node
 * whether it is Synced (a clustercheck-style HTTP check on wsrep_local_state), so a node that is up but
 * joining, or cut off from the primary component, takes no new connections; one that does anyway answers
 * 1047, which the adapter treats as a lost connection, so the worker reconnects.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Store } from '@statusq/core';
import { openBenchDatabaseAt, type BenchDatabase } from '../databases.js';
import { Balancer } from './balancer.js';
import { WORKER_ACCOUNT } from './db-host.js';
import { GaleraCluster, NODES, type NodeName } from './galera-cluster.js';
import type { ScaleContext, ScaleRecord, ScaleSection } from './records.js';
import { RunKit, round } from './run-kit.js';
import { proof, table } from './scale-report.js';
import { Topology } from './topology.js';
import type { WorkerHost } from './worker-hosts.js';

const WORKERS = ['w1', 'w2', 'w3'] as const;
const SCENARIO = 'galera';
const STALL_POLL_MS = 100;

interface GaleraPlan {
  processes: number;
  concurrency: number;
  jobs: number;
  /**
   * The node-kill run: more rows, so the killed node can rejoin while it runs; a lease longer than the time
   * every commit in the cluster waits for the dead node to be evicted (about 6 s with Galera's defaults).
   */
  kill: { jobs: number; leaseMs: number; at: number };
  /**
   * The isolation run (full plan only: it adds half a minute): db2 cut off from the other nodes but not from
   * its clients for `holdMs` after its eviction, then let back in.
   */
  isolate: { jobs: number; leaseMs: number; at: number; holdMs: number } | null;
  runTimeoutMs: number;
}

const FULL_PLAN: GaleraPlan = {
  processes: 2,
  concurrency: 8,
  jobs: 6000,
  kill: { jobs: 20_000, leaseMs: 15_000, at: 0.3 },
  isolate: { jobs: 20_000, leaseMs: 15_000, at: 0.3, holdMs: 4000 },
  runTimeoutMs: 180_000,
};

const QUICK_PLAN: GaleraPlan = {
  processes: 1,
  concurrency: 8,
  jobs: 1000,
  kill: { jobs: 3000, leaseMs: 15_000, at: 0.3 },
  isolate: null,
  runTimeoutMs: 60_000,
};

type Layout = 'one node' | 'spread' | 'spread, node killed' | 'spread, node isolated';

export const galera: ScaleSection = {
  names: [SCENARIO],
  run: runGalera,
  markdown(records) {
    const runs = records.filter((r) => r.scenario === SCENARIO);
    if (runs.length === 0) return null;
    return ['### MariaDB Galera (three nodes)', '', galeraTable(runs), '', findings(runs), ''].join('\n');
  },
};

async function runGalera(context: ScaleContext): Promise<void> {
  if (!context.only.includes(SCENARIO)) return;
  if (!context.dialects.includes('mysql')) {
    context.log('galera: skipped (MariaDB only; --dialects has no mysql)');
    return;
  }
  const chosen = context.quick ? QUICK_PLAN : FULL_PLAN;
  const topology = Topology.create([...NODES, ...WORKERS]);
  const scratch = mkdtempSync(join(tmpdir(), 'statusq-galera-'));
  let cluster: GaleraCluster | null = null;
  let bench: BenchDatabase | null = null;
  try {
    const formed = performance.now();
    cluster = await GaleraCluster.start(topology);
    context.log(`${cluster.version}: three nodes synced in ${((performance.now() - formed) / 1000).toFixed(1)} s (${NODES.map((n) => `${n} ${topology.address(n)}`).join(', ')})`);
    bench = await openBenchDatabaseAt('mysql', cluster.adminUrl);
    const run = new RunKit(context, topology, cluster, bench, scratch, chosen.runTimeoutMs);
    await galeraRun(run, cluster, chosen, 'one node', scratch);
    await galeraRun(run, cluster, chosen, 'spread', scratch);
    await galeraRun(run, cluster, chosen, 'spread, node killed', scratch);
    if (chosen.isolate) await galeraRun(run, cluster, chosen, 'spread, node isolated', scratch);
  } finally {
    await bench?.close().catch(() => undefined);
    await cluster?.stop().catch(() => undefined);
    topology.destroy();
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Which node each worker host's balancer prefers; the other two are its backups, in cluster order. */
function preferredNodes(layout: Layout): Record<(typeof WORKERS)[number], NodeName> {
  return layout === 'one node' ? { w1: 'db1', w2: 'db1', w3: 'db1' } : { w1: 'db1', w2: 'db2', w3: 'db3' };
}

async function galeraRun(run: RunKit, cluster: GaleraCluster, plan: GaleraPlan, layout: Layout, scratch: string): Promise<void> {
  const killing = layout === 'spread, node killed';
  const isolating = layout === 'spread, node isolated' ? plan.isolate : null;
  const fault = killing ? plan.kill : isolating;
  const jobs = fault?.jobs ?? plan.jobs;
  const { processes, concurrency } = plan;
  const preferred = preferredNodes(layout);
  const runDir = await run.fresh(jobs);
  // The table's creation must reach every node before a worker reads it there.
  await cluster.caughtUp();
  const balancers: Balancer[] = [];
  const monitor = await run.bench.connect();
  const extra: NonNullable<ScaleRecord['extra']> = { topology: layout };
  try {
    for (const host of WORKERS) {
      const first = cluster.target(preferred[host]);
      const backups = NODES.filter((n) => n !== preferred[host]).map((n) => cluster.target(n));
      balancers.push(await Balancer.start(run.topology, host, first, backups, scratch, WORKER_ACCOUNT));
    }
    const conflictsBefore = await cluster.conflicts();
    const measure = run.measure();
    const hosts: WorkerHost[] = WORKERS.map((host, i) =>
      run.start(host, {
        via: null,
        url: run.urlFor(null, balancers[i]!.local),
        processes,
        concurrency,
        batch: concurrency,
        leaseMs: fault?.leaseMs ?? 30_000,
        workMs: 0,
        runDir,
      }),
    );
    const injected = killing
      ? killAndRejoin(run, cluster, monitor, jobs, plan.kill.at, extra)
      : isolating
        ? isolateAndHeal(run, cluster, monitor, jobs, isolating, extra)
        : Promise.resolve();
    await run.finish(hosts, injected);
    await cluster.caughtUp();
    const measured = measure();
    const conflicts = (await cluster.conflicts()) - conflictsBefore;
    extra.conflicts = conflicts;
    extra.conflictsPer1000 = round((conflicts / jobs) * 1000, 1);
    const record = await run.conclude({ scenario: SCENARIO, dialect: 'mysql', hosts: WORKERS.length, processes, concurrency, batch: concurrency, addedRttMs: 0, jobs, extra }, hosts, measured, new Set());
    run.context.log(
      `galera, ${layout}: ${record.jobsPerSec} jobs/s, ${conflicts} certification conflicts (${extra.conflictsPer1000} per 1,000 jobs), server ${record.serverCores} cores, ` +
        `re-runs ${record.ledger.reRuns}${fault ? `; db2 ${killing ? 'killed' : 'isolated'} at ${extra.faultAtDonePercent}% done, evicted after ${extra.evictedSeconds} s (no job done for ${extra.longestStallSeconds} s), synced again ${extra.rejoinSeconds} s after its ${killing ? 'restart' : 'return'} at ${extra.rejoinedAtDonePercent}% done` : ''}` +
        `${isolating ? `; ${extra.connectionsWhileIsolated} connections made to it while isolated` : ''}, proof holds`,
    );
  } finally {
    await monitor.close();
    for (const balancer of balancers) await balancer.stop();
  }
}

/**
 * At `share` done, SIGKILLs db2; once the others have evicted it (their view drops to two nodes), starts it again
 * as Debian's service would and waits until it is synced. Records when each happened, and how long no job
 * completed anywhere after the kill (Galera holds every commit until the dead node is evicted).
 */
async function killAndRejoin(run: RunKit, cluster: GaleraCluster, monitor: Store, jobs: number, share: number, extra: NonNullable<ScaleRecord['extra']>): Promise<void> {
  await run.progressAt(monitor, jobs, share);
  extra.faultAtDonePercent = Math.round(((await run.countDone(monitor)) / jobs) * 100);
  await cluster.kill('db2');
  const killedAt = performance.now();
  const stall = watchStall(run, monitor, jobs);
  await cluster.evicted('db2');
  extra.evictedSeconds = round((performance.now() - killedAt) / 1000, 1);
  const restartedAt = performance.now();
  await cluster.rejoin('db2');
  extra.rejoinSeconds = round((performance.now() - restartedAt) / 1000, 1);
  extra.rejoinedAtDonePercent = Math.round(((await run.countDone(monitor)) / jobs) * 100);
  extra.longestStallSeconds = round(await stall.stop(), 1);
}

/**
 * At `share` done, cuts db2 off from the other two nodes but not from its clients (gmcast.isolate: its group
 * connections close), keeps it so for `holdMs` after they have evicted it, then lets it back. Meanwhile it is
 * up and outside the primary component: it answers 1047 to every statement, and the balancer's connect check
 * still passes, so w2's workers keep reaching it, the case the adapter's 1047 mapping is for.
 */
async function isolateAndHeal(run: RunKit, cluster: GaleraCluster, monitor: Store, jobs: number, plan: NonNullable<GaleraPlan['isolate']>, extra: NonNullable<ScaleRecord['extra']>): Promise<void> {
  await run.progressAt(monitor, jobs, plan.at);
  extra.faultAtDonePercent = Math.round(((await run.countDone(monitor)) / jobs) * 100);
  const connectionsBefore = await cluster.connections('db2');
  await cluster.isolate('db2', true);
  const isolatedAt = performance.now();
  const stall = watchStall(run, monitor, jobs);
  await cluster.evicted('db2');
  extra.evictedSeconds = round((performance.now() - isolatedAt) / 1000, 1);
  // The outage's planned length, not a wait for something to happen.
  await sleep(plan.holdMs);
  // Each refusal (1047) drops its connection and the retry connects again, through the balancer, to db2.
  extra.connectionsWhileIsolated = (await cluster.connections('db2')) - connectionsBefore;
  await cluster.isolate('db2', false);
  extra.isolatedSeconds = round((performance.now() - isolatedAt) / 1000, 1);
  const returnedAt = performance.now();
  await cluster.synced('db2');
  extra.rejoinSeconds = round((performance.now() - returnedAt) / 1000, 1);
  extra.rejoinedAtDonePercent = Math.round(((await run.countDone(monitor)) / jobs) * 100);
  extra.longestStallSeconds = round(await stall.stop(), 1);
}

/** The longest stretch, from now until stopped, in which the count of done rows did not grow (polled every 100 ms). */
function watchStall(run: RunKit, monitor: Store, jobs: number): { stop(): Promise<number> } {
  let stopped = false;
  const watching = (async () => {
    let longest = 0;
    let lastDone = -1;
    let since = performance.now();
    while (!stopped && performance.now() - since < run.runTimeoutMs) {
      const done = await run.countDone(monitor);
      const now = performance.now();
      if (done !== lastDone || done >= jobs) {
        lastDone = done;
        since = now;
      }
      longest = Math.max(longest, (now - since) / 1000);
      await sleep(STALL_POLL_MS);
    }
    return longest;
  })();
  return {
    stop: async () => {
      stopped = true;
      return watching;
    },
  };
}

function galeraTable(runs: readonly ScaleRecord[]): string {
  const rows = runs.map((r) => {
    const e = r.extra ?? {};
    const killed =
      e.topology === 'spread, node killed'
        ? ` (db2 SIGKILLed at ${e.faultAtDonePercent}% done; no job done for ${e.longestStallSeconds} s; restarted once evicted, synced ${e.rejoinSeconds} s later, at ${e.rejoinedAtDonePercent}% done)`
        : e.topology === 'spread, node isolated'
          ? ` (db2 cut off from the other nodes at ${e.faultAtDonePercent}% done for ${e.isolatedSeconds} s, answering 1047 to its workers (${e.connectionsWhileIsolated} connections made to it meanwhile); no job done for ${e.longestStallSeconds} s; synced ${e.rejoinSeconds} s after its return)`
          : '';
    return [`${String(e.topology)}${killed}`, `${r.hosts} x ${r.processes} x ${r.concurrency}`, r.jobs, r.jobsPerSec.toLocaleString('en-US'), String(e.conflictsPer1000 ?? '-'), r.serverCores, `${r.ledger.reRuns} (${r.ledger.reRunsFenced} fenced)`, proof(r)];
  });
  return table(['workers write through', 'hosts x processes x slots', 'jobs', 'jobs/s', 'certification conflicts per 1,000 jobs', 'server CPU (cores, 3 nodes)', 're-runs', 'ledger proof'], rows);
}

/** The measured findings, from the runs themselves (the lead edits the prose around them in docs/scale-out.md). */
function findings(runs: readonly ScaleRecord[]): string {
  const of = (layout: Layout) => runs.find((r) => r.extra?.topology === layout);
  const one = of('one node');
  const spread = of('spread');
  const killed = of('spread, node killed');
  const isolated = of('spread, node isolated');
  const parts: string[] = [];
  if (one && spread) {
    const ratio = one.jobsPerSec > 0 ? round(spread.jobsPerSec / one.jobsPerSec, 2) : 0;
    parts.push(
      `All workers writing through one node: ${one.jobsPerSec.toLocaleString('en-US')} jobs/s, ${one.extra?.conflictsPer1000} certification conflicts per 1,000 jobs. ` +
        `Workers spread over the three nodes: ${spread.jobsPerSec.toLocaleString('en-US')} jobs/s (${ratio}x), ${spread.extra?.conflictsPer1000} conflicts per 1,000 jobs, ` +
        'each a claim or settle rolled back at COMMIT (a deadlock error) and retried with backoff; every node applies every write set, so spreading adds conflicts rather than write capacity.',
    );
  }
  if (killed) {
    const e = killed.extra ?? {};
    parts.push(
      `db2 SIGKILLed at ${e.faultAtDonePercent}% done: no job completed anywhere for ${e.longestStallSeconds} s (Galera holds every commit until the others evict the dead node, ${e.evictedSeconds} s here), ` +
        `w2's haproxy moved its workers to db3, and db2, restarted after its position was recovered, caught up by IST and was synced ${e.rejoinSeconds} s later; ` +
        `${killed.ledger.reRuns} re-runs, every job done exactly once.`,
    );
  }
  if (isolated) {
    const e = isolated.extra ?? {};
    parts.push(
      `db2 cut off from the other nodes for ${e.isolatedSeconds} s but still reachable: its workers' connect check kept sending them to it, every statement there was refused (1047) and retried on a new connection (${e.connectionsWhileIsolated} connections made to it meanwhile), ` +
        `and they did no work until db2 was back (synced ${e.rejoinSeconds} s after); ${isolated.ledger.reRuns} re-runs, every job done exactly once.`,
    );
  }
  parts.push(
    'Recommended: a haproxy in front of the cluster with one node preferred by every worker and the other two as backups (no claim races across nodes; a node failure is a reconnect), ' +
      'its health check asking the node whether it is Synced rather than only connecting, and leases longer than the eviction stall.',
  );
  return parts.join(' ');
}
