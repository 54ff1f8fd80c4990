/**
 * PostgreSQL failover to a streaming standby, the way a floating address does it: the primary (host pg1) and a
 * standby made from it with pg_basebackup -R (host pg2) stream WAL; the worker hosts w1 and w2 reach the
 * database through a service address that lives on pg1. A third of the way into a run the primary is killed
 * (SIGKILL, every process of it), the address leaves pg1, the standby is promoted, the address moves to pg2 and
 * pg2 announces it with gratuitous ARP, as keepalived or a cloud's floating IP would. The workers ride it out
 * on their own (their connections fail, they reconnect to the same address) and the run must end with every row
 * done.
 *
 * Each run is made with asynchronous replication, where the promoted node may lack commits the primary had
 * acknowledged (a finished row comes back as processing or pending and runs again, proved by the ledger variant
 * for lost commits), and with synchronous (the standby in synchronous_standby_names), where the default proof
 * must hold; and each pair once per replication link of the plan: the standby streaming straight from the
 * primary, or through a proxy that delays the stream, as a standby further away (what it holds dies with the
 * primary).
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { withClient } from '@statusq/adapter-postgres/testing';
import { TcpProxy, waitFor } from '@statusq/conformance';
import type pg from 'pg';
import { openBenchDatabaseAt, type BenchDatabase } from '../databases.js';
import { allowOwnHost } from '../limits.js';
import { startPostgresHost, type DatabaseHost } from './db-host.js';
import type { ScaleContext, ScaleRecord, ScaleSection } from './records.js';
import { RunKit, TABLE, round, type RunDatabase } from './run-kit.js';
import { table } from './scale-report.js';
import { Topology, killPids } from './topology.js';
import type { WorkerHost } from './worker-hosts.js';

type ReplicationMode = 'async' | 'sync';

interface FailoverPlan {
  /**
   * One-way delays of the replication link the runs are repeated with (each mode once per value). 0: the
   * standby streams straight from the primary over the bridge. Above 0, the WAL stream and the standby's replies
   * pass a proxy in the harness that holds them back this long, standing for a standby further away or behind;
   * what the proxy still holds when the primary dies is lost with it. The proxy adds its own scheduling delay
   * on a busy machine, so the lag is at least this.
   */
  linkDelaysMs: number[];
  /** Per worker host (two of them). */
  processes: number;
  concurrency: number;
  jobs: number;
  /** A row whose settle the failover lost waits this long in processing before another worker takes it over. */
  leaseMs: number;
  workMs: number;
  /** Longest one run may take before it is stopped and reported as failed. */
  runTimeoutMs: number;
}

const FULL_PLAN: FailoverPlan = { linkDelaysMs: [0, 2], processes: 2, concurrency: 8, jobs: 5000, leaseMs: 3000, workMs: 5, runTimeoutMs: 180_000 };
// A bound, not a measurement: a run takes 5-10 s alone; beside the benchmark one took more than 45 s.
const QUICK_PLAN: FailoverPlan = { linkDelaysMs: [2], processes: 1, concurrency: 8, jobs: 1000, leaseMs: 2000, workMs: 5, runTimeoutMs: 90_000 };

const NAME = 'failover';
const MODES: readonly ReplicationMode[] = ['async', 'sync'];
/** Where in the run the primary dies: the share of rows done. */
const KILL_AT = 0.3;
/** The service address's last octet in the topology's subnet (hosts take 1, 2, ...). */
const SERVICE_OCTET = 100;
/** The harness's own address on the topology's bridge (topology.ts). */
const BRIDGE_OCTET = 254;
/** Bounds of the set-up and failover steps: each is a local server answering within a second or two. */
const STREAMING_TIMEOUT_MS = 30_000;
const KILL_TIMEOUT_MS = 10_000;
const PROMOTE_TIMEOUT_S = 30;
const CONNECT_TIMEOUT_MS = 5000;
const MODE_NAMES: Record<ReplicationMode, string> = { async: 'asynchronous', sync: 'synchronous (synchronous_commit = on)' };

export const failover: ScaleSection = {
  names: [NAME],
  run: runFailover,
  markdown(records) {
    const runs = records.filter((r) => r.scenario === NAME);
    if (runs.length === 0) return null;
    return ['### PostgreSQL failover to a streaming standby', '', failoverTable(runs), '', failoverFindings(runs), ''].join('\n');
  },
};

