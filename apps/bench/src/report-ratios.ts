/** The ratio lines of the report: statusq's jobs/s over each peer's, from the same run. */
import type { BenchRecord, BurnDownRecord } from './records.js';
import { OWN_SYSTEMS, STORE_NAMES, fastest, format } from './report-format.js';

/** The fastest in-process run at `workers` that `match` picks, of the burn-down and the batch-size sweep. */
function best(records: readonly BurnDownRecord[], match: (r: BurnDownRecord) => boolean, workers: number): BurnDownRecord | undefined {
  return fastest(records.filter((r) => (r.scenario === 'burn-down' || r.scenario === 'batch-size') && r.processes === 1 && r.workers === workers && match(r)));
}

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
