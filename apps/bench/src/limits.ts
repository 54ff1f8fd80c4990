/** What every bench run, statusq's and the peers' alike, may connect to and how many connections it may hold. */
import { redactUrl } from '@statusq/core/tools';

/**
 * Connections all of one run's workers may hold together. PostgreSQL here allows 100 and other suites may
 * share it, so 32 workers cannot each get a pool sized for 16 slots; past the budget, pools shrink, the same
 * way for every system. Override with STATUSQ_BENCH_CONNECTIONS.
 */
export const CONNECTION_BUDGET = Number(process.env.STATUSQ_BENCH_CONNECTIONS) || 80;

/** `wanted` connections per pool, cut to an equal share of the budget, never below `floor`. */
export function poolSize(wanted: number, workers: number, floor: number): number {
  return Math.max(floor, Math.min(wanted, Math.floor(CONNECTION_BUDGET / Math.max(1, workers))));
}

/** Addresses besides 127.0.0.1 the bench may reach: database hosts in network namespaces a scale run made itself. */
const ownHosts = new Set<string>();

/** Lets the bench reach `address`, a database host of a topology this process made (scale/topology.ts). */
export function allowOwnHost(address: string): void {
  ownHosts.add(address);
}

/**
 * The bench may only ever touch the local server, or a server of its own; a stray URL must fail loudly rather
 * than load someone's queue.
 */
export function assertLocalUrl(url: string): void {
  if (url.startsWith('sqlite:')) return;
  const host = new URL(url).hostname;
  if (host !== '127.0.0.1' && !ownHosts.has(host)) throw new Error(`the bench connects to 127.0.0.1 only, not ${host || '(socket)'}: ${redactUrl(url)}`);
}