async function runFailover(context: ScaleContext): Promise<void> {
  if (!context.only.includes(NAME)) return;
  if (!context.dialects.includes('postgres')) {
    context.log('failover: skipped (PostgreSQL only, and postgres is not among --dialects)');
    return;
  }
  const plan = context.quick ? QUICK_PLAN : FULL_PLAN;
  for (const delayMs of plan.linkDelaysMs) for (const mode of MODES) await failoverRun(context, plan, mode, delayMs);
}

/** One run on a topology of its own: after a failover the old primary is gone, so each mode starts from a fresh pair. */
async function failoverRun(context: ScaleContext, plan: FailoverPlan, mode: ReplicationMode, delayMs: number): Promise<void> {
  const topology = Topology.create(['pg1', 'pg2', 'w1', 'w2']);
  const service = `${topology.subnet}.${SERVICE_OCTET}`;
  allowOwnHost(service);
  const ledgerDir = mkdtempSync(join(tmpdir(), 'statusq-scale-failover-'));
  let primary: DatabaseHost | null = null;
  let standby: DatabaseHost | null = null;
  let bench: BenchDatabase | null = null;
  let replicationLink: TcpProxy | null = null;
  try {
    primary = await startPostgresHost(topology, 'pg1', { listenOnEveryAddress: true, allowReplication: true });
    topology.addAddress('pg1', service);
    // The harness holds the bridge's address, which both database hosts reach; the base backup goes through the
    // link too, so the standby's primary_conninfo (pg_basebackup -R) names it.
    if (delayMs > 0) replicationLink = await TcpProxy.start(primary.address, { host: `${topology.subnet}.${BRIDGE_OCTET}`, port: 0 });
    const upstream = replicationLink ? { host: `${topology.subnet}.${BRIDGE_OCTET}`, port: replicationLink.port } : primary.address;
    standby = await startPostgresHost(topology, 'pg2', { listenOnEveryAddress: true, allowReplication: true, standbyOf: upstream });
    const primaryUrl = primary.adminUrl;
    if (mode === 'sync') await requireSynchronousStandby(primaryUrl);
    await waitForStreaming(primaryUrl, mode);
    replicationLink?.delay(delayMs);
    const port = primary.address.port;
    const serviceUrl = new URL(primaryUrl);
    serviceUrl.hostname = service;
    bench = await openBenchDatabaseAt('postgres', serviceUrl.toString());
    const pair = new ServerPair(primary, standby, replicationLink, { host: service, port });
    context.log(`failover (${mode}, replication link +${delayMs} ms): ${primary.version}, primary on pg1 (${primary.address.host}), standby on pg2 (${standby.address.host}), service address ${service}`);
    const run = new RunKit(context, topology, pair, bench, ledgerDir, plan.runTimeoutMs);
    await failoverScenario(run, plan, mode, delayMs, pair);
  } finally {
    await replicationLink?.close().catch(() => undefined);
    await bench?.close().catch(() => undefined);
    await standby?.stop().catch(() => undefined);
    await primary?.stop().catch(() => undefined);
    topology.destroy();
    rmSync(ledgerDir, { recursive: true, force: true });
  }
}

/** The primary and its standby as one database for RunKit: workers reach the service address; CPU is both servers'. */
class ServerPair implements RunDatabase {
  readonly dialect = 'postgres';
  readonly version: string;
  /** The primary's CPU seconds when it was killed (its /proc entries go with it). */
  private primaryCpuAtKill: number | null = null;

  constructor(
    readonly primary: DatabaseHost,
    readonly standby: DatabaseHost,
    /** The proxy the standby streams through when the link has a lag, else null (it streams straight from the primary). */
    readonly replicationLink: TcpProxy | null,
    readonly address: { host: string; port: number },
  ) {
    this.version = primary.version;
  }

  cpuSeconds(): number {
    return (this.primaryCpuAtKill ?? this.primary.cpuSeconds()) + this.standby.cpuSeconds();
  }

  /** Call just before killing the primary. */
  notePrimaryKilled(): void {
    this.primaryCpuAtKill = this.primary.cpuSeconds();
  }
}

/**
 * Set on the primary alone, after the base backup (so the standby does not inherit it: promoted, it would wait
 * for a standby of its own), through ALTER SYSTEM because a command-line setting could not be changed later.
 */
