import { describe, expect, it } from 'vitest';
import { checkPassed, verifyRun } from './checks.js';
import type { FinalRow } from './database.js';
import { Ledger } from './ledger.js';
import { parseSummaries } from './processes.js';

const MAX_ATTEMPTS = 3;

/** One ok row, one flaky (fails once) and one poison row (every attempt fails), as two processes ran them. */
const rows: FinalRow[] = [
  { id: 1, kind: 'ok', status: 1, attemptCount: 1, lastError: null },
  { id: 2, kind: 'flaky', status: 1, attemptCount: 1, lastError: null },
  { id: 3, kind: 'poison', status: 0, attemptCount: 3, lastError: 'unreachable host' },
];

function ledgerOf(executions: Array<[id: number, attempt: number, pid: number]>): Ledger {
  const ledger = new Ledger();
  for (const [id, attempt, pid] of executions) ledger.record({ id, attempt, worker: `pid ${pid}` });
  return ledger;
}
const ledger = () => ledgerOf([[1, 1, 101], [2, 1, 101], [3, 1, 102], [2, 2, 102], [3, 2, 101], [3, 3, 102]]);

/** A launcher's stdout in `--log-format json`: its own lines, and each child's stop summary (the CLI's logSummary). */
function stdoutOf(children: Array<{ pid: number; counters: Record<string, number> }>, extra: string[] = []): string {
  const lines = [
    JSON.stringify({ level: 'info', pid: 100, msg: 'starting 2 worker processes' }),
    ...extra,
    ...children.map(({ pid, counters }) => JSON.stringify({ level: 'info', pid, reason: 'queue empty', seconds: 1.2, counters, msg: 'worked ...' })),
    'not a JSON line',
    JSON.stringify({ level: 'info', pid: 100, msg: 'worker process 101 exited' }),
  ];
  return lines.join('\n') + '\n';
}

const honest = [
  { pid: 101, counters: { claimed: 3, completed: 1, failed: 0, abused: 0, retried: 2 } },
  { pid: 102, counters: { claimed: 3, completed: 1, failed: 1, abused: 0, retried: 1 } },
];

const failedChecks = (stdout: string) =>
  verifyRun(rows, ledger(), MAX_ATTEMPTS, parseSummaries(stdout, ledger())).checks.filter((c) => !checkPassed(c)).map((c) => c.name);

describe("the demo's processes run: the children's figures against the ledger", () => {
  it('reads each child summary from the JSON log, with its worker errors (not its jobs\' failures), and passes when the figures agree', () => {
    const logged = [
      JSON.stringify({ level: 'error', pid: 102, during: 'claim', msg: 'claim: database is locked' }),
      JSON.stringify({ level: 'error', pid: 101, jobId: 3, attempt: 3, outcome: 'failed', msg: 'job failed: unreachable host' }),
    ];
    const reports = parseSummaries(stdoutOf(honest, logged), ledger());
    expect(reports.map((r) => [r.label, r.runs, r.counters.claimed, r.counters.retried, r.errors])).toEqual([
      ['pid 101', 3, 3, 2, []],
      ['pid 102', 3, 3, 1, ['claim: database is locked']],
    ]);
    expect(verifyRun(rows, ledger(), MAX_ATTEMPTS, reports).passed).toBe(true);
  });

  it('fails when no summary could be read (the run that printed 0 handler runs and 0 retries)', () => {
    expect(failedChecks('worked 3 jobs in 1.2 s: done 1 ... [pid 101]\n')).toEqual(['every worker that ran a job reported its figures', 'retries: 0 reported, 3 in the ledger']);
  });

  it('fails when a child is missing, claims differ from its runs, or its settles do not add up', () => {
    expect(failedChecks(stdoutOf([honest[0]!]))).toEqual(['every worker that ran a job reported its figures', 'retries: 2 reported, 3 in the ledger']);
    const undercounted = [honest[0]!, { pid: 102, counters: { ...honest[1]!.counters, claimed: 2 } }];
    expect(failedChecks(stdoutOf(undercounted))).toEqual(['pid 102: claimed 2, ran 3 (ledger), settled 3 (done + failed + abuse + retried)']);
    const unsettled = [honest[0]!, { pid: 102, counters: { ...honest[1]!.counters, failed: 0 } }];
    expect(failedChecks(stdoutOf(unsettled))).toEqual(['pid 102: claimed 3, ran 3 (ledger), settled 2 (done + failed + abuse + retried)']);
  });
});
