import { DEFAULT_STATUS_CODES, statusCode } from '@statusq/core';
import { expectedStatus, type RowKind } from '@statusq/test-fixtures';
import type { FinalRow } from './database.js';
import type { Execution, Ledger } from './ledger.js';
import type { WorkerReport } from './processes.js';

export interface Check {
  name: string;
  /** Ids that break the check; empty when it passed. */
  offenders: number[];
  /** A check of figures rather than rows (no id to name): false when they disagree. */
  agrees?: boolean;
}

export const checkPassed = (check: Check): boolean => check.offenders.length === 0 && check.agrees !== false;

export interface Verdict {
  checks: Check[];
  /** Rows run more often than their kind allows, or with an attempt number repeated. */
  handledTwice: number[];
  passed: boolean;
}

/**
 * Compares the ledger with where every row ended. Each fixture kind has exactly one correct history:
 * ok and abuse rows run once, flaky rows run twice (attempt 1 fails, attempt 2 succeeds), poison rows run
 * maxAttempts times and end failed with the reason kept.
 */
export function verifyRun(rows: readonly FinalRow[], ledger: Ledger, maxAttempts: number, workers: readonly WorkerReport[]): Verdict {
  const runs = ledger.byId();
  const known = new Set(rows.map((r) => r.id));
  const expectedRuns: Record<RowKind, number> = { ok: 1, abuse: 1, flaky: 2, poison: maxAttempts };
  const ofKind = (kind: RowKind) => rows.filter((r) => r.kind === kind);
  const runsOf = (row: FinalRow): Execution[] => runs.get(row.id) ?? [];
  const endedAs = (row: FinalRow) => row.status === statusCode(expectedStatus(row.kind, true), DEFAULT_STATUS_CODES);
  // The attempts of a correct history are exactly 1..n, each once.
  const attemptsAre = (row: FinalRow, n: number) => {
    const attempts = runsOf(row).map((e) => e.attempt).sort((a, b) => a - b);
    return attempts.length === n && attempts.every((a, i) => a === i + 1);
  };
  const failing = (list: readonly FinalRow[], ok: (row: FinalRow) => boolean) => list.filter((r) => !ok(r)).map((r) => r.id);

  const repeatedAttempt = [...runs].filter(([, list]) => new Set(list.map((e) => e.attempt)).size !== list.length).map(([id]) => id);
  const overRun = rows.filter((r) => runsOf(r).length > expectedRuns[r.kind]).map((r) => r.id);
  const handledTwice = [...new Set([...repeatedAttempt, ...overRun])].sort((a, b) => a - b);

  const checks: Check[] = [
    { name: 'no (id, attempt) pair executed twice', offenders: repeatedAttempt },
    { name: 'every execution was of a seeded row', offenders: [...runs.keys()].filter((id) => !known.has(id)) },
    { name: 'ok rows: executed exactly once, done (1)', offenders: failing(ofKind('ok'), (r) => attemptsAre(r, 1) && endedAs(r)) },
    {
      name: 'flaky rows: done (1) after 2 attempts',
      offenders: failing(ofKind('flaky'), (r) => attemptsAre(r, 2) && endedAs(r) && r.attemptCount === 1),
    },
    {
      name: `poison rows: executed ${maxAttempts} times, failed (0) with last_error`,
      offenders: failing(ofKind('poison'), (r) => attemptsAre(r, maxAttempts) && endedAs(r) && r.attemptCount === maxAttempts && !!r.lastError),
    },
    { name: 'abuse rows: executed once, abuse (2)', offenders: failing(ofKind('abuse'), (r) => attemptsAre(r, 1) && endedAs(r)) },
    ...reportChecks(workers, ledger),
  ];
  return { checks, handledTwice, passed: handledTwice.length === 0 && checks.every(checkPassed) };
}

/**
 * The figures the workers report against the ledger, so a summary that disagrees with what ran fails the run
 * (the processes run once printed 0 runs and 0 retries beside a ledger that held them all).
 */
export function reportChecks(workers: readonly WorkerReport[], ledger: Ledger): Check[] {
  const reported = new Set(workers.map((w) => w.label));
  const unreported = ledger.executions.filter((e) => !reported.has(e.worker)).map((e) => e.id);
  const retriedInLedger = ledger.executions.length - ledger.byId().size;
  const retriedReported = workers.reduce((n, w) => n + w.counters.retried, 0);
  const figures = (name: string, agrees: boolean): Check => ({ name, offenders: [], agrees });
  return [
    { name: 'every worker that ran a job reported its figures', offenders: [...new Set(unreported)] },
    ...workers.map((w) => {
      const c = w.counters;
      const settled = c.completed + c.failed + c.abused + c.retried;
      return figures(
        `${w.label}: claimed ${c.claimed}, ran ${w.runs} (ledger), settled ${settled} (done + failed + abuse + retried)`,
        c.claimed === w.runs && settled === c.claimed,
      );
    }),
    figures(`retries: ${retriedReported} reported, ${retriedInLedger} in the ledger`, retriedReported === retriedInLedger),
  ];
}