async function requireSynchronousStandby(primaryUrl: string): Promise<void> {
  await withClient(
    primaryUrl,
    async (c) => {
      await c.query(`ALTER SYSTEM SET synchronous_standby_names = '*'`);
      await c.query('ALTER SYSTEM SET synchronous_commit = on');
      await c.query('SELECT pg_reload_conf()');
    },
    CONNECT_TIMEOUT_MS,
  );
}

/** Waits until the primary sees its standby streaming, and for a synchronous run, as its synchronous standby. */
async function waitForStreaming(primaryUrl: string, mode: ReplicationMode): Promise<void> {
  await withClient(
    primaryUrl,
    (c) =>
      waitFor(
        `the standby to stream from the primary${mode === 'sync' ? ' as its synchronous standby' : ''}`,
        async () => {
          const { rows } = await c.query<{ state: string; sync_state: string }>('SELECT state, sync_state FROM pg_stat_replication');
          return rows.some((r) => r.state === 'streaming' && r.sync_state === mode);
        },
        { timeoutMs: STREAMING_TIMEOUT_MS, intervalMs: 50 },
      ),
    CONNECT_TIMEOUT_MS,
  );
}

/** Rows done, read on one server directly (not through the service address). */
async function countDone(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ n: string }>(`SELECT count(*) AS n FROM "${TABLE}" WHERE status = 1`);
  return Number(rows[0]?.n ?? 0);
}

/** Each ledger's size now: the runs logged so far (see readLedgers' failoverCut). */
function ledgerSizes(hosts: readonly WorkerHost[]): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const host of hosts) {
    let size = 0;
    try {
      size = statSync(host.ledgerPath).size;
    } catch {
      // Nothing run on this host yet.
    }
    sizes.set(host.ledgerPath, size);
  }
  return sizes;
}

interface FailoverOutcome {
  failoverSeconds: number;
  /** From the kill to the service address on the promoted standby (the HA manager's part). */
  addressMovedSeconds: number;
  /**
   * How far behind the standby was just before the kill, by the primary's last look at pg_stat_replication: WAL
   * it had not confirmed written (bytes), and the time its last confirmed write took to be confirmed (write_lag).
   */
  standbyBehind: { bytes: number; writeLagMs: number | null };
  cut: Map<string, number>;
  killed: number;
}

/**
 * The failover, in the order an HA manager runs it: the primary dies (all its processes, as a crashed machine),
 * its address is taken off, the standby is promoted, the address is added to the standby's host and announced.
 * Its duration runs from the kill to the first settle the new primary commits.
 */
async function failOver(run: RunKit, pair: ServerPair, hosts: readonly WorkerHost[]): Promise<FailoverOutcome> {
  const { topology } = run;
  const service = pair.address.host;
  const standbyUrl = pair.standby.adminUrl;
  const standbyBehind = await withClient(
    pair.primary.adminUrl,
    async (c) => {
      const { rows } = await c.query<{ bytes: string | null; lag_ms: number | null }>(
        'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), write_lsn) AS bytes, extract(epoch FROM write_lag)::float8 * 1000 AS lag_ms FROM pg_stat_replication',
      );
      const row = rows[0];
      return { bytes: Number(row?.bytes ?? 0), writeLagMs: row?.lag_ms === null || row?.lag_ms === undefined ? null : round(row.lag_ms, 1) };
    },
    CONNECT_TIMEOUT_MS,
  );
  pair.notePrimaryKilled();
  // Listed without blocking: the harness's event loop carries the lagging replication link, and a blocking
  // listing would hold the stream back (and then drop it) for as long as it takes, inflating the lag.
  const listed = await topology.listPids('pg1');
  const killedAt = performance.now();
  // In the same tick (no data event runs between them): the WAL the lagging link still holds dies with the primary.
  killPids(listed);
  pair.replicationLink?.dropAll();
  // A backend forked after the listing (a pool opening a connection) must not outlive its primary either.
  const killed = listed.length + topology.killAll('pg1');
  // A backend that outlived the postmaster could still answer on the address; none may be left when it moves.
  await waitFor('every process of the primary to be gone', () => topology.pids('pg1').length === 0, { timeoutMs: KILL_TIMEOUT_MS, intervalMs: 10 });
  topology.removeAddress('pg1', service);
  await withClient(standbyUrl, (c) => c.query('SELECT pg_promote(true, $1)', [PROMOTE_TIMEOUT_S]), CONNECT_TIMEOUT_MS);
  const benchOnStandby = new URL(run.bench.url);
  benchOnStandby.hostname = pair.standby.address.host;
  return withClient(
    benchOnStandby.toString(),
    async (c) => {
      const doneAtPromotion = await countDone(c);
      // No worker reaches the new primary before it has the address, so every run logged by now was claimed
      // from the old one: the runs whose claim or settle an asynchronous standby may have lost.
      const cut = ledgerSizes(hosts);
      topology.addAddress('pg2', service);
      const addressMovedSeconds = round((performance.now() - killedAt) / 1000, 2);
      const announced = topology.announceAddress('pg2', service);
      try {
        await waitFor('the first settle on the new primary', async () => (await countDone(c)) > doneAtPromotion, { timeoutMs: run.runTimeoutMs, intervalMs: 20 });
      } finally {
        await announced;
      }
      return { failoverSeconds: round((performance.now() - killedAt) / 1000, 2), addressMovedSeconds, standbyBehind, cut, killed };
    },
    CONNECT_TIMEOUT_MS,
  );
}

