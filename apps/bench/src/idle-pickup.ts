/**
 * Pick-up after an idle spell (issue 14: without NOTIFY, p99 under 100 ms after 10 s idle, with a waiting
 * worker's CPU under 1% of a core). The `pickup` scenario feeds a busy-ish worker a row every 10 ms, so it
 * never backs off; here one worker (default settings, 16 slots), in a process of its own (idle-child.ts),
 * first waits `idleMs` on an empty table while the CPU of that process and of the database server is
 * measured, then gets one row at a time from this process,
 * each after a random 2-3 s gap: longer than the worker's idle backoff takes to reach pollMaxMs (25 ms
 * doubling to 1 s: 1.6 s), so every row lands on a worker that is fully backed off, as after a quiet night.
 *
 * Variants: how the idle worker learns of a row. `listen` (PostgreSQL NOTIFY) and `file watch` (SQLite, a
 * watch on the database file) wake it; `idle probe` (MySQL/MariaDB's default) has the server check every 50 ms
 * whether a row is due; `polling` is the worker's backoff to 1 s with claims (MySQL: idleProbeMs 0);
 * `polling, pollMaxMs 50` is that backoff cut short: lower latency for more idle claims. The CPU window
 * starts after a warm-up: a process in its first seconds is still loading code and running its first
 * collections (measured: about 1.3% of a core on its own in the first 10 s), which is not what idling costs.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Store } from '@statusq/core';
import { sleep } from '@statusq/core/tools';
import { measureCpu } from './cpu.js';
import { exited, onMessage } from './child-processes.js';
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

/** The idle worker's process (idle-child.ts): what it is told at start. */
export interface IdleChildConfig {
  dialect: Dialect;
  url: string;
  table: string;
  listen: boolean;
  pollMaxMs?: number;
  concurrency: number;
}

export type IdleChildMessage = { type: 'ready' } | { type: 'cpu'; seconds: number } | { type: 'ran'; seq: number; at: number } | { type: 'stopped' };
export type IdleParentMessage = 'cpu-start' | 'cpu-end' | 'stop';

/** Wall-clock milliseconds with sub-millisecond precision, comparable between processes on one machine. */
export function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}

const CHILD_SCRIPT = fileURLToPath(new URL('./idle-child.js', import.meta.url));

/** Start-up, the warm-up, the idle window, every row's gap and its give-up, and this much to spare. */
const CHILD_GRACE_MS = 30_000;

/** A row the worker has not started within this long (five polls at the default) counts as not received. */
const GIVE_UP_MS = 5_000;

export async function idlePickup(db: BenchDatabase, table: string, variant: Variant, plan: IdlePickupPlan): Promise<IdlePickupRecord> {
  const deadline = AbortSignal.timeout(plan.warmUpMs + plan.idleMs + plan.rows * (plan.gapMs[1] + GIVE_UP_MS) + CHILD_GRACE_MS);
  const config: IdleChildConfig = { dialect: db.dialect, url: db.url, table, listen: variant.listen, concurrency: 16, ...(variant.pollMaxMs !== undefined && { pollMaxMs: variant.pollMaxMs }) };
  const child = fork(CHILD_SCRIPT, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const insertedAt: number[] = [];
  const latencies: number[] = [];
  let arrived: (() => void) | null = null;
  let childCpuSeconds: ((seconds: number) => void) | null = null;
  child.on('message', (message: IdleChildMessage) => {
    if (message.type === 'ran') {
      latencies.push(message.at - insertedAt[message.seq]!);
      arrived?.();
    } else if (message.type === 'cpu') childCpuSeconds?.(message.seconds);
  });
  // A child that has already gone (it failed, or it stopped and disconnected) makes a send fail: that is
  // for the callback, not an 'error' event that would end the bench.
  const tell = (message: IdleParentMessage) => {
    if (child.connected) child.send(message, () => undefined);
  };
  let stopSent = false;
  const stop = () => {
    if (!stopSent) tell('stop');
    stopSent = true;
  };
  let inserter: Store | null = null;
  try {
    const stopped = onMessage(child, 'stopped', deadline);
    stopped.catch(() => undefined);
    await onMessage(child, 'ready', deadline);
    inserter = await db.connect({ listen: false });
    await sleep(plan.warmUpMs);
    const server = measureCpu(db.dialect, 4);
    const started = performance.now();
    const workerSeconds = new Promise<number>((resolve) => (childCpuSeconds = resolve));
    tell('cpu-start');
    await sleep(plan.idleMs);
    tell('cpu-end');
    const idleSeconds = (performance.now() - started) / 1000;
    const idle = { worker: (await workerSeconds) / idleSeconds, server: server().server };
    const q = inserter.dialect.quoteIdentifier(table);
    const insert = `INSERT INTO ${q} (payload) VALUES (${inserter.dialect.placeholder(1)})`;
    for (let seq = 0; seq < plan.rows; seq++) {
      if (seq > 0) await sleep(plan.gapMs[0] + Math.random() * (plan.gapMs[1] - plan.gapMs[0]));
      const handled = new Promise<void>((resolve) => (arrived = resolve));
      const giveUp = new AbortController();
      insertedAt[seq] = wallClockMs();
      await inserter.execute({ sql: insert, params: [String(seq)] });
      await Promise.race([handled, sleep(GIVE_UP_MS, giveUp.signal)]);
      giveUp.abort();
      arrived = null;
    }
    stop();
    await stopped;
    return {
      scenario: 'idle-pickup',
      system: 'statusq',
      dialect: db.dialect,
      variant: variant.name,
      idleSeconds: plan.idleMs / 1000,
      idleWorkerCpuPercent: round(idle.worker * 100, 2),
      idleServerCpuPercent: idle.server === null ? null : round(idle.server * 100, 2),
      rows: plan.rows,
      received: latencies.length,
      p50Ms: round(quantile(latencies, 0.5), 2),
      p99Ms: round(quantile(latencies, 0.99), 2),
      maxMs: round(latencies.length > 0 ? Math.max(...latencies) : Number.NaN, 2),
    };
  } finally {
    stop();
    await exited(child, deadline);
    await inserter?.close();
  }
}
