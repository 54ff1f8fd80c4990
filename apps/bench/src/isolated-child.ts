/** The child of isolated-run.ts: runs its one task (after its untimed warm-up), sends the result (or the error) and exits. */
import type { IsolatedMessage, IsolatedTask } from './isolated-run.js';
import type { BurnDownResult } from './peer-contract.js';
import { loadPeers } from './peers/registry.js';
import { rawBurnDown, type RawResult } from './raw-protocol.js';

async function run(task: IsolatedTask): Promise<RawResult | BurnDownResult> {
  if (task.kind === 'raw') {
    if (task.warmUp) await rawBurnDown({ ...task.options, table: task.warmUp.table, jobs: task.warmUp.jobs });
    return rawBurnDown(task.options);
  }
  const peer = (await loadPeers()).find((p) => p.system === task.system && p.variant === task.variant);
  if (!peer) throw new Error(`no peer ${task.system} ${task.variant} in this process`);
  if (task.warmUpJobs) await peer.burnDown({ ...task.options, jobs: task.warmUpJobs });
  return peer.burnDown(task.options);
}

async function main(task: IsolatedTask): Promise<void> {
  let message: IsolatedMessage;
  try {
    message = { type: 'result', value: await run(task), node: process.version };
  } catch (error) {
    message = { type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) };
  }
  await new Promise<void>((resolve) => (process.send ? process.send(message, () => resolve()) : resolve()));
  // The result is out; a handle a peer library left open (a Redis reconnect timer, a pool's idle client) must
  // not keep this process, and with it the bench, waiting.
  process.exit(0);
}

void main(JSON.parse(process.argv[2] ?? '{}') as IsolatedTask);
