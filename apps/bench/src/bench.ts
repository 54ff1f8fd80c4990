/**
 * `pnpm bench [--quick] [--only s1,s2] [--dialects d1,d2] [--no-peers] [--workers 1,8] [--jobs N] [--slots 16,64,256] [--strategies native] [--rounds N] [--progress] [--variants quiet,logs,metrics,observed,progress] [--side-by-side] [--render FILE]`
 *
 * Runs the scenarios, prints a table per scenario and writes every measurement as a JSON line. A full run
 * also rewrites the generated part of docs/benchmarks.md and its chart; `--quick` (CI) and partial runs
 * (--only, --workers, --jobs, --strategies) write only apps/bench/results/*.jsonl. `--render FILE` rebuilds the docs from
 * a saved results file.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { ClaimStrategy } from '@statusq/core/tools';
import { DIALECTS, openBenchDatabase, type Dialect } from './databases.js';
import { OBSERVABILITY_VARIANTS, type BenchRecord, type ObservabilityVariant } from './records.js';
import { broker } from './broker-scenario.js';
import { claimLimits, claimShapes, costGrowth } from './claim-cost-scenarios.js';
import { claimLatency, claimers } from './claimer-scenarios.js';
import { claimState, pruneAlongside, rateLimit } from './feature-scenarios.js';
import { observability } from './observability.js';
import { loadPeers } from './peers/registry.js';
import { idlePickup, pickup, waitForScenario } from './pickup-scenarios.js';
import { ceilingLines } from './report-ceiling.js';
import { throughputSvg } from './report-chart.js';
import { ratioLines } from './report-ratios.js';
import { markdownReport, textReport } from './report.js';
import { writeGeneratedBlock } from './generated-block.js';
import { FULL_PLAN, QUICK_PLAN, SCENARIOS, type BenchContext, type ScenarioName } from './scenarios.js';
import { batchSize, burnDown, peers } from './throughput-scenarios.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const DOCS = join(ROOT, 'docs', 'benchmarks.md');
const DOCS_DATA = join(ROOT, 'docs', 'benchmarks');
const BEGIN = '<!-- bench:generated:begin -->';
const END = '<!-- bench:generated:end -->';

class UsageError extends Error {}

interface Args {
  quick: boolean;
  only: ScenarioName[];
  dialects: Dialect[];
  peers: boolean;
  render: string | null;
  /** Overrides of the plan's sizes, for looking at one case closely. */
  workers: number[] | null;
  jobs: number | null;
  /** The batch-size scenario's slots per worker. */
  slots: number[] | null;
  strategies: ClaimStrategy[] | null;
  /** The observability scenario: its rounds, and which variants it runs (`--progress` adds `progress`). */
  rounds: number | null;
  progress: boolean;
  variants: ObservabilityVariant[] | null;
  /** The observability scenario runs each variant beside the baseline, at the same moment (ObservabilityOptions.sideBySide). */
  sideBySide: boolean;
}

function list<T extends string>(raw: string | undefined, allowed: readonly T[], what: string): T[] {
  const items = (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  if (items.length === 0) throw new UsageError(`${what} needs a comma-separated list of ${allowed.join(', ')}`);
  for (const item of items) if (!allowed.includes(item as T)) throw new UsageError(`unknown ${what} ${JSON.stringify(item)}; use ${allowed.join(', ')}`);
  return items as T[];
}

function counts(raw: string | undefined, what: string): number[] {
  const values = (raw ?? '').split(',').map(Number);
  if (values.length === 0 || values.some((n) => !Number.isSafeInteger(n) || n < 1 || n > 10_000_000)) throw new UsageError(`${what} needs positive integers, got ${JSON.stringify(raw)}`);
  return values;
}

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { quick: false, only: [...SCENARIOS], dialects: [...DIALECTS], peers: true, render: null, workers: null, jobs: null, slots: null, strategies: null, rounds: null, progress: false, variants: null, sideBySide: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') continue;
    else if (arg === '--quick') args.quick = true;
    else if (arg === '--no-peers') args.peers = false;
    else if (arg === '--only') args.only = list(argv[++i], SCENARIOS, 'scenario');
    else if (arg === '--dialects') args.dialects = list(argv[++i], DIALECTS, 'dialect');
    else if (arg === '--workers') args.workers = counts(argv[++i], '--workers');
    else if (arg === '--strategies') args.strategies = list(argv[++i], ['native', 'conditional-update'] as const, 'strategy');
    else if (arg === '--jobs') args.jobs = counts(argv[++i], '--jobs')[0]!;
    else if (arg === '--slots') args.slots = counts(argv[++i], '--slots');
    else if (arg === '--rounds') args.rounds = counts(argv[++i], '--rounds')[0]!;
    else if (arg === '--progress') args.progress = true;
    else if (arg === '--side-by-side') args.sideBySide = true;
    else if (arg === '--variants') args.variants = list(argv[++i], OBSERVABILITY_VARIANTS, 'variant');
    else if (arg === '--render') {
      args.render = argv[++i] ?? '';
      if (!args.render) throw new UsageError('--render needs a results file');
    } else throw new UsageError(`unknown option ${JSON.stringify(arg)}`);
  }
  return args;
}

