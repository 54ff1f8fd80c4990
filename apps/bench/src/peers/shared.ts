/**
 * Plumbing the peer runs share: where they may connect, how many connections they may open, and how they tell
 * that the last job is settled in the database (not just handled in memory) without sleeping.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { PickupOptions, PickupResult } from '../peer-contract.js';

export { sleep };

/** Lower-case, so it needs no quoting and passes pg-boss's object-name check (alphanumerics, <= 50 chars). */
export function uniqueSchema(prefix: string): string {
  return `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

export function newPool(url: string, max: number, applicationName: string, errors: unknown[]): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max, application_name: applicationName });
  // An idle client's error is emitted on the pool; unhandled it would take the whole bench process down.
  pool.on('error', (error) => errors.push(error));
  // Likewise for a checked-out client's; graphile-worker warns about pools handed to it without both.
  pool.on('connect', (client) => client.on('error', (error) => errors.push(error)));
  return pool;
}

export async function newClient(url: string, applicationName: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: applicationName });
  try {
    await client.connect();
    // A DROP SCHEMA behind a stuck session should fail the run, not hang it.
    await client.query(`SET lock_timeout = '10s'`);
  } catch (error) {
    await client.end().catch(() => undefined);
    throw error;
  }
  return client;
}

/** Opens the pool's connections up front so connecting is not inside the measured time. */
export async function warmPool(pool: pg.Pool, connections: number): Promise<void> {
  const clients = await Promise.all(Array.from({ length: connections }, () => pool.connect()));
  for (const client of clients) client.release();
}

/** A one-shot latch. */
export class Latch {
  fired = false;
  readonly promise: Promise<void>;
  private resolve!: () => void;
  constructor() {
    this.promise = new Promise<void>((resolve) => (this.resolve = resolve));
  }
  fire(): void {
    if (this.fired) return;
    this.fired = true;
    this.resolve();
  }
}

/** True when `promise` settled before `deadline` (a performance.now() instant), false when the deadline came first. */
export async function beforeDeadline(promise: Promise<unknown>, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, deadline - performance.now()))));
  try {
    return await Promise.race([promise.then(() => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The performance.now() instant at which `settled()` first answered true, or undefined at the deadline.
 *
 * Both peers write a job's completion after its handler returned, without awaiting it, so "all handled" is
 * not "all settled". Every such write is a query on one of `pools` and ends with its client going back to the
 * pool, so asking again at each 'release' (and once at the start) means the question is asked after the last
 * write committed; nothing sleeps or spins in between. Checks never overlap: a release during a check queues
 * one more.
 */
export function whenSettled(pools: readonly pg.Pool[], settled: () => Promise<boolean>, deadline: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    let checking = false;
    let again = false;
    let done = false;
    const finish = (error: unknown, at: number | undefined): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      for (const pool of pools) pool.off('release', check);
      if (error === undefined) resolve(at);
      else reject(error instanceof Error ? error : new Error(String(error)));
    };
    function check(): void {
      if (done) return;
      if (checking) {
        again = true;
        return;
      }
      checking = true;
      again = false;
      settled().then(
        (ok) => {
          checking = false;
          if (ok) finish(undefined, performance.now());
          else if (again) check();
        },
        (error: unknown) => finish(error, undefined),
      );
    }
    const timer = setTimeout(() => finish(undefined, undefined), Math.max(0, deadline - performance.now()));
    for (const pool of pools) pool.on('release', check);
    check();
  });
}

/**
 * Resolves once no client of `pool` is checked out or waited for (or at the deadline). Ending a pool under a
 * query still queued for a client leaves that query's promise pending forever, and a peer's fire-and-forget
 * completion that then calls connect() on the ended pool rejects with nobody listening.
 */
export function drained(pool: pg.Pool, deadline: number): Promise<void> {
  const idle = (): boolean => pool.waitingCount === 0 && pool.idleCount === pool.totalCount;
  if (idle()) return Promise.resolve();
  return new Promise((resolve) => {
    const check = (): void => {
      // 'release' fires before the client is back in the idle list; look again once that has happened.
      setImmediate(() => {
        if (idle()) finish();
      });
    };
    const finish = (): void => {
      clearTimeout(timer);
      pool.off('release', check);
      pool.off('remove', check);
      resolve();
    };
    const timer = setTimeout(finish, Math.max(0, deadline - performance.now()));
    pool.on('release', check);
    pool.on('remove', check);
  });
}

/** Ends every pool, after giving each until `deadline` to go quiet. */
export async function endPools(pools: readonly pg.Pool[], deadline: number): Promise<void> {
  await Promise.all(pools.map((pool) => drained(pool, deadline)));
  await Promise.allSettled(pools.map((pool) => pool.end()));
}

/** The handler-side tally of a burn-down. */
export class Tally {
  handled = 0;
  firstStart: number | undefined;
  readonly allHandled = new Latch();
  constructor(readonly target: number) {}
  started(): void {
    this.firstStart ??= performance.now();
  }
  finished(count = 1): void {
    this.handled += count;
    if (this.handled >= this.target) this.allHandled.fire();
  }
}

/** Reads the sequence number the pickup put in a job's payload. */
export function payloadSeq(payload: unknown): number {
  const seq = typeof payload === 'object' && payload !== null ? (payload as { seq?: unknown }).seq : undefined;
  if (typeof seq !== 'number') throw new Error(`pickup job without a numeric seq: ${JSON.stringify(payload)}`);
  return seq;
}

export function firstError(errors: readonly unknown[]): Error | undefined {
  const [error] = errors;
  if (error === undefined) return undefined;
  return error instanceof Error ? error : new Error(String(error));
}

/**
 * The measured part of every peer's pickup: rows inserted one at a time, `intervalMs` apart, within `timeoutMs`
 * (which bounds the inserts and the wait for them, not the setup, as in statusq's pickup); then each row's time
 * from just before its insert to its handler's first start (`startedAt`, filled by the peer's handler).
 */
export async function pacedPickup(
  options: PickupOptions,
  run: { failed: Latch; allReceived: Latch; errors: readonly unknown[]; startedAt: readonly (number | undefined)[] },
  insert: (seq: number) => Promise<unknown>,
): Promise<PickupResult> {
  const insertedAt: number[] = [];
  const deadline = performance.now() + options.timeoutMs;
  for (let seq = 0; seq < options.rows && performance.now() < deadline && !run.failed.fired; seq++) {
    insertedAt[seq] = performance.now();
    await insert(seq);
    await sleep(options.intervalMs);
  }
  await beforeDeadline(Promise.race([run.allReceived.promise, run.failed.promise]), deadline);
  const error = firstError(run.errors);
  if (error) throw error;
  const latenciesMs: number[] = [];
  insertedAt.forEach((at, seq) => {
    const start = run.startedAt[seq];
    if (start !== undefined) latenciesMs.push(start - at);
  });
  return { latenciesMs };
}
