import { mkdtempSync, rmSync, statSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptyWorkerCounters } from '@statusq/core/tools';
import { afterEach, describe, expect, it } from 'vitest';
import { readLedgers, verifyLedger, type Execution, type FinalRow } from './ledger-check.js';
import type { ProcessCounters } from './worker-hosts.js';

const WORKER_A = 101;
const WORKER_B = 202;

function counters(pid: number, claimLost: number): ProcessCounters {
  return { pid, counters: { ...emptyWorkerCounters(), claimLost } };
}

function run(id: string, attempt: number, pid: number, beforeFailover: boolean): Execution {
  return { id, attempt, pid, host: pid === WORKER_A ? 'w1' : 'w2', beforeFailover };
}

const done = (id: string, resultPid: number): FinalRow => ({ id, status: 1, resultPid });

describe('verifyLedger across a failover', () => {
  // Row 1 ran on A before the failover, A's settle was acknowledged and lost, B ran it again after the lease.
  const lostSettle = [run('1', 1, WORKER_A, true), run('1', 2, WORKER_B, false)];

  it('fails by default when a live worker that was told nothing had its run superseded', () => {
    const verdict = verifyLedger([done('1', WORKER_B)], lostSettle, [counters(WORKER_A, 0), counters(WORKER_B, 0)], new Set());
    expect(verdict.violations).toEqual([`pid ${WORKER_A} had 1 runs superseded but was told of only 0 claims taken over`]);
  });

  it('with lostCommitsAllowed, counts a superseded run from before the failover as a re-run after a lost commit', () => {
    const verdict = verifyLedger([done('1', WORKER_B)], lostSettle, [counters(WORKER_A, 0), counters(WORKER_B, 0)], new Set(), { lostCommitsAllowed: true });
    expect(verdict).toMatchObject({ violations: [], reRuns: 1, reRunsAfterLostCommit: 1, reRunsFenced: 0, attemptsReissued: 0 });
  });

  it('with lostCommitsAllowed, still fails when the unexplained run came after the failover', () => {
    const after = [run('1', 1, WORKER_A, false), run('1', 2, WORKER_B, false)];
    const verdict = verifyLedger([done('1', WORKER_B)], after, [counters(WORKER_A, 0), counters(WORKER_B, 0)], new Set(), { lostCommitsAllowed: true });
    expect(verdict.violations).toEqual([`pid ${WORKER_A} had 1 runs superseded but was told of only 0 claims taken over`]);
  });

  it('with lostCommitsAllowed, a fenced run stays fenced and is not counted as a lost commit', () => {
    const verdict = verifyLedger([done('1', WORKER_B)], lostSettle, [counters(WORKER_A, 1), counters(WORKER_B, 0)], new Set(), { lostCommitsAllowed: true });
    expect(verdict).toMatchObject({ violations: [], reRunsFenced: 1, reRunsAfterLostCommit: 0 });
  });

  it('with lostCommitsAllowed, allows one attempt handed out again across the failover (a lost claim), and no other repeat', () => {
    // Listed after-first: the proof must order the run from before the failover first, whatever the ledger order.
    const reissued = [run('1', 1, WORKER_B, false), run('1', 1, WORKER_A, true)];
    const allowed = verifyLedger([done('1', WORKER_B)], reissued, [counters(WORKER_A, 1), counters(WORKER_B, 0)], new Set(), { lostCommitsAllowed: true });
    expect(allowed).toMatchObject({ violations: [], attemptsReissued: 1, reRunsFenced: 1 });

    const bothAfter = [run('1', 1, WORKER_A, false), run('1', 1, WORKER_B, false)];
    const refused = verifyLedger([done('1', WORKER_B)], bothAfter, [counters(WORKER_A, 1), counters(WORKER_B, 0)], new Set(), { lostCommitsAllowed: true });
    expect(refused.violations).toEqual([`row 1 attempt 1 ran twice (pids ${WORKER_A} and ${WORKER_B})`]);

    const byDefault = verifyLedger([done('1', WORKER_B)], reissued, [counters(WORKER_A, 1), counters(WORKER_B, 0)], new Set());
    expect(byDefault.violations).toEqual([`row 1 attempt 1 ran twice (pids ${WORKER_A} and ${WORKER_B})`]);
  });
});

describe('readLedgers with a failover cut', () => {
  let dir: string | null = null;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = null;
  });

  it('marks the lines within each ledger size taken at the cut as before the failover', () => {
    dir = mkdtempSync(join(tmpdir(), 'statusq-ledger-'));
    const w1 = join(dir, 'w1.ledger');
    const w2 = join(dir, 'w2.ledger');
    writeFileSync(w1, `1 1 ${WORKER_A} w1\n2 1 ${WORKER_A} w1\n`);
    const cut = new Map([
      [w1, statSync(w1).size],
      [w2, 0],
    ]);
    appendFileSync(w1, `3 1 ${WORKER_A} w1\n`);
    writeFileSync(w2, `4 1 ${WORKER_B} w2\n`);
    const marks = readLedgers([w1, w2], cut).map((e) => [e.id, e.beforeFailover]);
    expect(marks).toEqual([
      ['1', true],
      ['2', true],
      ['3', false],
      ['4', false],
    ]);
    expect(readLedgers([w1]).every((e) => e.beforeFailover === undefined)).toBe(true);
  });
});
