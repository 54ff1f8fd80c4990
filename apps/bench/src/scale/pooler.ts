/**
 * PostgreSQL behind PgBouncer in transaction mode, as fleets of many hosts x processes x slots run it: a
 * PgBouncer of the run's own on the database host (its own process in that host's namespace, in front of the
 * private PostgreSQL there), two worker hosts connecting through it. Three connection paths, each in a
 * throughput run (drain a table; ledger proof) and a pick-up run (idle workers; a row inserted every second or
 * two; the time from its INSERT to its claim, by the database's claimed_at):
 *   direct               --db straight to PostgreSQL;
 *   pgbouncer            --db through PgBouncer, whose transaction mode loses LISTEN: the workers find that
 *                        out themselves (one warn line each) and poll at --poll-max;
 *   pgbouncer+listen-db  --db through PgBouncer, --listen-db straight to PostgreSQL for the listening
 *                        connection alone.
 * PostgreSQL only (the issue is LISTEN/NOTIFY); the section skips when --dialects leaves PostgreSQL out.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pgBouncerBackend, pgBouncerSpec, pgBouncerVersion } from '@statusq/adapter-postgres/testing';
import { PrivateServer } from '@statusq/conformance';
import type { Store } from '@statusq/core';
import type { SqlParam } from '@statusq/core/tools';
import { serverTreeCpuSeconds } from '../cpu.js';
import { connectUrl, openBenchDatabaseAt, type BenchDatabase } from '../databases.js';
import { quantile } from '../records.js';
import { startDatabaseHost, type DatabaseHost } from './db-host.js';
import type { ScaleContext, ScaleRecord, ScaleSection } from './records.js';
import { RunKit, TABLE, round, type RunDatabase } from './run-kit.js';
import { proof, table } from './scale-report.js';
import { Topology } from './topology.js';
import type { WorkerHost } from './worker-hosts.js';

const NAME = 'pooler';
const PATHS = ['direct', 'pgbouncer', 'pgbouncer+listen-db'] as const;
type ConnectionPath = (typeof PATHS)[number];
const PATH_LABELS: Record<ConnectionPath, string> = {
  direct: 'straight to PostgreSQL',
  pgbouncer: 'through PgBouncer',
  'pgbouncer+listen-db': 'through PgBouncer, --listen-db to PostgreSQL',
};

/** PgBouncer's port on the database host (PostgreSQL has 5432 there). */
const BOUNCER_PORT = 6432;
/** The channel the table's triggers NOTIFY (notifyChannel): a backend LISTENing on it is a worker whose wake-ups work. */
const CHANNEL = `statusq_${TABLE}`;
/** How long the workers of a pick-up run may take to be ready: started, and listening or told they cannot (a 5 s probe). */
const READY_TIMEOUT_MS = 30_000;

interface PoolerPlan {
  hosts: number;
  processes: number;
  concurrency: number;
  jobs: number;
  /** Each worker process's own pool (?maxConnections=): the client connections PgBouncer multiplexes. */
  clientPool: number;
  /** PgBouncer's server connections (default_pool_size): half the clients', so it does multiplex. */
  serverPool: number;
  /** Rows inserted one at a time into an idle queue, a random gap of gapMs apart; the workers poll at pollMaxMs. */
  pickup: { inserts: number; gapMs: readonly [number, number]; pollMaxMs: number };
  runTimeoutMs: number;
}

const FULL_PLAN: PoolerPlan = {
  hosts: 2,
  processes: 2,
  concurrency: 16,
  jobs: 30_000,
  clientPool: 4,
  serverPool: 8,
  pickup: { inserts: 40, gapMs: [1000, 2000], pollMaxMs: 1000 },
  runTimeoutMs: 180_000,
};

const QUICK_PLAN: PoolerPlan = {
  hosts: 2,
  processes: 1,
  concurrency: 8,
  jobs: 3000,
  clientPool: 4,
  serverPool: 4,
  pickup: { inserts: 3, gapMs: [1000, 1500], pollMaxMs: 1000 },
  runTimeoutMs: 120_000,
};

export const pooler: ScaleSection = {
  names: [NAME],
  run: runPooler,
  markdown(records) {
    const runs = records.filter((r) => r.scenario === NAME);
    if (runs.length === 0) return null;
    return ['### Behind PgBouncer (transaction mode)', '', poolerTable(runs), '', poolerFindings(runs), ''].join('\n');
  },
};

/** The worker hosts' URLs for each path: --db (with the plan's client pool) and, for one path, --listen-db. */
interface PathUrls {
  db: Record<ConnectionPath, string>;
  /** Straight to PostgreSQL, for --listen-db. */
  listen: string;
}

