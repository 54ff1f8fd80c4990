/**
 * Pick-up after an idle spell (issue 14: without NOTIFY, p99 under 100 ms after 10 s idle, with a waiting
 * worker's CPU under 1% of a core). The `pickup` scenario feeds a busy-ish worker a row every 10 ms, so it
 * never backs off; here one worker (default settings, 16 slots) first waits `idleMs` on an empty table while
 * the CPU of this process (the worker) and of the database server is measured, then gets one row at a time,
 * each after a random 2-3 s gap: longer than the worker's idle backoff takes to reach pollMaxMs (25 ms
 * doubling to 1 s: 1.6 s), so every row lands on a worker that is fully backed off, as after a quiet night.
 *
 * Variants: how the idle worker learns of a row. `listen` (PostgreSQL NOTIFY) and `file watch` (SQLite, a
 * watch on the database file) wake it; `idle probe` (MySQL/MariaDB's default) asks the server every 80 ms
 * whether a row is due; `polling` is the worker's backoff to 1 s with claims (MySQL: idleProbeMs 0);
 * `polling, pollMaxMs 50` is that backoff cut short: lower latency for more idle claims. The CPU window
 * starts after a warm-up: a process in its first seconds is still loading code and running its first
 * collections (measured: about 1.3% of a core on its own in the first 10 s), which is not what idling costs.
 */
import { Worker, type Store } from '@statusq/core';
import { sleep } from '@statusq/core/adapter';
import { measureCpu } from './cpu.js';
import type { BenchDatabase, Dialect } from './databases.js';
import { quantile, round, type IdlePickupRecord } from './records.js';

export interface IdlePickupPlan {
  /** How long the worker waits before its idle CPU is measured: start-up (loading, the first GCs) is not idling. */
  warmUpMs: number;
  idleMs: number;
  rows: number;
  gapMs: readonly [number, number];
}

interface Variant {
  name: string;
  listen: boolean;
  pollMaxMs?: number;
}

/** What each dialect can do: its wake-up, if it has one, and polling with the default and a short pollMaxMs. */
export function idlePickupVariants(dialect: Dialect): Variant[] {
  const short = { name: 'polling, pollMaxMs 50', listen: false, pollMaxMs: 50 };
  if (dialect === 'postgres') return [{ name: 'listen', listen: true }, { name: 'polling', listen: false }, short];
  if (dialect === 'sqlite') return [{ name: 'file watch', listen: true }];
  return [{ name: 'idle probe', listen: true }, { name: 'polling', listen: false }, short];
}

export async function idlePickup(db: BenchDatabase, table: string, variant: Variant, plan: IdlePickupPlan): Promise<IdlePickupRecord> {
  const stores: Store[] = [];
  const insertedAt: number[] = [];
  const latencies: number[] = [];
  let arrived: (() => void) | null = null;
  let worker: Worker | null = null;
  let running: Promise<unknown> = Promise.resolve();
  try {
    const workerStore = await db.connect({ listen: variant.listen });
    stores.push(workerStore);
    const inserter = await db.connect({ listen: false });
    stores.push(inserter);
    worker = await Worker.create({
      store: workerStore,
      table: { table },
      concurrency: 16,
      ...(variant.pollMaxMs !== undefined && { pollMaxMs: variant.pollMaxMs }),
      handler: (job) => {
        latencies.push(performance.now() - insertedAt[Number(job.payload)]!);
        arrived?.();
      },
    });
    running = worker.run();
    await sleep(plan.warmUpMs);
    const cpu = measureCpu(db.dialect, 4);
    await sleep(plan.idleMs);
    const idle = cpu();
    const q = inserter.dialect.quoteIdentifier(table);
    const insert = `INSERT INTO ${q} (payload) VALUES (${inserter.dialect.placeholder(1)})`;
    for (let seq = 0; seq < plan.rows; seq++) {
      if (seq > 0) await sleep(plan.gapMs[0] + Math.random() * (plan.gapMs[1] - plan.gapMs[0]));
      const handled = new Promise<void>((resolve) => (arrived = resolve));
      const giveUp = new AbortController();
      insertedAt[seq] = performance.now();
      await inserter.execute({ sql: insert, params: [String(seq)] });
      // A row the worker has not started within 5 s (five polls at the default) counts as not received.
      await Promise.race([handled, sleep(5_000, giveUp.signal)]);
      giveUp.abort();
      arrived = null;
    }
    return {
      scenario: 'idle-pickup',
      system: 'statusq',
      dialect: db.dialect,
      variant: variant.name,
      idleSeconds: plan.idleMs / 1000,
      idleWorkerCpuPercent: round(idle.bench * 100, 2),
      idleServerCpuPercent: idle.server === null ? null : round(idle.server * 100, 2),
      rows: plan.rows,
      received: latencies.length,
      p50Ms: round(quantile(latencies, 0.5), 2),
      p99Ms: round(quantile(latencies, 0.99), 2),
      maxMs: round(latencies.length > 0 ? Math.max(...latencies) : Number.NaN, 2),
    };
  } finally {
    await worker?.stop(1_000);
    await running;
    await Promise.all(stores.map((s) => s.close()));
  }
}
