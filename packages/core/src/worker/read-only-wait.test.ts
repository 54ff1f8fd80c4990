import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StoreError } from '../protocol/errors.js';
import { READ_ONLY_CHECK_MAX_MS, ReadOnlyWait } from './read-only-wait.js';
import type { Statement } from '../store/store.js';
import { jobsStoreEachTest, type SqlJsStore } from '../test/sqljs-store.js';
import { Worker } from './worker.js';
import type { WorkerOptions } from './worker-options.js';

// A read-only database as the worker meets it: writes refused with StoreError ReadOnly (what every adapter
// maps 1290/1836/1792, 25006 and SQLITE_READONLY to), reads still answered.

const withJobs = jobsStoreEachTest();

const statuses = (s: SqlJsStore) => s.rows('SELECT status FROM jobs ORDER BY id').map((r) => r.status as number | null);
const writes = (statements: readonly Statement[]) => statements.some((s) => /^\s*UPDATE\b/i.test(s.sql));
const isCompletion = (statements: readonly Statement[]) => statements.some((s) => s.sql.startsWith('UPDATE') && s.sql.includes('SET "status" = 1'));
const readOnly = () => new StoreError('ReadOnly', 'cannot execute UPDATE in a read-only transaction', '25006');

/**
 * Refuses every write while `on` is true, keeping when each refusal came (ms after the first, by the
 * worker's clock) and what it refused.
 */
function readOnlySwitch(s: SqlJsStore, only: (statements: readonly Statement[]) => boolean = writes) {
  const state = { on: false, refusedAtMs: [] as number[], refusedStatements: [] as string[] };
  let first: number | undefined;
  s.beforeRun = (statements) => {
    if (state.on && only(statements)) {
      first ??= performance.now();
      state.refusedAtMs.push(Math.round(performance.now() - first));
      state.refusedStatements.push(JSON.stringify(statements));
      throw readOnly();
    }
  };
  return state;
}

function worker(s: SqlJsStore, options: Partial<WorkerOptions>): Promise<Worker> {
  return Worker.create({ store: s, table: { table: 'jobs' }, handler: () => undefined, claimStrategy: 'conditional-update', pollMinMs: 1, pollMaxMs: 20, random: () => 0.5, ...options });
}

function events(w: Worker) {
  const seen: string[] = [];
  w.on('read-only', (e) => seen.push(`read-only during ${e.during}, up to ${e.waitMs} ms`));
  w.on('writable', () => seen.push('writable'));
  return seen;
}

describe('ReadOnlyWait', () => {
  it('spaces checks from the poll interval up to the cap, and never past the bound', () => {
    const wait = new ReadOnlyWait(60_000, 1000, () => 0, { started: () => undefined, ended: () => undefined });
    wait.refused(readOnly(), 'claim');
    // random 0: the lower half of each exponential step, floored at the poll interval.
    expect([0, 1, 2, 3, 4, 5, 10].map((step) => wait.delay(step))).toEqual([1000, 1000, 2000, 2500, 2500, 2500, 2500]);
    expect(Math.max(...[0, 1, 2, 3, 4, 5, 10].map((step) => new ReadOnlyWait(60_000, 1000, () => 1, { started: () => undefined, ended: () => undefined }).delay(step)))).toBe(READ_ONLY_CHECK_MAX_MS);
    const short = new ReadOnlyWait(300, 1000, () => 0, { started: () => undefined, ended: () => undefined });
    short.refused(readOnly(), 'claim');
    expect(short.delay(0)).toBeLessThanOrEqual(300);
  });
});

