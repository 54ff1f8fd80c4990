/**
 * The pick-up scenarios: latency from insert to handler start with the worker awake (a row every 10 ms, and
 * delayed rows coming due), and after an idle spell (idle-pickup.ts); the peers' pick-up beside statusq's; and
 * how soon waitFor sees a settle (wait-for.ts).
 */
import { postgresBenchUrl, type Dialect } from './databases.js';
import { idlePickup as idlePickupRun, idlePickupVariants } from './idle-pickup.js';
import { pickupLatency } from './pickup-latency.js';
import { quantile, round, type PickupRecord } from './records.js';
import { withDatabase, type BenchContext } from './scenarios.js';
import { waitForPickup, waitForVariants } from './wait-for.js';

export function pickupRecord(system: PickupRecord['system'], variant: string, dialect: PickupRecord['dialect'], rows: number, latencies: readonly number[]): PickupRecord {
  return {
    scenario: 'pickup',
    system,
    variant,
    dialect,
    rows,
    received: latencies.length,
    p50Ms: round(quantile(latencies, 0.5), 2),
    p99Ms: round(quantile(latencies, 0.99), 2),
    maxMs: round(latencies.length > 0 ? Math.max(...latencies) : Number.NaN, 2),
  };
}

/** How each dialect's idle worker is told of a row when `listen` is on (see ConnectionOptions.listen). */
const WAKE_UP_NAME: Record<Dialect, string> = { postgres: 'listen', mysql: 'idle probe', sqlite: 'file watch' };

/** Scenario 4: an idle worker, one row every 10 ms; insert-to-handler-start latency. */
/** The delay of the pick-up scenario's delayed rows: longer than a claim round trip, shorter than pollMaxMs. */
const PICKUP_DELAY_MS = 300;
/** Delayed rows are enqueued this far apart, so each comes due with the worker idle, and at most this many. */
const DELAYED_PICKUP_INTERVAL_MS = 700;
const DELAYED_PICKUP_ROWS = 30;

export async function pickup(ctx: BenchContext): Promise<void> {
  const { plan } = ctx;
  const timeoutMs = plan.pickupRows * plan.pickupIntervalMs * 3 + 5_000;
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      const table = 'bench_pickup';
      for (const strategy of plan.strategies) {
        for (const listen of dialect === 'sqlite' ? [false] : [true, false]) {
          await db.createTable(table, { pending: 0, finished: 0 });
          const { latenciesMs } = await pickupLatency(db, table, { rows: plan.pickupRows, intervalMs: plan.pickupIntervalMs, timeoutMs, listen, strategy });
          ctx.record(pickupRecord('statusq', `${strategy}, ${listen ? WAKE_UP_NAME[dialect] : 'polling'}`, dialect, plan.pickupRows, latenciesMs));
        }
      }
      // Rows enqueued by another process with a delay, timed from when each came due: what a wake-up on insert
      // does not cover (issue 40). One at a time, each alone in the table when it comes due (a stream of rows
      // every few ms keeps the worker awake and hides the idle case). The default claim and wake-up only.
      const strategy = plan.strategies[0]!;
      const listen = dialect !== 'sqlite';
      const rows = Math.min(plan.pickupRows, DELAYED_PICKUP_ROWS);
      await db.createTable(table, { pending: 0, finished: 0 });
      const delayed = await pickupLatency(db, table, { rows, intervalMs: DELAYED_PICKUP_INTERVAL_MS, timeoutMs: rows * DELAYED_PICKUP_INTERVAL_MS * 3 + 5_000, listen, strategy, delayMs: PICKUP_DELAY_MS });
      // SQLite's store watches its file whatever `listen` says: its wake-up is named as the others' are.
      ctx.record(pickupRecord('statusq', `${strategy}, ${WAKE_UP_NAME[dialect]}, delayed ${PICKUP_DELAY_MS} ms`, dialect, rows, delayed.latenciesMs));
      await db.dropTable(table);
    });
  }
  if (!ctx.dialects.includes('postgres')) return;
  const url = await postgresBenchUrl();
  for (const peer of ctx.peers) {
    const { latenciesMs } = await peer.pickup({ url, rows: plan.pickupRows, intervalMs: plan.pickupIntervalMs, timeoutMs });
    ctx.record(pickupRecord(peer.system as PickupRecord['system'], peer.variant, peer.store ?? 'postgres', plan.pickupRows, latenciesMs));
  }
}

/** Pick-up after an idle spell, per dialect and wake-up (see idle-pickup.ts). */
export async function idlePickup(ctx: BenchContext): Promise<void> {
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      const table = 'bench_idle_pickup';
      for (const variant of idlePickupVariants(dialect)) {
        await db.createTable(table, { pending: 0, finished: 0 });
        ctx.record(await idlePickupRun(db, table, variant, ctx.plan.idlePickup));
      }
      await db.dropTable(table);
    });
  }
}

/** How soon waitFor sees a settle, per dialect and wake-up (see wait-for.ts). */
export async function waitForScenario(ctx: BenchContext): Promise<void> {
  for (const dialect of ctx.dialects) {
    await withDatabase(dialect, async (db) => {
      const table = 'bench_wait_for';
      for (const variant of waitForVariants(dialect)) {
        await db.createTable(table, { pending: 0, finished: 0 }, { await: true });
        ctx.record(await waitForPickup(db, table, variant, ctx.plan.waitFor));
      }
      await db.dropTable(table);
    });
  }
}
