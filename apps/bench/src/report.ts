/**
 * Turns bench records into tables, one or more per scenario (plain text for the terminal, Markdown for
 * docs/benchmarks.md). The lines above them are report-ratios.ts and report-ceiling.ts; the chart report-chart.ts.
 */
import { STATUS_ONLY_VARIANT, round, type BenchRecord, type BurnDownRecord, type ClaimShapeRecord, type ClaimLimitRecord, type CostRecord, type IdlePickupRecord, type PickupRecord, type PruneRecord, type ClaimStateRecord, type ClaimersRecord, type ClaimLatencyRecord, type RateLimitRecord, type WaitForRecord } from './records.js';
import { brokerSections } from './report-broker.js';
import { targetChecks } from './report-ceiling.js';
import { fastest, format, markdownTable, percent, systemLabel, textTable, type Cell, type Section } from './report-format.js';

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
  const waits = records.filter((r): r is WaitForRecord => r.scenario === 'wait-for');
  if (waits.length > 0) {
    out.push({
      title: `waitFor pick-up (one waiter; a row settled by another connection after ${format(waits[0]!.runMs[0])}-${format(waits[0]!.runMs[1])} ms; from the settle's commit to waitFor resolving)`,
      header: ['system', 'rows', 'p50 ms', 'p95 ms', 'max ms'],
      rows: waits.map((r) => [`statusq ${r.dialect} ${r.variant}`, r.rows, r.p50Ms, r.p95Ms, r.maxMs]),
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
  const limits = records.filter((r): r is ClaimLimitRecord => r.scenario === 'claim-limits');
  if (limits.length > 0) {
    out.push({
      title: 'Claims with kinds and under group limits (the plain claim; a worker with handlers for 2 of 4 kinds; group limits over 10 and 10,000 groups; 1 worker x 64 slots, claims that took rows timed by the loop)',
      header: ['dialect', 'shape', 'pending rows', 'jobs', 'claims', 'claim p50 ms', 'claim p99 ms', 'jobs/s'],
      rows: limits.map((r) => [r.dialect, r.shape, r.pendingRows, r.timedOut ? `${format(r.handled)} of ${format(r.jobs)} (cut off)` : r.handled, r.claimCalls, r.claimP50Ms, r.claimP99Ms, r.jobsPerSec]),
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