describe('Worker on a read-only database', () => {
  // The worker's clock is faked so the schedule of checks is exact: how many refusals fit in a window is the
  // schedule's to decide (jitter pinned to the middle of each step), and a loaded machine changes nothing.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** Moves the fake clock on in 5 ms steps until `promise` settles; its outcome, or its rejection reason. */
  async function settled<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
    let outcome: { value?: T; error?: unknown } | undefined;
    void promise.then(
      (value) => (outcome = { value }),
      (error: unknown) => (outcome = { error }),
    );
    for (let step = 0; outcome === undefined && step < 10_000; step++) await vi.advanceTimersByTimeAsync(5);
    if (outcome === undefined) throw new Error('the run did not end within 50 s of fake time');
    return outcome;
  }

  it('stops claiming while writes are refused, says so once, and finishes every job once writes work again', async () => {
    const s = await withJobs(6);
    const ro = readOnlySwitch(s);
    ro.on = true;
    const w = await worker(s, { concurrency: 2, exitWhenEmpty: true, readOnlyWaitMs: 10_000 });
    const seen = events(w);
    const run = w.run();
    await vi.advanceTimersByTimeAsync(400);
    const refusedWhileOn = ro.refusedAtMs;
    ro.on = false;
    const { value: counters } = await settled(run);
    expect(counters).toMatchObject({ claimed: 6, completed: 6, claimLost: 0 });
    expect(statuses(s)).toEqual([1, 1, 1, 1, 1, 1]);
    expect(seen).toEqual(['read-only during claim, up to 10000 ms', 'writable']);
    // Checks from the poll interval (20 ms) doubling towards 5 s: a handful of refused claims in 400 ms, not a
    // tight loop.
    expect(refusedWhileOn).toEqual([0, 20, 50, 110, 230]);
  });

  it('keeps a settle the database refuses as read-only and commits it once writes work again', async () => {
    const s = await withJobs(3);
    const ro = readOnlySwitch(s, isCompletion);
    ro.on = true;
    const w = await worker(s, { concurrency: 3, exitWhenEmpty: true, readOnlyWaitMs: 10_000 });
    const seen = events(w);
    w.on('read-only', () => setTimeout(() => (ro.on = false), 300));
    const { value: counters } = await settled(w.run());
    expect(counters).toMatchObject({ claimed: 3, completed: 3, failed: 0, claimLost: 0 });
    expect(statuses(s)).toEqual([1, 1, 1]);
    expect(seen).toEqual(['read-only during settle, up to 10000 ms', 'writable']);
    // The three completions wait as one settle: refused at each check until writes work again at 300 ms.
    expect(ro.refusedAtMs).toEqual([0, 20, 50, 110, 230]);
    expect(new Set(ro.refusedStatements).size).toBe(1);
  });

  it('ends run() with ReadOnly once the wait is spent, leaving claimed rows in processing', async () => {
    const s = await withJobs(4);
    const ro = readOnlySwitch(s, isCompletion);
    ro.on = true;
    const w = await worker(s, { concurrency: 2, readOnlyWaitMs: 300 });
    const seen = events(w);
    const { error } = await settled(w.run());
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).kind).toBe('ReadOnly');
    expect((error as StoreError).nativeCode).toBe('25006');
    expect((error as StoreError).message).toMatch(/read-only and did not take writes again within 0\.3 s .*point the URL at the primary/);
    expect(seen).toEqual(['read-only during settle, up to 300 ms']);
    // The two claimed rows stay claimed (for the reaper); the rest were never claimed.
    expect(statuses(s).filter((x) => x === 9)).toHaveLength(2);
    expect(statuses(s).filter((x) => x === null)).toHaveLength(2);
    // One wait for the batch (one settle of both rows, refused at every check), one last check right at the
    // bound, then the run ends: no row is tried again on its own for a bound of its own.
    expect(new Set(ro.refusedStatements).size).toBe(1);
    expect(ro.refusedAtMs).toEqual([0, 20, 50, 110, 230, 300]);
  });

  it('ends run() at the first refused claim with readOnlyWaitMs 0', async () => {
    const s = await withJobs(1);
    const ro = readOnlySwitch(s);
    ro.on = true;
    const w = await worker(s, { readOnlyWaitMs: 0 });
    expect((await settled(w.run())).error).toMatchObject({ kind: 'ReadOnly' });
    expect(ro.refusedAtMs).toEqual([0]);
    expect(statuses(s)).toEqual([null]);
  });

  it('refuses a negative readOnlyWaitMs', async () => {
    const s = await withJobs(0);
    await expect(worker(s, { readOnlyWaitMs: -1 })).rejects.toThrow(/readOnlyWait must be a number of milliseconds/);
  });
});

describe('a conditional-update claim cut short', () => {
  it('runs the rows its earlier UPDATEs claimed when a later one is refused, instead of leaving them in processing', async () => {
    const s = await withJobs(3);
    let claimUpdates = 0;
    let refusing = true;
    s.beforeRun = (statements) => {
      if (!statements.some((st) => /^UPDATE\b/.test(st.sql) && /"status" IS NULL/.test(st.sql))) return;
      // The first claim UPDATE commits; the server turns read-only before the second.
      if (++claimUpdates >= 2 && refusing) throw readOnly();
    };
    const w = await worker(s, { concurrency: 3, exitWhenEmpty: true, readOnlyWaitMs: 10_000 });
    const seen = events(w);
    const ran: unknown[] = [];
    w.on('read-only', () => setTimeout(() => (refusing = false), 100));
    w.on('completed', (e) => ran.push(e.job.id));
    const counters = await w.run();
    expect(counters).toMatchObject({ completed: 3, claimLost: 0 });
    expect(statuses(s)).toEqual([1, 1, 1]);
    expect(ran).toHaveLength(3);
    expect(seen[0]).toBe('read-only during claim, up to 10000 ms');
  });
});