/** The observability variants to run: `--variants` as given, else quiet and observed, plus progress with `--progress`. */
function observabilityVariants(args: Args): ObservabilityVariant[] {
  if (args.variants !== null) return args.progress && !args.variants.includes('progress') ? [...args.variants, 'progress'] : args.variants;
  return args.progress ? ['quiet', 'observed', 'progress'] : ['quiet', 'observed'];
}

/** The Node line the peers run on: their `engines` ask for Node 22 or newer, and 24 is the active LTS line. */
const PEER_NODE_LINE = 24;

/**
 * The Node binary for the peers' runs: the newest 24.x from the npm registry (scripts/node-lines.mjs, cached).
 * Unreachable: the bench's own Node, said in the log, except in CI, where it fails.
 */
async function peerNode(): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [join(ROOT, 'scripts', 'node-lines.mjs'), String(PEER_NODE_LINE), '--no-workspace'], { timeout: 600_000 });
    const path = stdout.trim().split('\n')[0];
    if (!path) throw new Error('scripts/node-lines.mjs printed no path');
    return path;
  } catch (error) {
    const reason = String((error as { stderr?: string }).stderr || (error instanceof Error ? error.message : error)).trim().split('\n').at(-1);
    if (process.env.STATUSQ_REQUIRE_DATABASES === '1') throw new Error(`the peers need Node ${PEER_NODE_LINE}: ${reason}`, { cause: error });
    console.log(`the peers run on this Node (${process.version}): Node ${PEER_NODE_LINE} could not be had (${reason})`);
    return process.execPath;
  }
}

async function machineDescription(dialects: readonly Dialect[], records: readonly BenchRecord[]): Promise<string[]> {
  const cpu = cpus();
  // Records before the peers moved to Node 24 (2026-12-05) carry no `node`: they ran on the bench's own.
  const peerNodes = [...new Set(records.flatMap((r) => ('node' in r && r.node ? [r.node] : [])))];
  const lines = [
    `- Machine: ${cpu.length} x ${cpu[0]?.model ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB; databases on the same machine, over 127.0.0.1`,
    `- Node ${process.version} for statusq and the raw protocol; ${peerNodes.length > 0 ? `${peerNodes.join(', ')} for the peers (their \`engines\` ask for Node 22 or newer)` : `the same for the peers, whose \`engines\` ask for Node 22 (pnpm only warns)`}`,
  ];
  for (const dialect of dialects) {
    const db = await openBenchDatabase(dialect);
    try {
      lines.push(`- ${await db.version()}`);
    } finally {
      await db.close();
    }
  }
  const bench = JSON.parse(readFileSync(join(ROOT, 'apps', 'bench', 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
  const dev = bench.devDependencies;
  lines.push(
    `- Peers: graphile-worker ${dev['graphile-worker']}, pg-boss ${dev['pg-boss']}, BullMQ ${dev.bullmq} (ioredis ${dev.ioredis}). The SQL peers and statusq commit durably; BullMQ's Redis keeps what its variant says (a Redis without \`save\` or AOF keeps nothing on disk)`,
  );
  return lines;
}

function writeDocs(records: readonly BenchRecord[], machine: readonly string[], resultsFile: string): void {
  mkdirSync(DOCS_DATA, { recursive: true });
  const chart = join(DOCS_DATA, 'throughput.svg');
  writeFileSync(chart, throughputSvg(records, 'Burn-down of no-op jobs: jobs/s by system and worker count (16 slots per worker; the raw protocol claims 50)'));
  const ratios = ratioLines(records);
  const ceiling = ceilingLines(records);
  const generated = [
    BEGIN,
    `_Generated by \`pnpm bench\` on ${new Date().toISOString().slice(0, 10)} from [${relative(dirname(DOCS), resultsFile)}](${relative(dirname(DOCS), resultsFile)}); do not edit by hand._`,
    '',
    ...machine,
    '',
    `![jobs/s by system and worker count](${relative(dirname(DOCS), chart)})`,
    '',
    '### Ratios (statusq jobs/s over the peer\'s, same run)',
    '',
    ...(ratios.length > 0 ? ratios.map((l) => `- ${l}`) : ['- (no peer ran)']),
    '',
    '### statusq as a share of the raw protocol (same dialect, table and worker count, same run)',
    '',
    ...(ceiling.length > 0 ? ceiling.map((l) => `- ${l}`) : ['- (no raw-protocol row)']),
    '',
    markdownReport(records),
    END,
  ].join('\n');
  writeGeneratedBlock(DOCS, 'Benchmarks', { begin: BEGIN, end: END }, generated);
}

