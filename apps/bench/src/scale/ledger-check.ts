/**
 * The exactly-once proof of a scale run, from two independent records: the ledger (every handler execution,
 * appended by the handler before it does anything: "id attempt pid host") and the table (each row's status and
 * result, which names the run whose settle won). It holds when
 *   - every row ended done, and ran at least once;
 *   - no two runs of a row share an attempt number (one claim handed to two workers);
 *   - every run but a row's last claim was superseded for a reason: its process was killed (it left no counters),
 *     or its process counted a claim taken over (its late settle was refused by the fence);
 *   - the row's result is the last claim's: no superseded run's settle landed.
 *
 * One variant, off by default (`lostCommitsAllowed`), for a run that failed over to an asynchronous standby:
 * the promoted node may lack commits the dead primary had acknowledged. A lost claim commit hands the row out
 * again under the same attempt number; a lost settle leaves the row to run again although its worker lived and
 * was told nothing (its settle had succeeded). Both are allowed only for a run logged before the failover
 * (its claim came from the old primary) and are counted apart; every other rule holds as by default.
 */
import { readFileSync } from 'node:fs';
import type { ProcessCounters } from './worker-hosts.js';

export interface Execution {
  id: string;
  attempt: number;
  pid: number;
  host: string;
  /** Logged before the failover's cut (readLedgers' `failoverCut`): its claim may have come from a primary that then died. */
  beforeFailover?: boolean;
}

export interface FinalRow {
  id: string;
  status: number | null;
  /** The pid the handler put in its result, null when there is none. */
  resultPid: number | null;
}

export interface LedgerVerdict {
  rows: number;
  executions: number;
  /** Runs superseded by a later claim of the same row. */
  reRuns: number;
  /** Of those, runs of processes that were killed. */
  reRunsAfterDeath: number;
  /** Of those, runs whose process lived and was told its claim was taken over (a refused late settle). */
  reRunsFenced: number;
  /** Of those, runs whose acknowledged settle a failover lost (the process lived, was told nothing): `lostCommitsAllowed` only. */
  reRunsAfterLostCommit: number;
  /** Claims handed out again under the same attempt because a failover lost the claim's commit: `lostCommitsAllowed` only. */
  attemptsReissued: number;
  /** Empty when the proof holds; else up to 20 reasons. */
  violations: string[];
}

/**
 * `failoverCut`: each ledger's size in bytes when the failover was complete; a run whose line ends within it is
 * marked beforeFailover (the handler logs before it does anything, and whole lines: the ledger is ASCII).
 */
export function readLedgers(paths: readonly string[], failoverCut?: ReadonlyMap<string, number>): Execution[] {
  const executions: Execution[] = [];
  for (const path of paths) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch {
      continue; // A host that ran nothing wrote nothing.
    }
    const cut = failoverCut?.get(path) ?? 0;
    let end = 0;
    for (const line of text.split('\n')) {
      end += line.length + 1;
      const [id, attempt, pid, host] = line.trim().split(' ');
      if (!(id && attempt && pid && host)) continue;
      const execution: Execution = { id, attempt: Number(attempt), pid: Number(pid), host };
      if (failoverCut) execution.beforeFailover = end <= cut;
      executions.push(execution);
    }
  }
  return executions;
}

/** How a run may end besides the default: stopped early, or failed over to an asynchronous standby. */
export interface LedgerProofOptions {
  /** The run was stopped before the end, so rows may be left pending, provided they never ran. */
  pendingAllowed?: boolean;
  /** The run failed over to a standby that may lack acknowledged commits (see the file's comment); needs readLedgers' failoverCut. */
  lostCommitsAllowed?: boolean;
}

export function verifyLedger(rows: readonly FinalRow[], executions: readonly Execution[], counters: readonly ProcessCounters[], killedPids: ReadonlySet<number>, options: LedgerProofOptions = {}): LedgerVerdict {
  const violations: string[] = [];
  const flag = (reason: string) => {
    if (violations.length < 20) violations.push(reason);
  };
  const runs = new Map<string, Execution[]>();
  for (const e of executions) {
    const list = runs.get(e.id);
    if (list) list.push(e);
    else runs.set(e.id, [e]);
  }
  const claimsTakenOver = new Map(counters.map((c) => [c.pid, c.counters.claimLost]));
  const supersededBy = new Map<number, number>();
  /** Per pid, of its superseded runs, those logged before the failover: the most a lost settle commit can explain. */
  const supersededBeforeFailover = new Map<number, number>();
  let reRuns = 0;
  let reRunsAfterDeath = 0;
  let attemptsReissued = 0;
  // A reissued attempt's first run is the one from before the failover.
  const order = (a: Execution, b: Execution) => a.attempt - b.attempt || Number(Boolean(b.beforeFailover)) - Number(Boolean(a.beforeFailover));
  for (const row of rows) {
    const list = (runs.get(row.id) ?? []).sort(order);
    runs.delete(row.id);
    if (row.status === null && options.pendingAllowed) {
      if (list.length > 0) flag(`row ${row.id} ran ${list.length} times but is pending again`);
      continue;
    }
    if (row.status !== 1) flag(`row ${row.id} ended with status ${row.status ?? 'NULL (pending)'}`);
    if (list.length === 0) {
      flag(`row ${row.id} never ran`);
      continue;
    }
    for (let i = 1; i < list.length; i++) {
      const [earlier, later] = [list[i - 1]!, list[i]!];
      if (later.attempt !== earlier.attempt) continue;
      // The old primary's claim was lost, so the new one handed out the same attempt: once, across the failover.
      if (options.lostCommitsAllowed && earlier.beforeFailover && !later.beforeFailover && list[i + 1]?.attempt !== later.attempt) attemptsReissued++;
      else flag(`row ${row.id} attempt ${later.attempt} ran twice (pids ${earlier.pid} and ${later.pid})`);
    }
    const last = list[list.length - 1]!;
    if (row.status === 1 && row.resultPid !== last.pid) flag(`row ${row.id}: its result is pid ${row.resultPid}'s, but its last claim (attempt ${last.attempt}) was pid ${last.pid}'s`);
    for (const superseded of list.slice(0, -1)) {
      reRuns++;
      if (killedPids.has(superseded.pid)) reRunsAfterDeath++;
      else {
        supersededBy.set(superseded.pid, (supersededBy.get(superseded.pid) ?? 0) + 1);
        if (superseded.beforeFailover) supersededBeforeFailover.set(superseded.pid, (supersededBeforeFailover.get(superseded.pid) ?? 0) + 1);
      }
    }
  }
  for (const id of runs.keys()) flag(`the ledger has runs of row ${id}, which is not in the table`);
  let reRunsFenced = 0;
  let reRunsAfterLostCommit = 0;
  for (const [pid, count] of supersededBy) {
    const told = claimsTakenOver.get(pid);
    const untold = told === undefined ? 0 : Math.max(0, count - told);
    if (told === undefined) flag(`pid ${pid} (not killed) had ${count} runs superseded but left no counters`);
    else if (untold > 0 && options.lostCommitsAllowed && untold <= (supersededBeforeFailover.get(pid) ?? 0)) reRunsAfterLostCommit += untold;
    else if (untold > 0) flag(`pid ${pid} had ${count} runs superseded but was told of only ${told} claims taken over`);
    reRunsFenced += count - (options.lostCommitsAllowed ? untold : 0);
  }
  return { rows: rows.length, executions: executions.length, reRuns, reRunsAfterDeath, reRunsFenced, reRunsAfterLostCommit, attemptsReissued, violations };
}
