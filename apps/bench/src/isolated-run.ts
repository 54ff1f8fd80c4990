/**
 * Each throughput run of a peer or of the raw loop in a Node process of its own (statusq's runs go to
 * burn-child.ts the same way), so no run pays for what the ones before it left in the bench's process: a heap
 * grown over an hour of runs, the peers' modules, timers and idle connections. Measured before this: in the
 * full run statusq's SQLite burn-down reached 68% of the raw loop over the same protocol, and 92% side by
 * side in a fresh process with the same code; PostgreSQL 75% against 86%.
 *
 * A fresh process runs cold code, though, and a queue's workers run for hours: each child first drains an
 * untimed warm-up of `warmUpJobs` jobs with the same code and settings (the raw loop and statusq from a table
 * of their own, a peer from its own schema, as its burnDown makes one), then the timed run.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { exited } from './child-processes.js';
import type { BenchDatabase } from './databases.js';
import type { BurnDownOptions, BurnDownResult } from './peer-contract.js';
import type { RawOptions, RawResult } from './raw-protocol.js';
import { warmUpTableOf } from './statusq-runs.js';

export type IsolatedTask =
  | { kind: 'raw'; options: RawOptions; warmUp?: { table: string; jobs: number } }
  | { kind: 'peer'; system: string; variant: string; options: BurnDownOptions; warmUpJobs?: number };

/** `node`: the version of the Node that ran the task (process.version). */
export type IsolatedMessage = { type: 'result'; value: RawResult | BurnDownResult; node: string } | { type: 'error'; message: string };

const CHILD_SCRIPT = fileURLToPath(new URL('./isolated-child.js', import.meta.url));

/** Start-up, module loading and set-up beyond the bounds of the warm-up and the run; past it the child is taken for hung. */
const CHILD_GRACE_MS = 60_000;

export async function rawBurnDownIsolated(db: BenchDatabase, options: RawOptions, warmUpJobs = 0): Promise<RawResult> {
  if (warmUpJobs === 0) return (await runIsolated({ kind: 'raw', options }, options.timeoutMs)) as RawResult;
  const table = warmUpTableOf(options.table);
  await db.createTable(table, { pending: warmUpJobs, finished: 0 });
  try {
    return (await runIsolated({ kind: 'raw', options, warmUp: { table, jobs: warmUpJobs } }, 2 * options.timeoutMs)) as RawResult;
  } finally {
    await db.dropTable(table);
  }
}

/** A peer's run, on the Node binary `node` (a line its `engines` accept: bench.ts' peerNode), and which Node ran it. */
export async function peerBurnDownIsolated(system: string, variant: string, options: BurnDownOptions, warmUpJobs = 0, node = process.execPath): Promise<BurnDownResult & { node: string }> {
  return (await runIsolated({ kind: 'peer', system, variant, options, ...(warmUpJobs > 0 && { warmUpJobs }) }, (warmUpJobs > 0 ? 2 : 1) * options.timeoutMs, node)) as BurnDownResult & { node: string };
}

async function runIsolated(task: IsolatedTask, boundMs: number, node = process.execPath): Promise<(RawResult | BurnDownResult) & { node: string }> {
  const deadline = AbortSignal.timeout(boundMs + CHILD_GRACE_MS);
  const child = fork(CHILD_SCRIPT, [JSON.stringify(task)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execPath: node });
  try {
    const message = await new Promise<IsolatedMessage>((resolve, reject) => {
      child.once('message', (m: IsolatedMessage) => resolve(m));
      child.once('exit', (code, signal) => reject(new Error(`bench child (${describe(task)}) exited with ${code ?? signal} before its result`)));
      deadline.addEventListener('abort', () => reject(new Error(`bench child (${describe(task)}) sent no result within the run's bound`)), { once: true });
    });
    if (message.type === 'error') throw new Error(`bench child (${describe(task)}) failed: ${message.message}`);
    return { ...message.value, node: message.node };
  } finally {
    await exited(child, deadline);
  }
}

function describe(task: IsolatedTask): string {
  return task.kind === 'raw' ? `raw protocol, ${task.options.dialect}` : `${task.system} ${task.variant}`;
}
