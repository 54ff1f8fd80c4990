import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { WorkerCounters } from '@statusq/core';
import { emptyWorkerCounters } from '@statusq/core/tools';
import { handlerPath } from '@statusq/test-fixtures';
import { Ledger } from './ledger.js';

/** One worker process of the demo, as its closing summary line and the ledger tell it. */
export interface WorkerReport {
  label: string;
  counters: WorkerCounters;
  runs: number;
  errors: readonly string[];
}

export interface LauncherRun {
  exitCode: number | null;
  ledger: Ledger;
  workers: WorkerReport[];
}

/**
 * Runs the workers the way a user would: `statusq work --processes P` over the demo database, with the
 * plain .mjs fixture handler, which appends every execution ("id attempt pid") to the STATUSQ_LEDGER file.
 */
export async function runLauncher(options: {
  dbPath: string;
  table: string;
  processes: number;
  concurrency: number;
  batch: number;
  maxAttempts: number;
  retryDelayMs: number;
  ledgerPath: string;
}): Promise<LauncherRun> {
  const bin = fileURLToPath(import.meta.resolve('statusq/bin'));
  const args = [
    bin, 'work', '--db', `sqlite:${options.dbPath}`, '--table', options.table, '--handler', handlerPath('table-a.mjs'),
    '--processes', String(options.processes), '--concurrency', String(options.concurrency), '--batch', String(options.batch),
    '--max-attempts', String(options.maxAttempts), '--retry-delay', `${options.retryDelayMs}ms`, '--lease', '30s', '--exit-when-empty',
    // JSON lines: each child's stop summary carries its counters as a field, which the table below reads.
    '--log-format', 'json',
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, STATUSQ_LEDGER: options.ledgerPath } });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  // 'close', not 'exit': the pipe may still hold the last children's summaries when the launcher has exited.
  const exitCode = await new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const ledger = readLedger(options.ledgerPath);
  return { exitCode, ledger, workers: parseSummaries(stdout, ledger) };
}

function readLedger(path: string): Ledger {
  const ledger = new Ledger();
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return ledger;
  }
  for (const line of text.split('\n')) {
    const [id, attempt, pid] = line.trim().split(' ');
    if (id && attempt && pid) ledger.record({ id: Number(id), attempt: Number(attempt), worker: `pid ${pid}` });
  }
  return ledger;
}

/**
 * Each child's stop summary, one JSON log line with `reason` and `counters` (the launcher's own lines have no
 * counters), and the worker errors each child logged (not its jobs' failures). `claimed` is the child's own count, not the ledger's, so
 * the checks can compare the two.
 */
export function parseSummaries(stdout: string, ledger: Ledger): WorkerReport[] {
  const summaries = new Map<string, Partial<WorkerCounters>>();
  const errors = new Map<string, string[]>();
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: { pid?: unknown; level?: unknown; msg?: unknown; during?: unknown; outcome?: unknown; reason?: unknown; counters?: Partial<WorkerCounters> | null };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    if (typeof entry.pid !== 'number') continue;
    const label = `pid ${entry.pid}`;
    if (typeof entry.reason === 'string' && typeof entry.counters === 'object' && entry.counters !== null) summaries.set(label, entry.counters);
    // A worker's own trouble (a claim or settle that failed) names what it was doing; a job's failure is an outcome.
    const workerError = typeof entry.during === 'string' && entry.outcome === undefined && (entry.level === 'error' || entry.level === 'warn');
    if (workerError) errors.set(label, [...(errors.get(label) ?? []), String(entry.msg)]);
  }
  return [...summaries].map(([label, counters]) => ({
    label,
    counters: { ...emptyWorkerCounters(), ...counters },
    runs: ledger.countByWorker(label),
    errors: errors.get(label) ?? [],
  }));
}
