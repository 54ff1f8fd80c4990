/**
 * Turns bench records into tables (plain text for the terminal, Markdown for docs/benchmarks.md), the
 * headline ratios against the peers, and an SVG bar chart of jobs/s per system and worker count.
 */
import { STATUS_ONLY_VARIANT, quantile, round, type BenchRecord, type BurnDownRecord, type ClaimShapeRecord, type CostRecord, type IdlePickupRecord, type PickupRecord, type PruneRecord, type ClaimStateRecord, type ClaimersRecord, type ClaimLatencyRecord, type RateLimitRecord } from './records.js';

type Cell = string | number;

function format(value: Cell | undefined): string {
  if (value === undefined) return '';
  if (typeof value === 'number') return Number.isFinite(value) ? value.toLocaleString('en-US', { maximumFractionDigits: 2 }) : 'n/a';
  return value;
}

function markdownTable(header: readonly string[], rows: readonly Cell[][]): string {
  const lines = [`| ${header.join(' | ')} |`, `|${header.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`];
  for (const row of rows) lines.push(`| ${row.map(format).join(' | ')} |`);
  return lines.join('\n');
}

function textTable(header: readonly string[], rows: readonly Cell[][]): string {
  const cells = [header.map(String), ...rows.map((r) => r.map(format))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n');
}

/** The record with the most jobs/s, if any. */
function fastest(records: readonly BurnDownRecord[]): BurnDownRecord | undefined {
  return [...records].sort((a, b) => b.jobsPerSec - a.jobsPerSec)[0];
}

/** The rows measured on statusq's own dialects (labelled with the dialect), as against the peers'. */
const OWN_SYSTEMS: ReadonlySet<BurnDownRecord['system']> = new Set(['statusq', 'raw-protocol', 'raw-statusq-sql']);

export function systemLabel(r: BurnDownRecord | PickupRecord): string {
  return OWN_SYSTEMS.has(r.system) ? `${r.system} ${r.dialect} ${r.variant}` : `${r.system} ${r.variant}`;
}

export interface Section {
  title: string;
  header: string[];
  rows: Cell[][];
}

function burnDownSection(title: string, records: readonly BurnDownRecord[]): Section {
  return {
    title,
    header: ['system', 'workers', 'processes', 'slots/worker', 'jobs', 'seconds', 'jobs/s', 'claims/job', 'claim round trips/job', 'lost/100 claims', 'deadlocks/1,000 jobs', 'CPU workers', 'CPU server'],
    rows: records.map((r) => [
      systemLabel(r) + (r.timedOut ? ' (timed out)' : ''),
      r.workers,
      r.processes,
      r.concurrency,
      r.handled,
      r.seconds,
      r.jobsPerSec,
      r.claimCallsPerJob ?? '',
      r.claimRoundTripsPerJob ?? '',
      r.lostPer100 ?? '',
      r.dialect === 'mysql' ? (r.deadlocksPer1000 ?? '') : '',
      r.benchCpu ?? '',
      r.serverCpu ?? '',
    ]),
  };
}

/**
 * One row per dialect and worker count; per slots-per-worker, statusq's jobs/s, the raw protocol's at the same
 * rows per claim (minimal SQL, then statusq's statements), and statusq's share of each; then statusq's best size.
 */
function batchSizeSection(records: readonly BurnDownRecord[]): Section {
  const slots = [...new Set(records.map((r) => r.concurrency))].sort((a, b) => a - b);
  const keyOf = (r: BurnDownRecord) => `${r.dialect}|${r.workers}`;
  const keys = [...new Set(records.map(keyOf))];
  const cell = (r: BurnDownRecord | undefined): Cell => (r ? (r.timedOut ? `${format(r.jobsPerSec)} (timed out)` : r.jobsPerSec) : '');
  return {
    title: "Batch size (statusq native claim, no-op handler; slots per worker = rows per claim; the raw protocol at the same rows per claim, with the minimal SQL and with statusq's statements)",
    header: ['dialect', 'workers', ...slots.flatMap((n) => [`statusq at ${n}`, `raw at ${n}`, `% of raw`, `raw statusq SQL at ${n}`, `% of raw statusq SQL`]), 'statusq best slots'],
    rows: keys.map((key) => {
      const [dialect, workers] = key.split('|');
      // statusq's row is its default table (every optional column); its `status only` runs have a section of their own.
      const of = (system: BurnDownRecord['system'], n: number) => records.find((r) => keyOf(r) === key && r.system === system && r.concurrency === n && r.variant !== STATUS_ONLY_VARIANT);
      const best = fastest(records.filter((r) => keyOf(r) === key && r.system === 'statusq' && r.variant === 'native' && !r.timedOut));
      return [
        dialect!,
        Number(workers),
        ...slots.flatMap((n) => {
          const ours = of('statusq', n);
          const share = (ceiling: BurnDownRecord | undefined): Cell => (ours && ceiling && ceiling.jobsPerSec > 0 ? percent(ours.jobsPerSec, ceiling.jobsPerSec) : '');
          const raw = of('raw-protocol', n);
          const rawStatusq = of('raw-statusq-sql', n);
          return [cell(ours), cell(raw), share(raw), cell(rawStatusq), share(rawStatusq)];
        }),
        best?.concurrency ?? '',
      ];
    }),
  };
}

function sections(records: readonly BenchRecord[]): Section[] {
  const out: Section[] = [];
  const burn = records.filter((r): r is BurnDownRecord => r.scenario === 'burn-down');
  if (burn.length > 0) out.push(burnDownSection('Burn-down and contention (no-op handler)', burn));
  const sweep = records.filter((r): r is BurnDownRecord => r.scenario === 'batch-size');
  if (sweep.length > 0) out.push(batchSizeSection(sweep));
  const statusOnly = sweep.filter((r) => r.system === 'statusq' && r.variant === STATUS_ONLY_VARIANT);
  if (statusOnly.length > 0) {
    const raw = (r: BurnDownRecord) => sweep.find((x) => x.system === 'raw-protocol' && x.dialect === r.dialect && x.workers === r.workers && x.concurrency === r.concurrency);
    const full = (r: BurnDownRecord) => sweep.find((x) => x.system === 'statusq' && x.variant === 'native' && x.dialect === r.dialect && x.workers === r.workers && x.concurrency === r.concurrency);
    out.push({
      title: "statusq over the raw loop's own protocol (every optional column off and select []: status written, the id read back; same rows per claim)",
      header: ['dialect', 'workers', 'slots', 'status only', 'raw', '% of raw', 'every column (leases, tokens)', '% of raw'],
      rows: statusOnly.map((r) => {
        const ceiling = raw(r);
        const everyColumn = full(r);
        const share = (x: BurnDownRecord | undefined): Cell => (x && ceiling && ceiling.jobsPerSec > 0 ? percent(x.jobsPerSec, ceiling.jobsPerSec) : '');
        return [r.dialect, r.workers, r.concurrency, r.jobsPerSec, ceiling?.jobsPerSec ?? '', share(r), everyColumn?.jobsPerSec ?? '', share(everyColumn)];
      }),
    });
  }
  const checks = targetChecks(records);
  if (checks.length > 0) {
    out.push({
      title: "Target check (statusq over the raw loop's own protocol and the minimal raw loop, each at its two fastest settings of the sweep, run again in alternating rounds; the better median of each side)",
      header: ['dialect', 'statusq setting', 'raw setting', 'rounds', 'jobs a run', 'statusq median', 'statusq range', 'raw median', 'raw range', '% of raw'],
      rows: checks.map((c) => [c.dialect, `${c.ours.workers} x ${c.ours.concurrency}`, `${c.raw.workers}, ${c.raw.variant}`, c.rounds, c.jobs, c.ours.median, c.ours.range, c.raw.median, c.raw.range, percent(c.ours.median, c.raw.median)]),
    });
  }
  const pickups = records.filter((r): r is PickupRecord => r.scenario === 'pickup');
  if (pickups.length > 0) {
    const delayed = (r: PickupRecord) => / delayed \d+ ms$/.test(r.variant);
    out.push({
      title: `Pick-up latency (idle worker, one row every 10 ms; a delayed row timed from when it came due, each alone, issue 40's target p99 <= ${DELAYED_PICKUP_TARGET_P99_MS} ms)`,
      header: ['system', 'rows', 'received', 'p50 ms', 'p99 ms', 'max ms', 'target'],
      rows: pickups.map((r) => [systemLabel(r), r.rows, r.received, r.p50Ms, r.p99Ms, r.maxMs, delayed(r) ? (r.received === r.rows && r.p99Ms <= DELAYED_PICKUP_TARGET_P99_MS ? 'met' : 'missed') : '']),
    });
  }
  const idle = records.filter((r): r is IdlePickupRecord => r.scenario === 'idle-pickup');
  if (idle.length > 0) {
    out.push({
      title: `Pick-up after an idle spell (one worker idle ${format(idle[0]!.idleSeconds)} s, then one row at a time)`,
      header: ['system', 'idle CPU worker %', 'idle CPU server %', 'rows', 'received', 'p50 ms', 'p99 ms', 'max ms'],
      rows: idle.map((r) => [`statusq ${r.dialect} ${r.variant}`, r.idleWorkerCpuPercent, r.idleServerCpuPercent ?? '', r.rows, r.received, r.p50Ms, r.p99Ms, r.maxMs]),
    });
  }
  const costs = records.filter((r): r is CostRecord => r.scenario === 'cost-growth');
  if (costs.length > 0) {
    out.push({
      title: 'Cost growth (finished rows kept in the table; 1 worker x 64 slots)',
      header: ['dialect', 'finished rows', 'pending index', 'jobs', 'claims', 'claim p50 ms', 'claim p99 ms', 'jobs/s'],
      rows: costs.map((r) => [r.dialect, r.finishedRows, r.pendingIndex ? 'yes' : 'no', r.timedOut ? `${format(r.handled)} of ${format(r.jobs)} (cut off)` : r.handled, r.claimCalls, r.claimP50Ms, r.claimP99Ms, r.jobsPerSec]),
    });
  }
  const shapes = records.filter((r): r is ClaimShapeRecord => r.scenario === 'claim-shapes');
  if (shapes.length > 0) {
    out.push({
      title: 'Claim by table shape (plain; a priority column, ten levels mixed; rows due in a day ahead of the due ones, newest first; 1 worker x 64 slots)',
      header: ['dialect', 'shape', 'pending rows', 'of them delayed', 'jobs', 'claims', 'claim p50 ms', 'claim p99 ms', 'jobs/s'],
      rows: shapes.map((r) => [r.dialect, r.shape, r.pendingRows, r.delayedRows, r.timedOut ? `${format(r.handled)} of ${format(r.jobs)} (cut off)` : r.handled, r.claimCalls, r.claimP50Ms, r.claimP99Ms, r.jobsPerSec]),
    });
  }
  const prunes = records.filter((r): r is PruneRecord => r.scenario === 'prune-alongside');
  if (prunes.length > 0) {
    out.push({
      title: 'Burn-down beside a prune (8 workers x 64 slots over the pending rows, alone and while `prune` deletes the old finished ones in batches of 1,000)',
      header: ['dialect', 'finished rows', 'prune running', 'jobs', 'jobs/s', 'pruned', 'prune s', 'pruned rows/s'],
      rows: prunes.map((r) => [r.dialect, r.finishedRows, r.pruning ? 'yes' : 'no', r.timedOut ? `${format(r.handled)} of ${format(r.jobs)} (cut off)` : r.handled, r.jobsPerSec, r.pruned ?? '', r.pruneSeconds ?? '', r.pruneRowsPerSec ?? '']),
    });
  }
  const states = records.filter((r): r is ClaimStateRecord => r.scenario === 'claim-state');
  if (states.length > 0) {
    const inTable = (r: ClaimStateRecord) => states.find((o) => o.dialect === r.dialect && o.claimState === 'in-table');
    const usPerJob = (r: ClaimStateRecord | undefined) => (r && r.jobsPerSec > 0 ? Math.round(1_000_000 / r.jobsPerSec) : null);
    out.push({
      title: `Claim state in the table's own columns or beside it (\`migrate --beside\`): ${states[0]!.workers} workers x ${states[0]!.concurrency} slots burn down no-op jobs; the cost of leaving the application's table unchanged`,
      header: ['dialect', 'claim state', 'jobs', 'jobs/s', 'µs per job', 'more per job than in-table'],
      rows: states.map((r) => {
        const own = usPerJob(inTable(r));
        const mine = usPerJob(r);
        return [r.dialect, r.claimState, r.timedOut ? `${format(r.handled)} of ${format(r.jobs)} (cut off)` : r.handled, r.jobsPerSec, mine ?? '', r.claimState === 'beside' && own !== null && mine !== null ? `${mine - own} µs (${Math.round(((mine - own) / own) * 100)}%)` : ''];
      }),
    });
  }
  const fleet = records.filter((r): r is ClaimersRecord => r.scenario === 'claimers');
  if (fleet.length > 0) {
    // Each run against the best count of its own dialect and gate setting.
    const best = (r: ClaimersRecord) => Math.max(...fleet.filter((o) => o.dialect === r.dialect && o.claimGate === r.claimGate).map((o) => o.jobsPerSec));
    out.push({
      title: `Many claimers on one table (each worker a store of its own, ${fleet[0]!.concurrency} slots, no-op jobs; MySQL/MariaDB with its claim gate and without, \`?claimGate=0\`; PostgreSQL on a server of the bench's own, max_connections 400)`,
      header: ['dialect', 'workers', 'claim gate', 'jobs', 'jobs/s', 'of the best count', 'CPU server', 'CPU workers'],
      rows: fleet.map((r) => [
        r.dialect,
        r.workers,
        r.claimGate === null ? '' : r.claimGate === 'default' ? 'on (8)' : 'off',
        r.timedOut ? `${format(r.handled)} of ${format(r.jobs)} (cut off)` : r.handled,
        r.jobsPerSec,
        `${Math.round((100 * r.jobsPerSec) / best(r))}%`,
        r.serverCpu ?? '',
        r.workersCpu ?? '',
      ]),
    });
  }
  const latencies = records.filter((r): r is ClaimLatencyRecord => r.scenario === 'claim-latency');
  if (latencies.length > 0) {
    const nearby = (r: ClaimLatencyRecord) => latencies.find((o) => o.dialect === r.dialect && o.addedRttMs === 0)?.jobsPerSec;
    out.push({
      title: 'The network in the claim cycle (one worker x 64 slots, claims of 64, no-op jobs, through a TCP proxy adding a round-trip time)',
      header: ['dialect', 'added round trip ms', 'jobs', 'jobs/s', '0 ms over this'],
      rows: latencies.map((r) => {
        const base = nearby(r);
        return [r.dialect, r.addedRttMs, r.timedOut ? `${format(r.handled)} of ${format(r.jobs)} (cut off)` : r.handled, r.jobsPerSec, base !== undefined && r.jobsPerSec > 0 ? `${round(base / r.jobsPerSec, 1)}x` : ''];
      }),
    });
  }
  const rates = records.filter((r): r is RateLimitRecord => r.scenario === 'rate-limit');
  if (rates.length > 0) {
    out.push({
      title: 'Shared rate limit (`work --rate`: 3 processes x 16 slots share one budget over a backlog of jobs; the rate achieved from first settle to last)',
      header: ['dialect', 'limit jobs/s', 'jobs', 'achieved jobs/s', 'of the limit'],
      rows: rates.map((r) => [r.dialect, r.limitPerSec, r.timedOut ? `${format(r.handled)} of ${format(r.jobs)} (cut off)` : r.handled, r.jobsPerSec, `${r.ofLimitPercent}%`]),
    });
  }
  const handler = records.filter((r): r is BurnDownRecord => r.scenario === 'handler-5ms');
  if (handler.length > 0) out.push(burnDownSection('Realistic handler (5 ms of simulated I/O per job)', handler));
  out.push(...brokerSections(records));
  return out;
}

/** Issue 40's target for a delayed row another process enqueued: picked up within this of coming due. */
export const DELAYED_PICKUP_TARGET_P99_MS = 100;

/** Issue 17's pick-up target for the broker path on MariaDB/MySQL, where no LISTEN/NOTIFY wakes a worker. */
export const BROKER_PICKUP_TARGET = { p50Ms: 10, p99Ms: 50 };

/** The pick-up variants the broker scenario records (scenarios.ts brokerVariant): `relay, <broker>`, `dispatchTo, <broker>`. */
const BROKER_PATH = /^(relay|dispatchTo), /;

/**
 * The broker path (scenarios.ts broker): one row per dialect, worker and process count, polling's jobs/s beside
 * each broker variant's and its share of polling; then the pick-up rows of the broker path beside polling and the
 * store's own wake-up (the pickup scenario's, native claim) with issue 17's target read on MariaDB/MySQL.
 */
export function brokerSections(records: readonly BenchRecord[]): Section[] {
  const out: Section[] = [];
  const runs = records.filter((r): r is BurnDownRecord => r.scenario === 'broker-burn-down');
  if (runs.length > 0) {
    const variants = [...new Set(runs.map((r) => r.variant).filter((v) => v !== 'polling'))];
    const keyOf = (r: BurnDownRecord) => `${r.dialect}|${r.workers}|${r.processes}`;
    const rate = (r: BurnDownRecord | undefined): Cell => (r ? (r.timedOut ? `${format(r.jobsPerSec)} (timed out)` : r.jobsPerSec) : '');
    out.push({
      title: `Broker path: burn-down of ${format(runs[0]!.jobs)} no-op jobs, consumer workers taking the rows a relay in the bench process publishes, against polling workers at the same counts (${runs[0]!.concurrency} slots per worker, no warm-up)`,
      header: ['dialect', 'workers', 'processes', 'polling jobs/s', ...variants.flatMap((v) => [`${v} jobs/s`, 'of polling', 'relay busy', `${v} CPU server`]), 'polling CPU server'],
      rows: [...new Set(runs.map(keyOf))].map((key) => {
        const of = (variant: string) => runs.find((r) => keyOf(r) === key && r.variant === variant);
        const polling = of('polling');
        const [dialect, workers, processes] = key.split('|');
        return [
          dialect!,
          Number(workers),
          Number(processes),
          rate(polling),
          ...variants.flatMap((v) => {
            const run = of(v);
            return [rate(run), run && polling && polling.jobsPerSec > 0 ? percent(run.jobsPerSec, polling.jobsPerSec) : '', run?.relayBusyPercent !== undefined ? `${run.relayBusyPercent}%` : '', run?.serverCpu ?? ''];
          }),
          polling?.serverCpu ?? '',
        ];
      }),
    });
  }
  const pickups = records.filter((r): r is PickupRecord => r.scenario === 'pickup' && r.system === 'statusq');
  const throughBroker = pickups.filter((r) => BROKER_PATH.test(r.variant));
  if (throughBroker.length > 0) {
    const target = BROKER_PICKUP_TARGET;
    out.push({
      title: `Broker path: pick-up latency (one row every 10 ms; issue 17's target on MariaDB/MySQL: p50 < ${target.p50Ms} ms, p99 < ${target.p99Ms} ms)`,
      header: ['dialect', 'variant', 'p50 ms', 'p99 ms', 'max ms', 'target'],
      rows: ['mysql', 'postgres', 'sqlite'].flatMap((dialect) =>
        pickups
          .filter((r) => r.dialect === dialect && (BROKER_PATH.test(r.variant) || r.variant.startsWith('native, ')))
          .map((r) => [dialect, r.variant, r.p50Ms, r.p99Ms, r.maxMs, dialect === 'mysql' ? (r.received === r.rows && r.p50Ms < target.p50Ms && r.p99Ms < target.p99Ms ? 'met' : 'missed') : '']),
      ),
    });
  }
  return out;
}

export function textReport(records: readonly BenchRecord[]): string {
  return sections(records)
    .map((s) => `${s.title}\n${textTable(s.header, s.rows)}`)
    .join('\n\n');
}

export function markdownReport(records: readonly BenchRecord[]): string {
  return sections(records)
    .map((s) => `### ${s.title}\n\n${markdownTable(s.header, s.rows)}`)
    .join('\n\n');
}

/** The fastest in-process run at `workers` that `match` picks, of the burn-down and the batch-size sweep. */
function best(records: readonly BurnDownRecord[], match: (r: BurnDownRecord) => boolean, workers: number): BurnDownRecord | undefined {
  return fastest(records.filter((r) => (r.scenario === 'burn-down' || r.scenario === 'batch-size') && r.processes === 1 && r.workers === workers && match(r)));
}

const STORE_NAMES: Record<string, string> = { postgres: 'PostgreSQL', mysql: 'MariaDB/MySQL', sqlite: 'SQLite', redis: 'Redis' };

/**
 * statusq's throughput over each peer's, per worker count: the numbers the targets are stated in. Each side at
 * its best: statusq at its fastest slots per worker of the burn-down and the sweep (named in the line), each
 * peer variant at the settings its variant names.
 */
export function ratioLines(records: readonly BenchRecord[]): string[] {
  const burn = records.filter((r): r is BurnDownRecord => r.scenario === 'burn-down' || r.scenario === 'batch-size');
  const workerCounts = [...new Set(burn.filter((r) => r.scenario === 'burn-down').map((r) => r.workers))].sort((a, b) => a - b);
  const peerRecords = burn.filter((r) => !OWN_SYSTEMS.has(r.system));
  const peers = [...new Set(peerRecords.map((r) => `${r.system} ${r.variant}`))];
  const lines: string[] = [];
  for (const dialect of ['postgres', 'mysql', 'sqlite'] as const) {
    for (const peer of peers) {
      const parts: string[] = [];
      for (const workers of workerCounts) {
        const ours = best(burn, (r) => r.system === 'statusq' && r.dialect === dialect && r.variant === 'native', workers);
        const theirs = best(burn, (r) => `${r.system} ${r.variant}` === peer, workers);
        if (ours && theirs && theirs.jobsPerSec > 0) parts.push(`${workers} workers ${(ours.jobsPerSec / theirs.jobsPerSec).toFixed(1)}x (${format(ours.jobsPerSec)} at ${ours.concurrency} slots vs ${format(theirs.jobsPerSec)})`);
      }
      const store = peerRecords.find((r) => `${r.system} ${r.variant}` === peer)?.dialect ?? 'postgres';
      if (parts.length > 0) lines.push(`statusq ${dialect} (native claim) vs ${peer} on ${STORE_NAMES[store] ?? store}: ${parts.join(', ')}`);
    }
  }
  return lines;
}

interface CheckedSide {
  workers: number;
  concurrency: number;
  variant: string;
  /** Runs at this setting. */
  rounds: number;
  median: number;
  range: string;
}

interface TargetCheck {
  dialect: BurnDownRecord['dialect'];
  rounds: number;
  /** Jobs of each run (statusq's; the raw loop's are the same). */
  jobs: number;
  ours: CheckedSide;
  raw: CheckedSide;
}

/** Each dialect's target-check rounds (scenarios.ts targetCheck), as the median of each side. */
function targetChecks(records: readonly BenchRecord[]): TargetCheck[] {
  const runs = records.filter((r): r is BurnDownRecord => r.scenario === 'target-check' && !r.timedOut && r.jobsPerSec > 0);
  const side = (of: readonly BurnDownRecord[]): CheckedSide => {
    const rates = of.map((r) => r.jobsPerSec);
    return { workers: of[0]!.workers, concurrency: of[0]!.concurrency, variant: of[0]!.variant, rounds: of.length, median: quantile(rates, 0.5), range: `${format(Math.min(...rates))}-${format(Math.max(...rates))}` };
  };
  // Each side may have run at more than one setting (scenarios.ts targetCheck): its best median counts.
  const best = (of: readonly BurnDownRecord[]): CheckedSide => {
    const bySetting = new Map<string, BurnDownRecord[]>();
    for (const r of of) {
      const key = `${r.workers}/${r.concurrency}/${r.variant}`;
      const setting = bySetting.get(key);
      if (setting) setting.push(r);
      else bySetting.set(key, [r]);
    }
    return [...bySetting.values()].map(side).sort((a, b) => b.median - a.median)[0]!;
  };
  const checks: TargetCheck[] = [];
  for (const dialect of ['postgres', 'mysql', 'sqlite'] as const) {
    const ours = runs.filter((r) => r.dialect === dialect && r.system === 'statusq');
    const raw = runs.filter((r) => r.dialect === dialect && r.system === 'raw-protocol');
    if (ours.length > 0 && raw.length > 0) {
      const oursBest = best(ours);
      const rawBest = best(raw);
      checks.push({ dialect, rounds: Math.min(oursBest.rounds, rawBest.rounds), jobs: ours[0]!.jobs, ours: oursBest, raw: rawBest });
    }
  }
  return checks;
}

/** Issue 14's target: statusq at its best worker count reaches this share of its dialect's raw protocol. */
const CEILING_TARGET = 0.8;

function percent(ours: number, theirs: number): string {
  return `${Math.round((100 * ours) / theirs)}%`;
}

/**
 * statusq as a percentage of the raw protocol, per dialect and worker count: the 16-slot burn-down against the
 * raw loop's 50-row claim (the issue's definition of the ceiling), and each size of the batch-size sweep against
 * the raw loop at the same rows per claim. Then statusq's best against the raw protocol's best, with the target.
 */
export function ceilingLines(records: readonly BenchRecord[]): string[] {
  const burn = records.filter((r): r is BurnDownRecord => (r.scenario === 'burn-down' || r.scenario === 'batch-size') && r.processes === 1 && !r.timedOut && r.jobsPerSec > 0);
  const plural = (n: number) => `${n} worker${n === 1 ? '' : 's'}`;
  const lines: string[] = [];
  for (const dialect of ['postgres', 'mysql', 'sqlite'] as const) {
    const raws = burn.filter((r) => r.system === 'raw-protocol' && r.dialect === dialect);
    if (raws.length === 0) continue;
    const ours = burn.filter((r) => r.system === 'statusq' && r.dialect === dialect && r.variant === 'native');
    const parts: string[] = [];
    for (const workers of [...new Set(raws.map((r) => r.workers))].sort((a, b) => a - b)) {
      const bits: string[] = [];
      const raw50 = raws.find((r) => r.scenario === 'burn-down' && r.workers === workers);
      const atDefault = ours.find((r) => r.scenario === 'burn-down' && r.workers === workers);
      if (raw50 && atDefault) bits.push(`${percent(atDefault.jobsPerSec, raw50.jobsPerSec)} (${atDefault.concurrency} slots vs ${raw50.variant})`);
      for (const swept of ours.filter((r) => r.scenario === 'batch-size' && r.workers === workers).sort((a, b) => a.concurrency - b.concurrency)) {
        const raw = raws.find((r) => r.scenario === 'batch-size' && r.workers === workers && r.concurrency === swept.concurrency);
        if (raw) bits.push(`${percent(swept.jobsPerSec, raw.jobsPerSec)} (${swept.concurrency} vs claim ${raw.concurrency})`);
      }
      if (bits.length > 0) parts.push(`${plural(workers)} ${bits.join(', ')}`);
    }
    const rawBest = fastest(raws)!;
    const ourBest = fastest(ours);
    // The target is read over the raw loop's own protocol (status written, the id read back): statusq's
    // `status only` runs. The default table runs a richer protocol (leases, tokens, retries, results, every
    // column read), whose share is reported beside it.
    const statusOnlyBest = fastest(burn.filter((r) => r.system === 'statusq' && r.dialect === dialect && r.variant === STATUS_ONLY_VARIANT));
    const check = targetChecks(records).find((c) => c.dialect === dialect);
    if (check) {
      const share = check.ours.median / check.raw.median;
      parts.push(
        `target check over the raw loop's own protocol (every optional column off, select []), median of ${check.rounds} alternating round${check.rounds === 1 ? "" : "s"} at each side's better of its two fastest settings of the sweep: statusq ${format(check.ours.median)} jobs/s (${plural(check.ours.workers)} x ${check.ours.concurrency} slots) = ${percent(check.ours.median, check.raw.median)} of the raw protocol's ${format(check.raw.median)} (${plural(check.raw.workers)}, ${check.raw.variant}): target ${Math.round(CEILING_TARGET * 100)}% ${share >= CEILING_TARGET ? 'met' : 'missed'}`,
      );
    } else if (statusOnlyBest) {
      const share = statusOnlyBest.jobsPerSec / rawBest.jobsPerSec;
      parts.push(
        `best over the raw loop's own protocol (every optional column off, select []): statusq ${format(statusOnlyBest.jobsPerSec)} jobs/s (${plural(statusOnlyBest.workers)} x ${statusOnlyBest.concurrency} slots) = ${percent(statusOnlyBest.jobsPerSec, rawBest.jobsPerSec)} of the raw protocol's best ${format(rawBest.jobsPerSec)} (${plural(rawBest.workers)}, ${rawBest.variant}): target ${Math.round(CEILING_TARGET * 100)}% ${share >= CEILING_TARGET ? 'met' : 'missed'}`,
      );
    }
    if (ourBest) {
      parts.push(
        `default table (leases, tokens, retries, results; every column read) at best ${format(ourBest.jobsPerSec)} jobs/s (${plural(ourBest.workers)} x ${ourBest.concurrency} slots) = ${percent(ourBest.jobsPerSec, rawBest.jobsPerSec)} of the raw protocol's best`,
      );
      // The gap in two parts: statusq's statements by hand against the minimal SQL (what the lease, token and
      // due columns and RETURNING * cost), and statusq against its own statements by hand (what the worker costs).
      const statementsBest = fastest(burn.filter((r) => r.system === 'raw-statusq-sql' && r.dialect === dialect));
      if (statementsBest) {
        parts.push(
          `statusq's statements by hand at best ${format(statementsBest.jobsPerSec)} (${plural(statementsBest.workers)}, ${statementsBest.variant}) = ${percent(statementsBest.jobsPerSec, rawBest.jobsPerSec)} of the minimal protocol (the protocol's features); statusq = ${percent(ourBest.jobsPerSec, statementsBest.jobsPerSec)} of its own statements by hand (the worker)`,
        );
      }
    }
    if (parts.length > 0) lines.push(`${STORE_NAMES[dialect]}: ${parts.join('; ')}`);
  }
  return lines;
}

const PALETTE = ['#1b9e77', '#66a61e', '#a6d854', '#d95f02', '#fc8d62', '#7570b3', '#8da0cb', '#e7298a', '#e6ab02', '#666666'];

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Grouped bars: one group per worker count, one bar per system (in-process workers, no-op handler). */
export function throughputSvg(records: readonly BenchRecord[], caption: string): string {
  const burn = records.filter((r): r is BurnDownRecord => r.scenario === 'burn-down' && r.processes === 1);
  const series = [...new Set(burn.map(systemLabel))];
  const groups = [...new Set(burn.map((r) => r.workers))].sort((a, b) => a - b);
  const max = Math.max(1, ...burn.map((r) => r.jobsPerSec));
  const step = 10 ** Math.floor(Math.log10(max));
  const top = Math.ceil(max / step) * step;
  const bar = 14;
  const gap = 28;
  const left = 70;
  const plotTop = 40;
  const plotHeight = 300;
  const groupWidth = series.length * bar + gap;
  const legendTop = plotTop + plotHeight + 50;
  const width = Math.max(left + groups.length * groupWidth + 20, 640);
  const height = legendTop + series.length * 18 + 20;
  const y = (v: number) => Math.round((plotTop + plotHeight - (v / top) * plotHeight) * 10) / 10;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${left}" y="20" font-size="13" font-weight="bold">${escapeXml(caption)}</text>`,
  ];
  for (let v = 0; v <= top; v += step) {
    out.push(`<line x1="${left}" x2="${width - 10}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`);
    out.push(`<text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${v.toLocaleString('en-US')}</text>`);
  }
  out.push(`<text x="14" y="${plotTop + plotHeight / 2}" transform="rotate(-90 14 ${plotTop + plotHeight / 2})" text-anchor="middle">jobs/s</text>`);
  groups.forEach((workers, g) => {
    const x0 = left + gap / 2 + g * groupWidth;
    series.forEach((name, s) => {
      const r = burn.find((b) => b.workers === workers && systemLabel(b) === name);
      if (!r) return;
      const x = x0 + s * bar;
      out.push(`<rect x="${x}" y="${y(r.jobsPerSec)}" width="${bar - 2}" height="${Math.round((plotTop + plotHeight - y(r.jobsPerSec)) * 10) / 10}" fill="${PALETTE[s % PALETTE.length]}"><title>${escapeXml(`${name}, ${workers} workers: ${r.jobsPerSec} jobs/s`)}</title></rect>`);
    });
    out.push(`<text x="${x0 + (series.length * bar) / 2}" y="${plotTop + plotHeight + 18}" text-anchor="middle">${workers} worker${workers === 1 ? '' : 's'}</text>`);
  });
  series.forEach((name, s) => {
    const ly = legendTop + s * 18;
    out.push(`<rect x="${left}" y="${ly - 10}" width="12" height="12" fill="${PALETTE[s % PALETTE.length]}"/>`);
    out.push(`<text x="${left + 18}" y="${ly}">${escapeXml(name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
