import type { Peer } from '../peer-contract.js';

/** Every peer variant the bench runs (BullMQ on Redis only when a Redis answers). */
export async function loadPeers(): Promise<Peer[]> {
  // graphile-worker logs a line per finished job unless told not to; its own performance test does the same.
  process.env.NO_LOG_SUCCESS ??= '1';
  const bullmq = await import('./bullmq.js');
  const modules = [await import('./graphile-worker.js'), await import('./pg-boss.js'), bullmq];
  const isPeer = (value: unknown): value is Peer => typeof value === 'object' && value !== null && 'burnDown' in value && 'pickup' in value && 'system' in value;
  const redis = await bullmq.redisPeer();
  return [...modules.flatMap((m) => Object.values(m as Record<string, unknown>).filter(isPeer)), ...(redis ? [redis] : [])];
}