async function runPooler(context: ScaleContext): Promise<void> {
  if (!context.only.includes(NAME)) return;
  if (!context.dialects.includes('postgres')) {
    context.log('pooler: PostgreSQL only (LISTEN/NOTIFY behind PgBouncer); skipped, --dialects leaves it out');
    return;
  }
  const plan = context.quick ? QUICK_PLAN : FULL_PLAN;
  const names = Array.from({ length: plan.hosts }, (_, i) => `w${i + 1}`);
  const topology = Topology.create(['db', ...names]);
  let database: DatabaseHost | null = null;
  let bouncer: PrivateServer | null = null;
  let bench: BenchDatabase | null = null;
  const ledgerDir = mkdtempSync(join(tmpdir(), 'statusq-scale-'));
  try {
    database = await startDatabaseHost('postgres', topology, 'db');
    const server = database;
    bouncer = await PrivateServer.start(pgBouncerSpec(pgBouncerBackend(server.adminUrl), { poolMode: 'transaction', poolSize: plan.serverPool }), {
      netns: topology.netns('db'),
      host: server.address.host,
      port: BOUNCER_PORT,
    });
    const pgbouncer = bouncer;
    bench = await openBenchDatabaseAt('postgres', server.adminUrl);
    // The database host's CPU: the server's and PgBouncer's, whichever path a run takes.
    const runDatabase: RunDatabase = {
      dialect: 'postgres',
      version: `${server.version}, ${pgBouncerVersion()}`,
      address: server.address,
      cpuSeconds: () => server.cpuSeconds() + (serverTreeCpuSeconds(pgbouncer.pid ?? -1) ?? 0),
    };
    context.log(`${runDatabase.version} (pool_mode = transaction, ${plan.serverPool} server connections) on host db (${server.address.host}), worker hosts ${names.join(', ')}`);
    const run = new RunKit(context, topology, runDatabase, bench, ledgerDir, plan.runTimeoutMs);
    const withPool = (url: string) => {
      const routed = new URL(url);
      routed.searchParams.set('maxConnections', String(plan.clientPool));
      return routed.toString();
    };
    const pooled = withPool(run.urlFor(null, { host: server.address.host, port: BOUNCER_PORT }));
    const urls: PathUrls = { db: { direct: withPool(run.urlFor(null)), pgbouncer: pooled, 'pgbouncer+listen-db': pooled }, listen: run.urlFor(null) };
    for (const path of PATHS) await throughputRun(run, plan, names, urls, path);
    for (const path of PATHS) await pickupRun(run, plan, names, urls, path);
  } finally {
    await bench?.close().catch(() => undefined);
    await bouncer?.stop().catch(() => undefined);
    await database?.stop().catch(() => undefined);
    topology.destroy();
    rmSync(ledgerDir, { recursive: true, force: true });
  }
}

function pathArgs(urls: PathUrls, path: ConnectionPath): string[] {
  return path === 'pgbouncer+listen-db' ? ['--listen-db', urls.listen] : [];
}

/** The `extra` every record of this section carries. */
function base(run: RunKit, plan: PoolerPlan, path: ConnectionPath, kind: 'throughput' | 'pickup', processes: number, concurrency: number, jobs: number): Omit<ScaleRecord, 'jobsPerSec' | 'wallSeconds' | 'candidatesLost' | 'serverCores' | 'ledger' | 'server'> {
  return {
    scenario: NAME,
    dialect: run.database.dialect,
    hosts: plan.hosts,
    processes,
    concurrency,
    batch: concurrency,
    addedRttMs: 0,
    jobs,
    extra: { kind, path, serverPool: plan.serverPool, clientConnections: plan.hosts * processes * plan.clientPool },
  };
}

/** The worker hosts drain `jobs` rows on `path`; jobs/s and the ledger proof. */
async function throughputRun(run: RunKit, plan: PoolerPlan, names: readonly string[], urls: PathUrls, path: ConnectionPath): Promise<void> {
  const { processes, concurrency, jobs } = plan;
  const runDir = await run.fresh(jobs);
  const measure = run.measure();
  const hosts = names.map((name) => run.start(name, { via: null, url: urls.db[path], processes, concurrency, batch: concurrency, leaseMs: 30_000, workMs: 0, runDir, args: pathArgs(urls, path) }));
  await run.finish(hosts);
  const record = await run.conclude(base(run, plan, path, 'throughput', processes, concurrency, jobs), hosts, measure(), new Set());
  run.context.log(`pooler ${path}: ${record.jobsPerSec} jobs/s (${plan.hosts} hosts x ${processes} x ${concurrency}), server ${record.serverCores} cores`);
}

