/**
 * Issue 41's questions of one table's claimers: does throughput hold as their number grows, and how much of a
 * claim cycle is the network between them and the server.
 */
import { TcpProxy, routeThrough } from '@statusq/conformance';
import { openBenchDatabaseAt, type BenchDatabase, type Dialect } from './databases.js';
import { startLocalPostgres } from './scale/db-host.js';
import { withDatabase, type BenchContext } from './scenarios.js';
import { burnDownInProcesses, type StatusqRunOptions } from './statusq-runs.js';

/**
 * The database the claimers scenario runs on. PostgreSQL's shared server allows 100 connections
 * (max_connections) and every worker holds at least one, so on PostgreSQL every count runs on a server of the
 * bench's own on 127.0.0.1 (the same binaries, set up as a scale run's database host: max_connections 400).
 */
async function withClaimersDatabase<T>(dialect: Dialect, body: (db: BenchDatabase) => Promise<T>): Promise<T> {
  if (dialect !== 'postgres') return withDatabase(dialect, body);
  const host = await startLocalPostgres();
  try {
    const db = await openBenchDatabaseAt('postgres', host.adminUrl);
    try {
      return await body(db);
    } finally {
      await db.close();
    }
  } finally {
    await host.stop();
  }
}

/**
 * Issue 41's question: does one table hold its throughput as its claimers grow? Workers each on a store of their
 * own (as workers of many processes and hosts reach the server), 16 slots, burn down `claimerJobs` no-op jobs at
 * each of `claimerCounts`. On MySQL/MariaDB each count runs with the claim gate (the default) and without it
 * (`?claimGate=0`), the before and after of mysql-claim-gate.ts.
 */
export async function claimers(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  const table = 'bench_claimers';
  for (const dialect of ctx.dialects) {
    await withClaimersDatabase(dialect, async (db) => {
      for (const workers of plan.claimerCounts) {
        for (const claimGate of dialect === 'mysql' ? ['default', 'off'] as const : [null]) {
          await db.createTable(table, { pending: plan.claimerJobs, finished: 0 });
          const options: StatusqRunOptions = { table, workers, concurrency: 16, strategy: 'native', handlerDelayMs: 0, timeoutMs: plan.runTimeoutMs, ...(claimGate === 'off' && { urlParameters: { claimGate: '0' } }) };
          const result = await burnDownInProcesses(db, options, 1);
          ctx.record({
            scenario: 'claimers',
            system: 'statusq',
            dialect,
            workers,
            concurrency: 16,
            claimGate,
            jobs: plan.claimerJobs,
            handled: result.handled,
            timedOut: result.timedOut,
            jobsPerSec: Math.round(result.handled / result.seconds),
            serverCpu: result.cpu.server,
            workersCpu: result.cpu.bench,
          });
        }
      }
      await db.dropTable(table);
    });
  }
}

/**
 * Issue 41's other question: how much of a claim cycle is the network? One worker of 64 slots (claims of 64)
 * burns down `latencyJobs` no-op jobs through a TCP proxy in the bench process that adds each of `latencySteps`
 * to every round trip (half each way), on the servers (SQLite has no network). MySQL's idle probe is off, so
 * the proxy carries only the claims and settles.
 */
export async function claimLatency(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  const table = 'bench_claim_latency';
  for (const dialect of ctx.dialects.filter((d) => d !== 'sqlite')) {
    await withDatabase(dialect, async (db) => {
      const route = routeThrough(db.url, dialect === 'mysql' ? 3306 : 5432, dialect === 'mysql' ? { idleProbeMs: '0' } : {});
      const proxy = await TcpProxy.start(route.upstream);
      try {
        for (const addedRttMs of plan.latencySteps) {
          proxy.delay(addedRttMs / 2);
          await db.createTable(table, { pending: plan.latencyJobs, finished: 0 });
          const options: StatusqRunOptions = { table, workers: 1, concurrency: 64, batch: 64, strategy: 'native', handlerDelayMs: 0, timeoutMs: plan.runTimeoutMs + 100 * addedRttMs, url: route.via({ host: proxy.host, port: proxy.port }) };
          const result = await burnDownInProcesses(db, options, 1);
          ctx.record({ scenario: 'claim-latency', system: 'statusq', dialect, addedRttMs, workers: 1, concurrency: 64, jobs: plan.latencyJobs, handled: result.handled, timedOut: result.timedOut, jobsPerSec: Math.round(result.handled / result.seconds) });
        }
      } finally {
        await proxy.close();
      }
      await db.dropTable(table);
    });
  }
}
