/**
 * `statusq work --processes P` on a host of the topology, exactly as a user runs it: the CLI of this
 * workspace, the plain .mjs ledger handler, the database reached over the links by its host's address. Each
 * host appends every execution to a ledger file of its own; the children's closing log lines give their counters.
 */
import { type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WorkerCounters } from '@statusq/core';
import { emptyWorkerCounters } from '@statusq/core/tools';
import type { Topology } from './topology.js';

const CLI = fileURLToPath(import.meta.resolve('statusq/bin'));
export const LEDGER_HANDLER = fileURLToPath(new URL('../../handlers/scale-ledger.mjs', import.meta.url));

export interface WorkOptions {
  /** The database URL as this host reaches it. */
  url: string;
  table: string;
  processes: number;
  concurrency: number;
  batch: number;
  leaseMs: number;
  /** A stand-in for the handler's own work, per job. */
  workMs: number;
  ledgerDir: string;
  /** Default true: exit once the table is drained; false keeps the workers idle on an empty table until stop(). */
  exitWhenEmpty?: boolean;
  /** Extra `work` flags. */
  args?: readonly string[];
}

export interface ProcessCounters {
  pid: number;
  counters: WorkerCounters;
}

export class WorkerHost {
  private output = '';
  readonly exited: Promise<number | null>;
  private exitCode: number | null | undefined = undefined;

  private constructor(
    readonly host: string,
    readonly ledgerPath: string,
    private readonly child: ChildProcess,
  ) {
    child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = new Promise((resolve) => {
      child.once('exit', (code) => {
        this.exitCode = code;
        resolve(code);
      });
      child.once('error', () => {
        this.exitCode = null;
        resolve(null);
      });
    });
  }

  static start(topology: Topology, host: string, options: WorkOptions): WorkerHost {
    const ledgerPath = join(options.ledgerDir, `${host}.ledger`);
    const args = [
      CLI, 'work', '--db', options.url, '--table', options.table, '--handler', LEDGER_HANDLER,
      '--processes', String(options.processes), '--concurrency', String(options.concurrency), '--batch', String(options.batch),
      '--lease', `${options.leaseMs}ms`, ...(options.exitWhenEmpty === false ? [] : ['--exit-when-empty']), '--progress', 'off', ...(options.args ?? []),
    ];
    const child = topology.spawn(host, process.execPath, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, STATUSQ_LEDGER: ledgerPath, SCALE_HOST: host, SCALE_WORK_MS: String(options.workMs), NO_COLOR: '1' },
    });
    return new WorkerHost(host, ledgerPath, child);
  }

  /** The exit code once exited (null: killed by a signal), undefined while running. */
  get code(): number | null | undefined {
    return this.exitCode;
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  /** SIGTERM: the workers drain and exit (the CLI's stop). */
  stop(): void {
    this.child.kill('SIGTERM');
  }

  /** The children's counters, from their closing "worked N jobs" log lines (a killed child has none). */
  counters(): ProcessCounters[] {
    const found: ProcessCounters[] = [];
    for (const line of this.output.split('\n')) {
      if (!line.startsWith('{') || !line.includes('"counters"')) continue;
      try {
        const entry = JSON.parse(line) as { pid?: number; counters?: Partial<WorkerCounters>; msg?: string };
        if (entry.pid && entry.counters && entry.msg?.startsWith('worked ')) found.push({ pid: entry.pid, counters: { ...emptyWorkerCounters(), ...entry.counters } });
      } catch {
        // Not a log line of ours.
      }
    }
    return found;
  }

  /** Log lines at warn or above, and anything that is not a log line, for a failed run's report. */
  problems(): string[] {
    return this.output
      .split('\n')
      .filter((line) => line.trim() && (!line.startsWith('{') || /"level":"(warn|error|fatal)"/.test(line)))
      .slice(-20);
  }
}