/**
 * Idle workers on an empty table (one process of 4 slots a host, --poll-max from the plan); once every one is
 * listening, or has said it cannot, rows are inserted one at a time on the path's --db, a random gap apart so
 * each lands anywhere in the workers' poll cycle, and each is waited for until done. Its pick-up is its
 * claimed_at (the database's clock, at the claim) minus the moment before its INSERT was sent (this
 * machine's clock: the same clock, every host being a namespace of this machine).
 */
async function pickupRun(run: RunKit, plan: PoolerPlan, names: readonly string[], urls: PathUrls, path: ConnectionPath): Promise<void> {
  const { inserts, gapMs, pollMaxMs } = plan.pickup;
  const processes = 1;
  const concurrency = 4;
  const runDir = await run.fresh(0);
  const monitor = await run.bench.connect({ listen: false });
  const inserter = await connectUrl('postgres', urls.db[path], { listen: false });
  const hosts: WorkerHost[] = [];
  try {
    const measure = run.measure();
    for (const name of names) {
      hosts.push(run.start(name, { via: null, url: urls.db[path], processes, concurrency, batch: concurrency, leaseMs: 30_000, workMs: 0, runDir, exitWhenEmpty: false, pollMaxMs, args: pathArgs(urls, path) }));
    }
    const warned = () => hosts.reduce((sum, h) => sum + h.problems().filter((line) => line.includes('"code":"notifications-lost"')).length, 0);
    const workers = names.length * processes;
    await waitUntil(`the ${path} workers to listen or to say they cannot`, READY_TIMEOUT_MS, async () => (path === 'pgbouncer' ? warned() === workers : (await listeners(monitor)) === workers));
    const pickups: number[] = [];
    for (let i = 0; i < inserts; i++) {
      // The planned spacing of the inserts, not a wait for anything: the workers sit idle meanwhile.
      await sleep(gapMs[0] + Math.random() * (gapMs[1] - gapMs[0]));
      const insertedAt = Date.now();
      const { rows } = await inserter.execute({ sql: `INSERT INTO ${TABLE} (payload) VALUES ('{}') RETURNING id`, params: [] });
      const claimedAt = await claimedAtOf(monitor, rows[0]!.id as SqlParam, pollMaxMs * 3 + 10_000);
      pickups.push(Math.max(0, claimedAt - insertedAt));
    }
    for (const host of hosts) host.stop();
    await run.finish(hosts);
    const record = base(run, plan, path, 'pickup', processes, concurrency, inserts);
    record.extra = { ...record.extra, pollMaxMs, p50Ms: round(quantile(pickups, 0.5), 1), p99Ms: round(quantile(pickups, 0.99), 1), maxMs: Math.max(...pickups), warnings: warned(), listeners: await listeners(monitor) };
    const concluded = await run.conclude(record, hosts, measure(), new Set());
    run.context.log(`pooler ${path}: idle pick-up p50 ${concluded.extra?.p50Ms} ms, p99 ${concluded.extra?.p99Ms} ms over ${inserts} inserts (--poll-max ${pollMaxMs} ms), ${warned()} lost-notification warnings`);
  } finally {
    // A run that failed midway leaves no host behind.
    for (const host of hosts) if (host.running) run.topology.killAll(host.host);
    await inserter.close();
    await monitor.close();
  }
}

/** Backends of the bench database LISTENing on the table's channel. */
async function listeners(monitor: Store): Promise<number> {
  const { rows } = await monitor.execute({ sql: `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND query = $1`, params: [`LISTEN "${CHANNEL}"`] });
  return Number(rows[0]?.n ?? 0);
}

/** The row's claimed_at (epoch ms) once it is done; polled every 20 ms, at most `timeoutMs`. */
async function claimedAtOf(monitor: Store, id: SqlParam, timeoutMs: number): Promise<number> {
  let claimedAt = Number.NaN;
  await waitUntil(`row ${String(id)} to be done`, timeoutMs, async () => {
    const { rows } = await monitor.execute({ sql: `SELECT status, claimed_at FROM ${TABLE} WHERE id = $1`, params: [id] });
    const row = rows[0];
    if (row?.status !== 1 || !(row.claimed_at instanceof Date)) return false;
    claimedAt = row.claimed_at.getTime();
    return true;
  });
  return claimedAt;
}

async function waitUntil(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i <= timeoutMs / 20; i++) {
    if (await check()) return;
    await sleep(20);
  }
  throw new Error(`pooler: timed out after ${timeoutMs} ms waiting for ${what}`);
}

