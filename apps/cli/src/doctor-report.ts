// What `statusq doctor` found, as one object (`--json`) and as the text an operator reads.
import type { StatusCounts } from '@statusq/core';
import type { StoreCapabilities } from '@statusq/core/tools';

export type Verdict = 'pass' | 'warn' | 'fail';

export interface Check {
  name: string;
  status: Verdict;
  detail: string;
  /** What to run or change, when the check did not pass. */
  fix?: string;
}

export interface ClockReading {
  /** The database's clock minus this host's, at the middle of the fastest of a few round trips. */
  offsetMs: number;
  /** Half that round trip: the true offset is within offsetMs ± errorMs. */
  errorMs: number;
}

export interface ServerReport {
  /** The database URL with its password hidden. */
  url: string;
  /** Null when the adapter reports no server facts (no Store.inspection) or the server could not be reached. */
  version: string | null;
  isolation: string | null;
  timeZone: string | null;
  settings: Record<string, string>;
  clock: ClockReading | null;
  capabilities: StoreCapabilities | null;
  /** How `native` claims run on this store: `one statement`, `transaction`, or `conditional update` (no native claim). */
  claim: string | null;
}

export interface RaceReport {
  /** The scratch table, created by init and dropped afterwards. */
  table: string;
  jobs: number;
  workers: number;
  /** Rows that ended done. */
  done: number;
  /** Jobs whose handler ran more than once. */
  ranTwice: number;
  /** Jobs whose handler never ran. */
  neverRan: number;
  /** Rows left pending, processing or in any other state when the workers stopped. */
  left: { pending: number; processing: number; failed: number; abuse: number; other: number };
  /** Candidates another worker took first (0 for a claim that skips locked rows). */
  candidatesLost: number;
  /** Errors the workers reported (retried conflicts included). */
  errors: number;
  ms: number;
  jobsPerSecond: number;
  /** The scratch table is gone. */
  dropped: boolean;
}

export interface DoctorReport {
  ok: boolean;
  server: ServerReport;
  checks: Check[];
  /** Null when the race was not run (--race-jobs 0, or the server could not be reached). */
  race: RaceReport | null;
  /** On a table with a kind column: rows by status per kind (rows without a kind under ''), as `stats --json` has them. */
  kinds?: Record<string, StatusCounts>;
}

const LABEL: Readonly<Record<Verdict, string>> = { pass: 'pass', warn: 'WARN', fail: 'FAIL' };

/** The report as text: one line a check (its fix indented below it), then the verdict. */
export function renderReport(report: DoctorReport): string {
  const width = Math.max(...report.checks.map((c) => c.name.length));
  const lines = [`statusq doctor: ${report.server.url}`];
  for (const check of report.checks) {
    lines.push(`  ${LABEL[check.status]}  ${check.name.padEnd(width)}  ${check.detail}`);
    if (check.fix) lines.push(`  ${' '.repeat(4)}  ${' '.repeat(width)}  fix: ${check.fix}`);
  }
  const count = (status: Verdict) => report.checks.filter((c) => c.status === status).length;
  const [failed, warned, passed] = [count('fail'), count('warn'), count('pass')];
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  lines.push(`${report.ok ? 'ok' : 'not ok'}: ${plural(passed, 'check')} passed, ${plural(warned, 'warning')}, ${failed} failed`);
  return lines.join('\n');
}
