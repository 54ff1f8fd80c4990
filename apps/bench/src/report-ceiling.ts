/**
 * statusq against the raw protocol (issue 14's target): the target check's medians, and the ceiling lines of
 * the report, per dialect and worker count.
 */
import { STATUS_ONLY_VARIANT, quantile, type BenchRecord, type BurnDownRecord } from './records.js';
import { STORE_NAMES, fastest, format, percent } from './report-format.js';

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

/** Each dialect's target-check rounds (throughput-scenarios.ts targetCheck), as the median of each side. */
export function targetChecks(records: readonly BenchRecord[]): TargetCheck[] {
  const runs = records.filter((r): r is BurnDownRecord => r.scenario === 'target-check' && !r.timedOut && r.jobsPerSec > 0);
  const side = (of: readonly BurnDownRecord[]): CheckedSide => {
    const rates = of.map((r) => r.jobsPerSec);
    return { workers: of[0]!.workers, concurrency: of[0]!.concurrency, variant: of[0]!.variant, rounds: of.length, median: quantile(rates, 0.5), range: `${format(Math.min(...rates))}-${format(Math.max(...rates))}` };
  };
  // Each side may have run at more than one setting (throughput-scenarios.ts targetCheck): its best median counts.
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

/**
 * statusq as a percentage of the raw protocol, per dialect and worker count: the 16-slot burn-down against the
 * raw loop's 50-row claim (the definition of the ceiling), and each size of the batch-size sweep against
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