async function failoverScenario(run: RunKit, plan: FailoverPlan, mode: ReplicationMode, delayMs: number, pair: ServerPair): Promise<void> {
  const { processes, concurrency, jobs, leaseMs, workMs } = plan;
  const runDir = await run.fresh(jobs);
  const monitor = await run.bench.connect();
  try {
    const measure = run.measure();
    const common = { via: null, url: run.urlFor(null), processes, concurrency, batch: concurrency, leaseMs, workMs, runDir };
    const hosts = [run.start('w1', common), run.start('w2', common)];
    const injected = (async () => {
      await run.progressAt(monitor, jobs, KILL_AT);
      // The monitor's connections die with the primary; it is not used again.
      await monitor.close().catch(() => undefined);
      return failOver(run, pair, hosts);
    })();
    await run.finish(hosts, injected);
    const done = await injected;
    const { rows } = await run.rows();
    const rowsLost = rows.filter((r) => r.status !== 1).length;
    const base = { scenario: NAME, dialect: 'postgres' as const, hosts: hosts.length, processes, concurrency, batch: concurrency, addedRttMs: 0, jobs };
    const extra: ScaleRecord['extra'] = { replication: mode, linkDelayMs: delayMs, failoverSeconds: done.failoverSeconds, addressMovedSeconds: done.addressMovedSeconds, standbyBehindBytes: done.standbyBehind.bytes, standbyWriteLagMs: done.standbyBehind.writeLagMs, rowsLost, primaryProcessesKilled: done.killed, leaseMs };
    const record = await run.conclude({ ...base, extra }, hosts, measure(), new Set(), false, { failoverCut: done.cut, lostCommitsAllowed: mode === 'async' });
    const { reRuns, reRunsAfterLostCommit, attemptsReissued, reRunsFenced } = record.ledger;
    if (mode === 'sync' && (reRunsAfterLostCommit > 0 || attemptsReissued > 0)) {
      throw new Error(`failover (sync): a synchronous standby lost acknowledged commits: ${reRunsAfterLostCommit} settles and ${attemptsReissued} claims`);
    }
    run.context.log(
      `failover (${mode}, link +${delayMs} ms): ${record.jobsPerSec} jobs/s, failover ${done.failoverSeconds} s (kill to first settle on pg2; address moved at ${done.addressMovedSeconds} s), ` +
        `re-runs ${reRuns} (${reRunsAfterLostCommit} after a lost settle commit, ${attemptsReissued} claims reissued, ${reRunsFenced} fenced), rows lost ${rowsLost}, proof holds`,
    );
  } finally {
    await monitor.close().catch(() => undefined);
  }
}

/** The standby's distance at the kill: WAL not confirmed written, and the write lag the primary last saw. */
const behindText = (e: NonNullable<ScaleRecord['extra']>) => `${(Number(e.standbyBehindBytes) / 1024).toFixed(1)} kB (write lag ${e.standbyWriteLagMs === null || e.standbyWriteLagMs === undefined ? '-' : `${String(e.standbyWriteLagMs)} ms`})`;
const linkName = (delayMs: unknown) => (Number(delayMs) > 0 ? `proxy, +${String(delayMs)} ms each way` : 'direct');