async function main(args: Args): Promise<void> {
  if (args.render) {
    const records = readFileSync(args.render, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as BenchRecord);
    writeDocs(records, await machineDescription(DIALECTS, records), args.render);
    console.log(`rewrote ${relative(process.cwd(), DOCS)} from ${args.render}`);
    return;
  }
  const base = args.quick ? QUICK_PLAN : FULL_PLAN;
  const plan = { ...base, ...(args.workers && { workerCounts: args.workers, handlerWorkerCounts: args.workers, slotWorkerCounts: args.workers, peerWorkerCounts: args.workers }), ...(args.jobs && { jobs: args.jobs, slowJobs: args.jobs, targetJobs: args.jobs, brokerJobs: args.jobs }), ...(args.slots && { slotSizes: args.slots }), ...(args.strategies && { strategies: args.strategies }), ...(args.rounds && { observabilityRounds: args.rounds }) };
  const partial =
    args.workers !== null || args.jobs !== null || args.slots !== null || args.strategies !== null || args.rounds !== null || args.progress || args.variants !== null || args.sideBySide || !args.peers || args.only.length < SCENARIOS.length || args.dialects.length < DIALECTS.length;
  // Quick runs of some dialects may run side by side (pnpm test runs one per database): a file each.
  const quickName = args.dialects.length < DIALECTS.length ? `quick-${args.dialects.join('-')}.jsonl` : 'quick.jsonl';
  const resultsFile = args.quick || partial ? join(ROOT, 'apps', 'bench', 'results', args.quick ? quickName : 'partial.jsonl') : join(DOCS_DATA, 'results.jsonl');
  mkdirSync(dirname(resultsFile), { recursive: true });
  writeFileSync(resultsFile, '');
  const records: BenchRecord[] = [];
  const ctx: BenchContext = {
    plan,
    dialects: args.dialects,
    peers: args.peers ? await loadPeers() : [],
    peerNode: args.peers && args.dialects.includes('postgres') ? await peerNode() : process.execPath,
    record(record) {
      records.push(record);
      writeFileSync(resultsFile, JSON.stringify(record) + '\n', { flag: 'a' });
      console.log(`  ${JSON.stringify(record)}`);
    },
    log: (line) => console.log(line),
  };
  const started = performance.now();
  console.log(`statusq bench${args.quick ? ' --quick' : ''}: ${args.only.join(', ')} on ${args.dialects.join(', ')}${ctx.peers.length ? ` with ${ctx.peers.map((p) => `${p.system} ${p.variant}`).join(', ')}` : ''}`);
  for (const scenario of args.only) {
    const scenarioStarted = performance.now();
    console.log(`\n${scenario}`);
    if (scenario === 'burn-down') await burnDown(ctx);
    else if (scenario === 'peers') await peers(ctx);
    else if (scenario === 'batch-size') await batchSize(ctx);
    else if (scenario === 'pickup') await pickup(ctx);
    else if (scenario === 'idle-pickup') await idlePickup(ctx);
    else if (scenario === 'cost-growth') await costGrowth(ctx);
    else if (scenario === 'claim-shapes') await claimShapes(ctx);
    else if (scenario === 'claim-limits') await claimLimits(ctx);
    else if (scenario === 'prune-alongside') await pruneAlongside(ctx);
    else if (scenario === 'claim-state') await claimState(ctx);
    else if (scenario === 'claimers') await claimers(ctx);
    else if (scenario === 'claim-latency') await claimLatency(ctx);
    else if (scenario === 'rate-limit') await rateLimit(ctx);
    else if (scenario === 'broker') await broker(ctx);
    else if (scenario === 'wait-for') await waitForScenario(ctx);
    else if (scenario === 'observability') await observability(ctx, { rounds: plan.observabilityRounds, variants: observabilityVariants(args), sideBySide: args.sideBySide });
    else {
      await burnDown(ctx, 'handler-5ms');
      await peers(ctx, 'handler-5ms');
    }
    console.log(`${scenario}: ${((performance.now() - scenarioStarted) / 1000).toFixed(1)} s`);
  }
  console.log(`\n${textReport(records)}\n`);
  for (const line of [...ratioLines(records), ...ceilingLines(records)]) console.log(line);
  console.log(`\n${records.length} measurements in ${((performance.now() - started) / 1000).toFixed(1)} s, written to ${relative(process.cwd(), resultsFile)}`);
  if (!args.quick && !partial) {
    writeDocs(records, await machineDescription(args.dialects, records), resultsFile);
    console.log(`rewrote ${relative(process.cwd(), DOCS)} and its chart`);
  }
}

let args: Args;
try {
  args = parseArgs(process.argv.slice(2));
} catch (error) {
  if (!(error instanceof UsageError)) throw error;
  console.error(`bench: ${error.message}`);
  process.exit(2);
}
main(args)
  .then(
    () => undefined,
    (error: unknown) => {
      console.error(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      process.exitCode = 1;
    },
  )
  .finally(() => {
    // Everything is closed by now and the process should end by itself; if a peer library left a handle open,
    // say so and end anyway rather than hang CI.
    setTimeout(() => {
      console.error('bench: an open handle kept the process alive after the run; exiting');
      process.exit(process.exitCode ?? 1);
    }, 10_000).unref();
  });