const pathOf = (r: ScaleRecord) => r.extra?.path as ConnectionPath;
const kindOf = (r: ScaleRecord) => r.extra?.kind as 'throughput' | 'pickup';

function poolerTable(runs: readonly ScaleRecord[]): string {
  const rows = PATHS.flatMap((path) => {
    const drain = runs.find((r) => pathOf(r) === path && kindOf(r) === 'throughput');
    const idle = runs.find((r) => pathOf(r) === path && kindOf(r) === 'pickup');
    if (!drain && !idle) return [];
    return [
      [
        PATH_LABELS[path],
        drain ? drain.jobsPerSec.toLocaleString('en-US') : '-',
        drain ? drain.serverCores : '-',
        idle ? `${idle.extra?.p50Ms} / ${idle.extra?.p99Ms} ms` : '-',
        idle ? String(idle.extra?.warnings) : '-',
        proofs([drain, idle]),
      ],
    ];
  });
  const sample = runs.find((r) => kindOf(r) === 'throughput') ?? runs[0]!;
  const idleSample = runs.find((r) => kindOf(r) === 'pickup');
  const shape = `${sample.hosts} hosts x ${sample.processes} x ${sample.concurrency}`;
  const idleShape = idleSample ? `${idleSample.jobs} inserts, --poll-max ${Number(idleSample.extra?.pollMaxMs) / 1000} s` : '';
  return table(['connection path', `jobs/s (${shape}, ${sample.jobs.toLocaleString('en-US')} jobs)`, 'database host CPU (cores)', `idle pick-up p50 / p99 (${idleShape})`, 'lost-notification warnings', 'ledger proof'], rows);
}

/** One cell for a path's runs: `holds (3,000 + 6 rows)` when every proof held, else the first failure. */
function proofs(runs: ReadonlyArray<ScaleRecord | undefined>): string {
  const done = runs.filter((r): r is ScaleRecord => r !== undefined);
  const failed = done.find((r) => r.ledger.violations.length > 0);
  return failed ? proof(failed) : `holds (${done.map((r) => r.ledger.rows.toLocaleString('en-US')).join(' + ')} rows)`;
}

/** What the table shows, in a few sentences computed from it. */
function poolerFindings(runs: readonly ScaleRecord[]): string {
  const drain = (path: ConnectionPath) => runs.find((r) => pathOf(r) === path && kindOf(r) === 'throughput');
  const idle = (path: ConnectionPath) => runs.find((r) => pathOf(r) === path && kindOf(r) === 'pickup');
  const sentences: string[] = [];
  const direct = drain('direct');
  const pooled = (['pgbouncer', 'pgbouncer+listen-db'] as const).map(drain).filter((r): r is ScaleRecord => r !== undefined);
  if (direct && pooled.length > 0 && direct.jobsPerSec > 0) {
    const shares = pooled.map((r) => Math.round((r.jobsPerSec / direct.jobsPerSec) * 100)).sort((a, b) => a - b);
    const share = shares[0] === shares.at(-1) ? `${shares[0]}%` : `${shares[0]}-${shares.at(-1)}%`;
    sentences.push(
      `Through PgBouncer in transaction mode, ${String(pooled[0]!.extra?.clientConnections)} client connections sharing ${String(pooled[0]!.extra?.serverPool)} server connections, the workers drained the table at ${share} of the direct rate (${pooled.map((r) => r.jobsPerSec.toLocaleString('en-US')).join(' and ')} against ${direct.jobsPerSec.toLocaleString('en-US')} jobs/s), and the ledger proof held for every run.`,
    );
  }
  const lost = idle('pgbouncer');
  const straight = idle('direct');
  const fixed = idle('pgbouncer+listen-db');
  if (lost && straight) {
    const elsewhere = runs.filter((r) => kindOf(r) === 'pickup' && r !== lost).reduce((sum, r) => sum + Number(r.extra?.warnings ?? 0), 0);
    sentences.push(
      `Without --listen-db, LISTEN through the pooler is lost: the ${lost.hosts * lost.processes} worker processes found it out themselves (${String(lost.extra?.warnings)} warn lines${elsewhere === 0 ? ', none on the other paths' : ''}) and polled, so an idle worker took ${lost.extra?.p50Ms} ms (p50) and ${lost.extra?.p99Ms} ms (p99) to pick a new row up against ${straight.extra?.p50Ms} / ${straight.extra?.p99Ms} ms straight to the server.`,
    );
  }
  if (fixed && straight) sentences.push(`With --listen-db pointing the listening connection at the server, pick-up through the pooler was back to ${fixed.extra?.p50Ms} / ${fixed.extra?.p99Ms} ms, while claims and settles kept going through PgBouncer.`);
  return sentences.join(' ');
}
