import type { MigrateReport, StatusCounts } from '@statusq/core';
import type { WorkerReport } from './processes.js';
import type { RowKind, TableARow } from '@statusq/test-fixtures';
import { checkPassed, type Verdict } from './checks.js';
import { finished, formatCounts } from './progress.js';

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/** At most this many offending ids per failed check; the rest are counted, not listed. */
const MAX_IDS_SHOWN = 10;

export function kindCounts(rows: readonly TableARow[]): Record<RowKind, number> {
  const counts: Record<RowKind, number> = { ok: 0, flaky: 0, poison: 0, abuse: 0 };
  for (const row of rows) counts[row.kind]++;
  return counts;
}

export function describeSeed(rows: readonly TableARow[], ms: number): string {
  const k = kindCounts(rows);
  return `seeded ${fmt(rows.length)} rows (${fmt(k.ok)} ok, ${fmt(k.flaky)} flaky, ${fmt(k.poison)} poison, ${fmt(k.abuse)} abuse) in ${seconds(ms)}`;
}

export function describeMigration(m: MigrateReport): string {
  const columns = m.addedColumns.length > 0 ? `added ${m.addedColumns.join(', ')}` : 'no columns added';
  const index = m.createdIndex ? `created index ${m.createdIndex}` : 'pending index already there';
  return `migrated ${m.table}: ${columns}; ${index}`;
}

export interface RunReport {
  elapsedMs: number;
  totalRows: number;
  counts: StatusCounts;
  workers: readonly WorkerReport[];
  seeded: Record<RowKind, number>;
  maxAttempts: number;
  verdict: Verdict;
  interrupted: boolean;
}

export function printSummary(r: RunReport, out: (line: string) => void = console.log): void {
  const runs = r.workers.reduce((n, w) => n + w.runs, 0);
  const perSecond = (n: number) => fmt((n * 1000) / Math.max(1, r.elapsedMs));
  out('');
  out(`${r.interrupted ? 'interrupted after' : 'finished in'} ${seconds(r.elapsedMs)}: ${fmt(finished(r.counts))} of ${fmt(r.totalRows)} rows, ${perSecond(finished(r.counts))} jobs/s (${fmt(runs)} handler runs, ${perSecond(runs)} runs/s)`);
  out(`final counts: ${formatCounts(r.counts)}`);
  out('');
  printWorkerTable(r.workers, out);
  const retried = r.workers.reduce((n, w) => n + w.counters.retried, 0);
  const expectedRetries = r.seeded.flaky + r.seeded.poison * (r.maxAttempts - 1);
  out(`retries: ${fmt(retried)} (expected ${fmt(expectedRetries)}: ${fmt(r.seeded.flaky)} flaky x 1 + ${fmt(r.seeded.poison)} poison x ${r.maxAttempts - 1})`);
  const errors = r.workers.flatMap((w) => w.errors.map((e) => `${w.label}: ${e}`));
  out(`worker errors: ${errors.length}`);
  for (const e of errors.slice(0, 5)) out(`  ${e}`);
  out('');
  out('checks:');
  for (const check of r.verdict.checks) {
    const ok = checkPassed(check);
    out(`  ${ok ? 'ok  ' : 'FAIL'}  ${check.name}${check.offenders.length === 0 ? '' : `: ${listIds(check.offenders)}`}`);
  }
  out('');
  out(r.verdict.handledTwice.length === 0 ? 'no row was handled twice' : `rows handled twice: ${listIds(r.verdict.handledTwice)}`);
  out(r.verdict.passed && !r.interrupted ? 'PASS' : 'FAIL');
}

function printWorkerTable(workers: readonly WorkerReport[], out: (line: string) => void): void {
  const header = ['worker', 'claimed', 'done', 'retried', 'failed', 'abuse', 'lost', 'fenced', 'runs'];
  const rows = workers.map((w) => [
    w.label,
    ...[w.counters.claimed, w.counters.completed, w.counters.retried, w.counters.failed, w.counters.abused, w.counters.candidatesLost, w.counters.claimLost, w.runs].map(fmt),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => '  ' + cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  out(line(header));
  for (const row of rows) out(line(row));
  out('  (lost: candidates another worker claimed first; fenced: settles refused because the claim was taken over)');
}

function listIds(ids: readonly number[]): string {
  const shown = ids.slice(0, MAX_IDS_SHOWN).join(', ');
  return ids.length > MAX_IDS_SHOWN ? `${shown} ... (${fmt(ids.length)} ids)` : shown;
}
