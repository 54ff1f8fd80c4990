/**
 * What logs, metrics and progress cost (issue 13: under 5% of throughput on the PostgreSQL burn-down). Each
 * run burns N no-op jobs through the real `statusq work --exit-when-empty` process, not core's Worker, so
 * the CLI's logger, event listeners, metrics server and progress line are all in the path:
 *   quiet     `--log-level error`, no metrics: the baseline;
 *   observed  info logs as JSON on a pipe the bench drains, `--metrics-port 0` scraped every second;
 *   progress  observed plus `--progress on` under a pseudo-terminal (`script`), when asked for (--progress).
 * Rounds alternate the variants' order, so drift of the machine (a warm cache, another process) falls on
 * every variant alike; each variant's median is compared with the baseline's. Jobs/s is over the process's
 * whole life, start-up and shutdown included (what a batch run of `--exit-when-empty` costs), and `net`
 * also without the fixed cost of an empty queue's run of the same variant.
 *
 * Measured (100,000 jobs, concurrency 32, 13 rounds after a discarded warm-up, PostgreSQL 15, the 2-core
 * machine otherwise idle), two runs on different days: overhead vs quiet, paired by round, median [quartiles]
 *   observed  5.1% [2.1..6.9]   and  2.7% [0.3..10.5]
 *   progress  5.7% [-0.5..9.6]  and  9.7% [-6..11.4]
 * Single runs of the same variant differ by 10-18% within a round (not fsync, not autovacuum: switching
 * either off changed nothing), so wall-clock time resolves a cost of a few percent only to +-3-5% even at
 * 13 rounds. The CLI's own CPU is the steadier measure: quiet 37.4-47.5, observed 41.2-48.8, progress
 * 42.8-52 ms per 1,000 jobs, i.e. +1.3-3.8 us (observed) and +1.6-3.2 us more (progress) per job, against about
 * 170 us of CPU per job for the whole 2-core machine (workers and server) at 11,600 jobs/s: 2-3% if the
 * machine is CPU-bound. A --cpu-prof of the metrics variant puts prom-client at 152 ms per 100,000 jobs
 * (Histogram.observe's bucket lookup). At info no per-job line is logged (about 940 bytes of log a run); the
 * status line reads the worker's counters, redraws at most 10 times a second and counts the table every 2 s
 * (an 11 ms GROUP BY on this table).
 *
 * Measured again (2026-12-01, 100,000 jobs, concurrency 32, nothing else running), three ways:
 *   one after the other, 13 rounds, paired:   observed 6.3% [1.6..11.3]   progress 0.6% [-5.6..8.8]
 *     (the machine's speed drifted 30% within the session: quiet alone ran 9,800-14,129 jobs/s; and the
 *     machine is not CPU-bound, CLI + server used 83 ms of CPU per 1,000 jobs at 11,500 jobs/s, one core)
 *   side by side (--side-by-side), 15 rounds: observed 4.4% [2.3..5.9]     progress 3.2% [1.6..5.6]
 *   --cpu-prof of the CLI, twice each: prom-client 55-68 ms and metrics.js 6-12 ms more per 100,000 jobs
 *     (about 0.7 us a job, 1% of the CLI's 1.5 s of busy time); no other function differs beyond the
 *     run-to-run spread (writev and GC moved by +-40% between runs of the same variant).
 */
import { spawn } from 'node:child_process';
import { freePort } from '@statusq/test-fixtures';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openBenchDatabase } from './databases.js';
import { parentPid, serverTreeCpuSeconds } from './cpu.js';
import { quantile, round, type ObservabilityRecord, type ObservabilityVariant } from './records.js';
import type { BenchContext } from './scenarios.js';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'cli', 'dist', 'bin.js');
const SCRAPE_INTERVAL_MS = 1_000;

export interface ObservabilityOptions {
  rounds: number;
  /** The variants to run; the first is the baseline the others are compared with. */
  variants: readonly ObservabilityVariant[];
  /**
   * Run each variant at the same time as the baseline, each on a table of its own (`--side-by-side`), instead of
   * one after the other: whatever the machine does during the run (its speed drifted by 20-40% over minutes
   * here) falls on both alike, so their ratio measures the variant's cost, under the contention of two runs.
   */
  sideBySide?: boolean;
}

