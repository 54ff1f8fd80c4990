/**
 * The exactly-once proof of a scale run, from two independent records: the ledger (every handler execution,
 * appended by the handler before it does anything: "id attempt pid host") and the table (each row's status and
 * result, which names the run whose settle won). It holds when
 *   - every row ended done, and ran at least once;
 *   - no two runs of a row share an attempt number (one claim handed to two workers);
 *   - every run but a row's last claim was superseded for a reason: its process was killed (it left no counters),
 *     or its process counted a claim taken over (its late settle was refused by the fence);
 *   - the row's result is the last claim's: no superseded run's settle landed.
 */
import { readFileSync } from 'node:fs';
import type { ProcessCounters } from './worker-hosts.js';

export interface Execution {
  id: string;
  attempt: number;
  pid: number;
  host: string;
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
  /** Empty when the proof holds; else up to 20 reasons. */
  violations: string[];
}

export function readLedgers(paths: readonly string[]): Execution[] {
  const executions: Execution[] = [];
  for (const path of paths) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch {
      continue; // A host that ran nothing wrote nothing.
    }
    for (const line of text.split('\n')) {
      const [id, attempt, pid, host] = line.trim().split(' ');
      if (id && attempt && pid && host) executions.push({ id, attempt: Number(attempt), pid: Number(pid), host });
    }
  }
  return executions;
}

/** `pendingAllowed`: the run was stopped before the end, so rows may be left pending, provided they never ran. */
export function verifyLedger(rows: readonly FinalRow[], executions: readonly Execution[], counters: readonly ProcessCounters[], killedPids: ReadonlySet<number>, options: { pendingAllowed?: boolean } = {}): LedgerVerdict {
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
  let reRuns = 0;
  let reRunsAfterDeath = 0;
  for (const row of rows) {
    const list = (runs.get(row.id) ?? []).sort((a, b) => a.attempt - b.attempt);
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
    for (let i = 1; i < list.length; i++) if (list[i]!.attempt === list[i - 1]!.attempt) flag(`row ${row.id} attempt ${list[i]!.attempt} ran twice (pids ${list[i - 1]!.pid} and ${list[i]!.pid})`);
    const last = list[list.length - 1]!;
    if (row.status === 1 && row.resultPid !== last.pid) flag(`row ${row.id}: its result is pid ${row.resultPid}'s, but its last claim (attempt ${last.attempt}) was pid ${last.pid}'s`);
    for (const superseded of list.slice(0, -1)) {
      reRuns++;
      if (killedPids.has(superseded.pid)) reRunsAfterDeath++;
      else supersededBy.set(superseded.pid, (supersededBy.get(superseded.pid) ?? 0) + 1);
    }
  }
  for (const id of runs.keys()) flag(`the ledger has runs of row ${id}, which is not in the table`);
  let reRunsFenced = 0;
  for (const [pid, count] of supersededBy) {
    const told = claimsTakenOver.get(pid);
    if (told === undefined) flag(`pid ${pid} (not killed) had ${count} runs superseded but left no counters`);
    else if (told < count) flag(`pid ${pid} had ${count} runs superseded but was told of only ${told} claims taken over`);
    reRunsFenced += count;
  }
  return { rows: rows.length, executions: executions.length, reRuns, reRunsAfterDeath, reRunsFenced, violations };
}
