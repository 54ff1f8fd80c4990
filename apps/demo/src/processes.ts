import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { emptyWorkerCounters, type WorkerCounters } from '@statusq/core';
import { handlerPath } from '@statusq/test-fixtures';
import { Ledger } from './ledger.js';
import type { WorkerReport } from './report.js';

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
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, STATUSQ_LEDGER: options.ledgerPath } });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const exitCode = await new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
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

/** Each child's closing line: "worked N jobs ...: done D, failed F, abuse A, retried R, candidates lost L, claims taken over T [pid P]". */
function parseSummaries(stdout: string, ledger: Ledger): WorkerReport[] {
  const reports: WorkerReport[] = [];
  const pattern = /done (\d+), failed (\d+), abuse (\d+), retried (\d+), candidates lost (\d+), claims taken over (\d+) \[pid (\d+)\]/;
  for (const line of stdout.split('\n')) {
    const m = pattern.exec(line);
    if (!m) continue;
    const label = `pid ${m[7]}`;
    const runs = ledger.countByWorker(label);
    const counters: WorkerCounters = {
      ...emptyWorkerCounters(),
      claimed: runs,
      completed: Number(m[1]),
      failed: Number(m[2]),
      abused: Number(m[3]),
      retried: Number(m[4]),
      candidatesLost: Number(m[5]),
      claimLost: Number(m[6]),
    };
    reports.push({ label, counters, runs, errors: [] });
  }
  return reports;
}
