/**
 * waitFor pick-up (issue 45 point 3): how late Queue.waitFor sees a settle. A store of its own (another
 * connection, as a worker elsewhere would be) claims a row and, after the job's "run time", settles it done;
 * the waiter, on its store, has waited on that row since before the claim. Latency runs from the settle's
 * commit (its call returned) to waitFor resolving. The run times spread from 30 ms to over a second, so a
 * waiter that falls back on the backoff (10 ms doubling to 1 s) is met at every point of it, not only right
 * after it began.
 *
 * Variants: how the waiter learns of a settle. `settle notify` (PostgreSQL: the settle trigger's NOTIFY),
 * `file watch` (SQLite), `probe pace` (MySQL/MariaDB: every awaited row read once per idleProbeMs, 50 ms),
 * and `backoff` (no wake-up: PostgreSQL with listen off, MySQL with idleProbeMs 0), the floor they improve on.
 */
import { Queue, type Store } from '@statusq/core';
import { sleep } from '@statusq/core/tools';
import type { BenchDatabase, Dialect } from './databases.js';
import { quantile, round, type WaitForRecord } from './records.js';

export interface WaitForPlan {
  rows: number;
  /** The first row's run time; each next one runs `stepMs` longer. */
  firstMs: number;
  stepMs: number;
}

interface Variant {
  name: string;
  listen: boolean;
}

export function waitForVariants(dialect: Dialect): Variant[] {
  if (dialect === 'postgres') return [{ name: 'settle notify', listen: true }, { name: 'backoff', listen: false }];
  if (dialect === 'sqlite') return [{ name: 'file watch', listen: true }];
  return [{ name: 'probe pace', listen: true }, { name: 'backoff', listen: false }];
}

export async function waitForPickup(db: BenchDatabase, table: string, variant: Variant, plan: WaitForPlan): Promise<WaitForRecord> {
  const stores: Store[] = [];
  try {
    const waiterStore = await db.connect({ listen: variant.listen });
    stores.push(waiterStore);
    const settlerStore = await db.connect();
    stores.push(settlerStore);
    const waiter = await Queue.open(waiterStore, { table });
    const settler = await Queue.open(settlerStore, { table });
    // One wait first, unmeasured, so a listening connection is up as it would be in a long-lived process.
    await settle(waiter, settler, 0);
    const latencies: number[] = [];
    for (let i = 0; i < plan.rows; i++) latencies.push(await settle(waiter, settler, plan.firstMs + i * plan.stepMs));
    return {
      scenario: 'wait-for',
      system: 'statusq',
      dialect: db.dialect,
      variant: variant.name,
      rows: plan.rows,
      runMs: [plan.firstMs, plan.firstMs + (plan.rows - 1) * plan.stepMs],
      p50Ms: round(quantile(latencies, 0.5), 2),
      p95Ms: round(quantile(latencies, 0.95), 2),
      maxMs: round(Math.max(...latencies), 2),
    };
  } finally {
    for (const store of stores) await store.close().catch(() => undefined);
  }
}

/** One row: enqueued, waited on, claimed, settled after `runMs`; the milliseconds from the settle's commit to waitFor resolving. */
async function settle(waiter: Queue, settler: Queue, runMs: number): Promise<number> {
  const [id] = await settler.enqueue([{ runMs }]);
  let resolvedAt = Number.NaN;
  const waiting = waiter.waitFor(id!, { timeoutMs: 30_000 }).then((outcome) => {
    resolvedAt = performance.now();
    if (outcome.status !== 'done') throw new Error(`waitFor of row ${String(id)} ended ${outcome.status}`);
  });
  const { rows } = await settler.claim({ limit: 1, token: 'bench' });
  if (rows.length !== 1) throw new Error('the settler claimed no row');
  await sleep(runMs);
  await settler.apply([settler.sql.complete(id!, 'bench', null)]);
  const committedAt = performance.now();
  await waiting;
  // A notification can overtake the settler's own commit acknowledgement: seen by then counts as 0.
  return Math.max(0, resolvedAt - committedAt);
}