function failoverTable(runs: readonly ScaleRecord[]): string {
  const rows = runs.map((r) => {
    const e = r.extra ?? {};
    const mode = e.replication === 'sync' || e.replication === 'async' ? MODE_NAMES[e.replication] : String(e.replication);
    const proofText = r.ledger.violations.length > 0 ? `FAILED: ${r.ledger.violations[0]}` : `holds${e.replication === 'async' ? ', lost commits allowed' : ''} (${r.ledger.executions} runs of ${r.ledger.rows} rows)`;
    return [
      mode,
      linkName(e.linkDelayMs),
      r.jobs,
      r.jobsPerSec.toLocaleString('en-US'),
      `${String(e.addressMovedSeconds)} s / ${String(e.failoverSeconds)} s`,
      behindText(e),
      r.ledger.reRunsAfterLostCommit,
      r.ledger.attemptsReissued,
      String(e.rowsLost),
      `${r.ledger.reRuns} (${r.ledger.reRunsFenced} fenced)`,
      proofText,
    ];
  });
  return table(
    [
      'replication',
      'replication link',
      'jobs',
      'jobs/s',
      'failover: address moved / first settle',
      'standby behind at the kill',
      'rows re-run after a lost commit (settle lost)',
      'claims lost (attempt reissued)',
      'rows lost',
      're-runs',
      'ledger proof',
    ],
    rows,
  );
}

/** The measured findings, in sentences: what each mode lost and how long the workers waited. */
function failoverFindings(runs: readonly ScaleRecord[]): string {
  const e = (r: ScaleRecord) => r.extra ?? {};
  const seconds = (key: string) => runs.map((r) => Number(e(r)[key]));
  const span = (values: number[]) => (Math.min(...values) === Math.max(...values) ? `${Math.min(...values)} s` : `${Math.min(...values)}-${Math.max(...values)} s`);
  const lost = runs.reduce((sum, r) => sum + Number(e(r).rowsLost), 0);
  const sentences = [
    `Every run ended with every row done (${lost} rows lost over ${runs.length} runs): the workers rode out the failover on their own, reconnecting to the same address; ` +
      `the address was on the promoted standby ${span(seconds('addressMovedSeconds'))} after the kill and the new primary committed its first settle ${span(seconds('failoverSeconds'))} after it (the rest is the workers' reconnect and their claim retries' backoff).`,
  ];
  const asyncRuns = runs.filter((r) => e(r).replication === 'async');
  if (asyncRuns.length > 0) {
    const parts = asyncRuns.map(
      (r) => `${r.ledger.reRunsAfterLostCommit} finished rows ran again and ${r.ledger.attemptsReissued} claims were handed out again with the standby ${behindText(e(r))} behind at the kill (link: ${linkName(e(r).linkDelayMs)})`,
    );
    const anyLost = asyncRuns.some((r) => r.ledger.reRunsAfterLostCommit + r.ledger.attemptsReissued > 0);
    sentences.push(
      anyLost
        ? `With asynchronous replication the promoted standby lacked commits the old primary had acknowledged: ${parts.join('; ')} (a finished row whose settle was lost comes back as processing and runs again after a lease, or as pending when its claim was lost too, under the same attempt number), so a handler must tolerate a second run after a failover.`
        : `With asynchronous replication these runs lost no acknowledged commit (${parts.join('; ')}), but nothing guarantees it: a finished row may come back and run again.`,
    );
  }
  const syncRuns = runs.filter((r) => e(r).replication === 'sync');
  if (syncRuns.length > 0) {
    const twinOf = (r: ScaleRecord) => asyncRuns.find((a) => e(a).linkDelayMs === e(r).linkDelayMs);
    const rate = (r: ScaleRecord) => `${r.jobsPerSec.toLocaleString('en-US')} jobs/s against ${twinOf(r)?.jobsPerSec.toLocaleString('en-US') ?? '-'} asynchronous (link: ${linkName(e(r).linkDelayMs)})`;
    // Below 10% the difference is within what a shared machine's runs vary by.
    const slower = syncRuns.every((r) => r.jobsPerSec < (twinOf(r)?.jobsPerSec ?? 0) * 0.9);
    const cost = slower
      ? "the price of waiting for the standby's flush in every commit"
      : "no cost above this machine's noise, as the settles and claims of many jobs share each commit and so each wait for the standby";
    sentences.push(
      `With synchronous replication no acknowledged commit was lost (${syncRuns.reduce((sum, r) => sum + r.ledger.reRunsAfterLostCommit + r.ledger.attemptsReissued, 0)} rows or claims came back) and the default exactly-once proof held, at ${syncRuns.map(rate).join(', ')}: ${cost}.`,
    );
  }
  return sentences.join(' ');
}