interface RunResult {
  seconds: number;
  cpuSeconds: number;
  scrapes: number;
  logBytes: number;
}


function argsOf(variant: ObservabilityVariant, url: string, table: string, handler: string, concurrency: number, metricsPort: number): string[] {
  const base = ['work', '--db', url, '--table', table, '--handler', handler, '--concurrency', String(concurrency), '--exit-when-empty'];
  const logs = ['--log-format', 'json'];
  const quiet = ['--log-level', 'error'];
  const metrics = ['--metrics-port', String(metricsPort)];
  if (variant === 'quiet') return [...base, ...quiet];
  if (variant === 'logs') return [...base, ...logs];
  if (variant === 'metrics') return [...base, ...quiet, ...metrics];
  const observed = [...base, ...logs, ...metrics];
  return variant === 'observed' ? observed : [...observed, '--progress', 'on'];
}

/** A POSIX shell word: the command `script -c` runs is one string. */
const shellWord = (word: string) => `'${word.replaceAll("'", "'\\''")}'`;

/** One `statusq work` process to its exit, its output drained (and its metrics scraped every second). */
async function runCli(variant: ObservabilityVariant, url: string, table: string, handler: string, concurrency: number): Promise<RunResult> {
  const port = await freePort();
  const args = argsOf(variant, url, table, handler, concurrency, port);
  const scraped = variant !== 'quiet' && variant !== 'logs';
  // GNU time reports the CLI's own CPU time (not script's), in a file so it never mixes with the output.
  const timeFile = join(tmpdir(), `statusq-bench-time-${process.pid}-${port}`);
  const command = ['/usr/bin/time', '-f', '%U %S', '-o', timeFile, process.execPath, CLI, ...args];
  // Under `script` the CLI's stdout and stderr are a terminal, as an operator's are; script copies them here.
  const child =
    variant === 'progress'
      ? spawn('script', ['-qfec', command.map(shellWord).join(' '), '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn(command[0]!, command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  let logBytes = 0;
  let scrapes = 0;
  let scraping: Promise<void> = Promise.resolve();
  const scrape = setInterval(() => {
    if (!scraped) return;
    scraping = fetch(`http://127.0.0.1:${port}/metrics`)
      .then((response) => response.text())
      .then(() => void scrapes++, () => undefined);
  }, SCRAPE_INTERVAL_MS);
  const read = (chunk: Buffer) => {
    logBytes += chunk.length;
    output = (output + chunk.toString()).slice(-2000);
  };
  const started = performance.now();
  child.stdout!.on('data', read);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    read(chunk);
    stderr = (stderr + chunk.toString()).slice(-2000);
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', (exit) => resolve(exit)));
  const seconds = (performance.now() - started) / 1000;
  clearInterval(scrape);
  await scraping;
  if (code !== 0) throw new Error(`statusq ${args.join(' ')} (${variant}) exited with ${code}: ${stderr || output.slice(-2000)}`);
  const [user, system] = readFileSync(timeFile, 'utf8').trim().split(/\s+/).slice(-2).map(Number);
  rmSync(timeFile, { force: true });
  return { seconds, cpuSeconds: user! + system!, scrapes, logBytes };
}

/** The observability scenario on PostgreSQL: rounds of every variant, then medians and overhead against `quiet`. */
export async function observability(ctx: BenchContext, options: ObservabilityOptions): Promise<void> {
  if (!ctx.dialects.includes('postgres')) return;
  const { jobs } = ctx.plan;
  const concurrency = 32;
  const variants = options.variants;
  const baseline = variants[0]!;
  const dir = mkdtempSync(join(tmpdir(), 'statusq-bench-observability-'));
  const handler = join(dir, 'noop.mjs');
  writeFileSync(handler, 'export default async () => {};\n');
  const db = await openBenchDatabase('postgres');
  const table = 'bench_observability';
  const postmaster = await postmasterPid(db);
  if (options.sideBySide) {
    try {
      await sideBySide(ctx, options, db, handler, concurrency);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await db.close();
    }
    return;
  }
  try {
    const fixed = new Map<ObservabilityVariant, number>();
    for (const variant of variants) {
      await db.createTable(table, { pending: 0, finished: 0 });
      const empty = [await runCli(variant, db.url, table, handler, concurrency), await runCli(variant, db.url, table, handler, concurrency)];
      fixed.set(variant, quantile(empty.map((r) => r.seconds), 0.5));
    }
    // The first full run of a session was 10-20% slower for every variant (the server's caches filling): not measured.
    await db.createTable(table, { pending: jobs, finished: 0 });
    await runCli(baseline, db.url, table, handler, concurrency);
    const records: ObservabilityRecord[] = [];
    for (let round = 0; round < options.rounds; round++) {
      for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) {
        await db.createTable(table, { pending: jobs, finished: 0 });
        const serverBefore = postmaster === null ? null : serverTreeCpuSeconds(postmaster);
        const result = await runCli(variant, db.url, table, handler, concurrency);
        const serverAfter = postmaster === null ? null : serverTreeCpuSeconds(postmaster);
        const serverCpu = serverBefore === null || serverAfter === null ? null : serverAfter - serverBefore;
        const fixedSeconds = fixed.get(variant)!;
        const record: ObservabilityRecord = {
          scenario: 'observability',
          system: 'statusq',
          dialect: 'postgres',
          variant,
          round,
          jobs,
          concurrency,
          seconds: round3(result.seconds),
          jobsPerSec: Math.round(jobs / result.seconds),
          fixedSeconds: round3(fixedSeconds),
          netJobsPerSec: Math.round(jobs / Math.max(0.001, result.seconds - fixedSeconds)),
          scrapes: result.scrapes,
          logBytes: result.logBytes,
          cpuMsPer1000Jobs: perThousandJobs(result.cpuSeconds, jobs),
          ...(serverCpu !== null && { serverCpuMsPer1000Jobs: perThousandJobs(serverCpu, jobs), totalCpuMsPer1000Jobs: perThousandJobs(result.cpuSeconds + serverCpu, jobs) }),
        };
        records.push(record);
        ctx.record(record);
      }
    }
    type Key = 'jobsPerSec' | 'netJobsPerSec' | 'cpuMsPer1000Jobs' | 'totalCpuMsPer1000Jobs';
    const of = (variant: ObservabilityVariant) => records.filter((r) => r.variant === variant);
    const median = (variant: ObservabilityVariant, key: Key) => quantile(of(variant).map((r) => r[key] ?? Number.NaN), 0.5);
    // Paired by round: the baseline and the variant ran next to each other, so a slow minute of the machine
    // falls on both; the median of the rounds' overheads is steadier than the overhead of the medians.
    const overheads = (variant: ObservabilityVariant, key: 'jobsPerSec' | 'netJobsPerSec') =>
      of(variant).map((r) => {
        const base = records.find((b) => b.variant === baseline && b.round === r.round)![key];
        return (100 * (base - r[key])) / base;
      });
    // On this CPU-bound machine (worker and server share 2 cores) throughput is cores / CPU per job, so the CPU a
    // variant adds per job, CLI and server together, is its throughput cost without the run-to-run wall-clock noise.
    const cpuOverheads = (variant: ObservabilityVariant) =>
      of(variant).flatMap((r) => {
        const base = records.find((b) => b.variant === baseline && b.round === r.round)!.totalCpuMsPer1000Jobs;
        return base === undefined || r.totalCpuMsPer1000Jobs === undefined ? [] : [(100 * (r.totalCpuMsPer1000Jobs - base)) / base];
      });
    const spread = (values: number[]) => `${round(quantile(values, 0.5), 1)}% [${round(quantile(values, 0.25), 1)}..${round(quantile(values, 0.75), 1)}]`;
    ctx.log(`\nobservability: ${jobs} no-op jobs, concurrency ${concurrency}, ${options.rounds} rounds; medians, and the overhead vs ${baseline} paired by round: median [quartiles]`);
    for (const variant of variants) {
      ctx.log(
        `  ${variant.padEnd(9)} ${String(median(variant, 'jobsPerSec')).padStart(6)} jobs/s  overhead ${spread(overheads(variant, 'jobsPerSec'))}` +
          `   net ${String(median(variant, 'netJobsPerSec')).padStart(6)} jobs/s  overhead ${spread(overheads(variant, 'netJobsPerSec'))}   cpu ${median(variant, 'cpuMsPer1000Jobs')} ms/1000 jobs` +
          (postmaster === null ? '' : `   cli+server cpu ${median(variant, 'totalCpuMsPer1000Jobs')} ms/1000 jobs, added ${spread(cpuOverheads(variant))}`),
      );
    }
  } finally {
    await db.dropTable(table).catch(() => undefined);
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const round3 = (value: number) => round(value, 3);

/** See ObservabilityOptions.sideBySide: per round, the baseline and each variant at once, their tables swapped every other round. */
async function sideBySide(ctx: BenchContext, options: ObservabilityOptions, db: Awaited<ReturnType<typeof openBenchDatabase>>, handler: string, concurrency: number): Promise<void> {
  const { jobs } = ctx.plan;
  const [baseline, ...others] = options.variants;
  const tables = ['bench_observability_a', 'bench_observability_b'] as const;
  const ratios = new Map<ObservabilityVariant, number[]>();
  try {
    for (let round = 0; round < options.rounds; round++) {
      for (const variant of others) {
        for (const table of tables) await db.createTable(table, { pending: jobs, finished: 0 });
        const [first, second] = round % 2 === 0 ? tables : ([tables[1], tables[0]] as const);
        const [base, other] = await Promise.all([runCli(baseline!, db.url, first, handler, concurrency), runCli(variant, db.url, second, handler, concurrency)]);
        for (const [name, result] of [[baseline!, base], [variant, other]] as const) {
          const record: ObservabilityRecord = {
            scenario: 'observability',
            system: 'statusq',
            dialect: 'postgres',
            variant: name,
            round,
            jobs,
            concurrency,
            seconds: round3(result.seconds),
            jobsPerSec: Math.round(jobs / result.seconds),
            fixedSeconds: 0,
            netJobsPerSec: Math.round(jobs / result.seconds),
            scrapes: result.scrapes,
            logBytes: result.logBytes,
            cpuMsPer1000Jobs: perThousandJobs(result.cpuSeconds, jobs),
            sideBySideWith: name === baseline ? variant : baseline!,
          };
          ctx.record(record);
        }
        const list = ratios.get(variant) ?? [];
        list.push((100 * (other.seconds - base.seconds)) / base.seconds);
        ratios.set(variant, list);
      }
    }
  } finally {
    for (const table of tables) await db.dropTable(table).catch(() => undefined);
  }
  ctx.log(`\nobservability, side by side: ${jobs} no-op jobs, concurrency 32, ${options.rounds} rounds; each variant's run time against ${baseline}'s running at the same moment: median [quartiles] (min..max)`);
  for (const [variant, list] of ratios) {
    ctx.log(`  ${variant.padEnd(9)} +${round(quantile(list, 0.5), 1)}% [${round(quantile(list, 0.25), 1)}..${round(quantile(list, 0.75), 1)}] (${round(Math.min(...list), 1)}..${round(Math.max(...list), 1)})`);
  }
}
const perThousandJobs = (cpuSeconds: number, jobs: number) => Math.round((10_000_000 * cpuSeconds) / jobs) / 10;

/** The PostgreSQL server's main process, so its CPU (backends included) can be read from /proc; null when not local. */
async function postmasterPid(db: Awaited<ReturnType<typeof openBenchDatabase>>): Promise<number | null> {
  const store = await db.connect();
  try {
    const { rows } = await store.execute({ sql: 'SELECT pg_backend_pid() AS pid', params: [] });
    return parentPid(Number(rows[0]!.pid));
  } finally {
    await store.close();
  }
}
