import { emptyWorkerCounters } from '@statusq/core/tools';
import { describe, expect, it } from 'vitest';
import { verifyLedger, type Execution, type FinalRow } from './ledger-check.js';
import type { ProcessCounters } from './worker-hosts.js';

const run = (id: string, attempt: number, pid: number): Execution => ({ id, attempt, pid, host: `h${pid}` });
const done = (id: string, resultPid: number): FinalRow => ({ id, status: 1, resultPid });
const counters = (pid: number, claimLost = 0): ProcessCounters => ({ pid, counters: { ...emptyWorkerCounters(), claimLost } });

describe('verifyLedger (the scale runs’ exactly-once proof)', () => {
  it('holds for rows each run once by a live worker whose result is its own', () => {
    const verdict = verifyLedger([done('1', 10), done('2', 11)], [run('1', 1, 10), run('2', 1, 11)], [counters(10), counters(11)], new Set());
    expect(verdict).toMatchObject({ rows: 2, executions: 2, reRuns: 0, violations: [] });
  });

  it('accepts a re-run after its first owner was killed, and one whose first owner was told its claim was taken over', () => {
    const rows = [done('1', 11), done('2', 11)];
    const executions = [run('1', 1, 10), run('1', 2, 11), run('2', 1, 12), run('2', 2, 11)];
    const verdict = verifyLedger(rows, executions, [counters(11), counters(12, 1)], new Set([10]));
    expect(verdict).toMatchObject({ reRuns: 2, reRunsAfterDeath: 1, reRunsFenced: 1, violations: [] });
  });

  it('fails when one attempt ran twice (a claim handed to two workers)', () => {
    const verdict = verifyLedger([done('1', 11)], [run('1', 1, 10), run('1', 1, 11)], [counters(10, 5), counters(11)], new Set());
    expect(verdict.violations.join('\n')).toMatch(/row 1 attempt 1 ran twice/);
  });

  it('fails when a live worker’s run was superseded but it was never told (its late settle could have landed)', () => {
    const verdict = verifyLedger([done('1', 11)], [run('1', 1, 10), run('1', 2, 11)], [counters(10, 0), counters(11)], new Set());
    expect(verdict.violations.join('\n')).toMatch(/pid 10 had 1 runs superseded but was told of only 0/);
  });

  it('fails when the row’s result is not its last claim’s (a superseded settle landed)', () => {
    const verdict = verifyLedger([done('1', 10)], [run('1', 1, 10), run('1', 2, 11)], [counters(10, 1), counters(11)], new Set());
    expect(verdict.violations.join('\n')).toMatch(/its result is pid 10's, but its last claim \(attempt 2\) was pid 11's/);
  });

  it('fails for a row left pending, a row never run, and a run of a row not in the table', () => {
    const rows: FinalRow[] = [{ id: '1', status: null, resultPid: null }, { id: '2', status: 1, resultPid: null }];
    const verdict = verifyLedger(rows, [run('1', 1, 10), run('9', 1, 10)], [counters(10)], new Set());
    const text = verdict.violations.join('\n');
    expect(text).toMatch(/row 1 ended with status NULL/);
    expect(text).toMatch(/row 2 never ran/);
    expect(text).toMatch(/row 9, which is not in the table/);
  });

  it('in a stopped run, accepts rows left pending that never ran, but not pending rows that ran', () => {
    const rows: FinalRow[] = [done('1', 10), { id: '2', status: null, resultPid: null }, { id: '3', status: null, resultPid: null }];
    const verdict = verifyLedger(rows, [run('1', 1, 10), run('3', 1, 10)], [counters(10)], new Set(), { pendingAllowed: true });
    expect(verdict.violations).toEqual(['row 3 ran 1 times but is pending again']);
  });
});
