import { describe, expect, it } from 'vitest';
import { StoreError } from '../protocol/errors.js';
import { IDLE_PROBE_WAIT_MS, type Statement, type Store, type StoreCapabilities } from '../store/store.js';
import { jobsStoreEachTest, type SqlJsStore } from '../test/sqljs-store.js';
import { gate, statuses, worker } from '../test/worker-on-jobs.js';
import { OPTIONAL_COLUMNS } from '../protocol/table.js';
import { Worker } from './worker.js';

// The worker against an in-memory SQLite (sql.js): paths that otherwise only a real server's failures reach.
// This file has the worker's side that faces the database: claims and settles (a lost commit reply, a refused
// settle, claims paced by settles) and the waits between them. What its handlers meet (timeouts, a stop
// while they run, typed rows) is in worker.handlers.test.ts.

const withJobs = jobsStoreEachTest();

const isCompletion = (statements: readonly Statement[]) => statements.some((s) => s.sql.startsWith('UPDATE') && s.sql.includes('SET "status" = 1'));

describe('Worker on an in-memory store', () => {
  it('counts a grouped completion as done when its commit was retried after the reply was lost', async () => {
    const s = await withJobs(3);
    let lostReplies = 0;
    s.afterCommit = (statements) => {
      if (lostReplies === 0 && statements.length === 1 && statements[0]!.sql.includes(' IN (?, ?, ?)') && isCompletion(statements)) {
        lostReplies++;
        throw new StoreError('ConnectionLost', 'connection lost after commit');
      }
    };
    const w = await worker(s, { concurrency: 3, exitWhenEmpty: true });
    const counters = await w.run();
    expect(lostReplies).toBe(1);
    expect(counters).toMatchObject({ claimed: 3, completed: 3, claimLost: 0 });
    expect(statuses(s)).toEqual([1, 1, 1]);
  });

  it('with exitWhenEmpty, a row another worker claims while this one asks whether the queue is drained keeps this run going until the row is finished', async () => {
    const s = await withJobs(1);
    // A retry waiting for its time: pending, but not this worker's to claim yet.
    s.db.run('UPDATE jobs SET next_attempt_at = ? WHERE id = 1', [Date.now() + 60_000]);
    let drainChecks = 0;
    s.afterCommit = (statements) => {
      if (statements.length !== 1 || !/^SELECT 1 AS found FROM "jobs" WHERE \(?"status" (IS NULL|= 9)( OR "status" (IS NULL|= 9)\))? LIMIT 1$/.test(statements[0]!.sql)) return;
      drainChecks++;
      // Right after the first drain statement another worker claims the row (pending -> processing): asked as
      // two statements, processing then pending, the row was in neither answer and this run ended while that
      // worker could still die holding it. Two checks later, that worker finishes it.
      if (drainChecks === 1) s.db.run("UPDATE jobs SET status = 9, claimed_at = ?, worker_id = 'other' WHERE id = 1", [Date.now()]);
      if (drainChecks === 3) s.db.run('UPDATE jobs SET status = 1 WHERE id = 1');
    };
    const w = await worker(s, { exitWhenEmpty: true, leaseMs: 60_000 });
    await w.run();
    expect(statuses(s)).toEqual([1]);
  });

  it('counts a lone completion with a result as done when its commit was retried after the reply was lost (not as a claim lost)', async () => {
    const s = await withJobs(1);
    let lostReplies = 0;
    s.afterCommit = (statements) => {
      if (lostReplies === 0 && isCompletion(statements)) {
        lostReplies++;
        throw new StoreError('ConnectionLost', 'connection lost after commit');
      }
    };
    const w = await worker(s, { concurrency: 1, exitWhenEmpty: true, handler: () => ({ fetched: true }) });
    const counters = await w.run();
    expect(lostReplies).toBe(1);
    expect(counters).toMatchObject({ claimed: 1, completed: 1, claimLost: 0 });
    expect(statuses(s)).toEqual([1]);
  });

  it('takes a write conflict in its reap for another worker reaping the same rows (no error), and reports any other reap failure', async () => {
    for (const [kind, reported] of [['WriteConflict', 0], ['Unknown', 1]] as const) {
      const s = await withJobs(2);
      s.beforeRun = (statements) => {
        // The reap's probe for expired leases (the only statement comparing claimed_at with a past time).
        if (statements.some((st) => st.sql.startsWith('SELECT 1 AS found') && st.sql.includes('"claimed_at" <'))) throw new StoreError(kind, `reap met ${kind}`);
      };
      const w = await worker(s, { concurrency: 2, exitWhenEmpty: true });
      const reapErrors: unknown[] = [];
      w.on('error', ({ during, error }) => {
        if (during === 'reap') reapErrors.push(error);
      });
      await w.run();
      expect({ kind, reapErrors: reapErrors.length, statuses: statuses(s) }).toEqual({ kind, reapErrors: reported, statuses: [1, 1] });
    }
  });

  it('claims its next batch while the last one settles, holding at most twice its concurrency; not before a settle committed, nor while one is in trouble', async () => {
    const s = await withJobs(6);
    const processing = () => statuses(s).filter((x) => x === 9).length;
    const isClaim = (statements: readonly Statement[]) => statements.some((st) => st.sql.includes('SET "status" = 9'));
    // Rows this worker held in processing as each of its claims went out.
    const heldAtClaims: number[] = [];
    s.beforeRun = (statements) => {
      if (isClaim(statements)) heldAtClaims.push(processing());
    };
    // The first completion commits at once; every later one waits until the test lets it through.
    const settles = gate();
    let completions = 0;
    const slowSettles: Store = new Proxy(s, {
      get(target, property) {
        if (property === 'execute' || property === 'executeBatch') {
          return async (arg: Statement | readonly Statement[]) => {
            const statements = Array.isArray(arg) ? arg : [arg as Statement];
            if (isCompletion(statements) && ++completions > 1) await settles.promise;
            return property === 'execute' ? target.execute(arg as Statement) : target.executeBatch(statements);
          };
        }
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const w = await Worker.create({ store: slowSettles, table: { table: 'jobs' }, handler: () => undefined, claimStrategy: 'native', concurrency: 2, pollMinMs: 1, pollMaxMs: 5, exitWhenEmpty: true });
    let claims = 0;
    w.on('claimed', () => {
      // After the third claim the loop has looked at its slots again by the next turn of the event loop: a
      // fourth claim would have gone out by then, with four rows held.
      if (++claims === 3) setImmediate(() => settles.open());
    });
    const counters = await w.run();
    // The first batch's settle committed before the second claim; the second batch's was held when the third
    // went out; none went out holding four rows.
    expect(heldAtClaims.slice(0, 3)).toEqual([0, 0, 2]);
    expect(Math.max(...heldAtClaims)).toBeLessThanOrEqual(2);
    expect(counters).toMatchObject({ claimed: 6, completed: 6 });
    expect(statuses(s)).toEqual([1, 1, 1, 1, 1, 1]);

    // A settle that had to be retried: until one commits at once, a settling job keeps its slot. The second
    // batch's settle loses its reply once; the third batch's jobs end while that settle is being retried, so
    // their settle is the next commit, and no claim may go out before it.
    const t = await withJobs(6);
    const heldAtLaterClaims: number[] = [];
    let committed = 0;
    t.beforeRun = (statements) => {
      if (isClaim(statements)) heldAtLaterClaims.push(t.rows('SELECT id FROM jobs WHERE status = 9').length);
    };
    t.afterCommit = (statements) => {
      if (isCompletion(statements) && ++committed === 2) throw new StoreError('ConnectionLost', 'connection lost after commit');
    };
    const retrying = gate();
    let started = 0;
    const second = await Worker.create({
      store: t,
      table: { table: 'jobs' },
      handler: () => (++started === 5 || started === 6 ? retrying.promise : undefined),
      claimStrategy: 'native',
      concurrency: 2,
      pollMinMs: 1,
      pollMaxMs: 5,
      exitWhenEmpty: true,
    });
    second.on('error', ({ during }) => {
      if (during.startsWith('settle')) retrying.open();
    });
    expect(await second.run()).toMatchObject({ claimed: 6, completed: 6 });
    expect(committed).toBeGreaterThanOrEqual(4);
    expect(heldAtLaterClaims.slice(0, 4)).toEqual([0, 0, 2, 0]);
  });

  it('completes a claimed batch larger than 200 in one grouped UPDATE by default (the settle group follows the batch)', async () => {
    const s = await withJobs(256);
    const completions: number[] = [];
    s.beforeRun = (statements) => {
      for (const st of statements) if (isCompletion([st])) completions.push(st.params.length);
    };
    const w = await worker(s, { concurrency: 256, claimStrategy: 'native', exitWhenEmpty: true });
    const counters = await w.run();
    expect(counters).toMatchObject({ claimCalls: 2, claimed: 256, completed: 256 });
    // One UPDATE of 256 ids and the claim token.
    expect(completions).toEqual([257]);
    expect(statuses(s).every((status) => status === 1)).toBe(true);
  });

  it('groups completions on a table without a token column as well: one UPDATE of the batch, not one per job', async () => {
    const s = await withJobs(64);
    const completions: number[] = [];
    s.beforeRun = (statements) => {
      for (const st of statements) if (isCompletion([st])) completions.push(st.params.length);
    };
    const statusOnly = Object.fromEntries(OPTIONAL_COLUMNS.map((c) => [c, false]));
    const w = await Worker.create({ store: s, table: { table: 'jobs', columns: statusOnly }, handler: () => undefined, concurrency: 64, claimStrategy: 'native', exitWhenEmpty: true });
    expect(w.queue.table.features.fencing).toBe(false);
    const counters = await w.run();
    expect(counters).toMatchObject({ claimed: 64, completed: 64, claimLost: 0 });
    // One UPDATE of the 64 ids, with no token to bind.
    expect(completions).toEqual([64]);
    expect(statuses(s).every((status) => status === 1)).toBe(true);
  });

  it("settles by ctx functions taken out of ctx (destructured), as by ctx.abuse() and ctx.giveUp()", async () => {
    const s = await withJobs(3);
    const w = await worker(s, {
      concurrency: 3,
      exitWhenEmpty: true,
      handler: (job, { abuse, giveUp, workerId }) => {
        expect(workerId).toBe(w.workerId);
        if (job.id === 1) return abuse('flagged');
        if (job.id === 2) giveUp('no');
        return undefined;
      },
    });
    const counters = await w.run();
    expect(counters).toMatchObject({ abused: 1, failed: 1, completed: 1 });
    expect(s.rows('SELECT id, status, last_error FROM jobs ORDER BY id')).toEqual([
      { id: 1, status: 2, last_error: 'flagged' },
      { id: 2, status: 0, last_error: 'no' },
      { id: 3, status: 1, last_error: null },
    ]);
  });

  it('ends run() with the error of a settle the database refuses for good, leaving the row in processing', async () => {
    const s = await withJobs(1);
    const refusal = new StoreError('Unknown', 'permission denied for table jobs');
    s.beforeRun = (statements) => {
      if (isCompletion(statements)) throw refusal;
    };
    const w = await worker(s, { concurrency: 1 });
    await expect(w.run()).rejects.toBe(refusal);
    expect(w.counters).toMatchObject({ claimed: 1, completed: 0, claimLost: 0 });
    expect(statuses(s)).toEqual([9]);
  });

  it('ends run() at the first claim refused as Unsupported (a server setting statusq cannot run on), without retrying it', async () => {
    const s = await withJobs(1);
    const refusal = new StoreError('Unsupported', 'binlog_format STATEMENT', 1665);
    let claims = 0;
    s.beforeRun = (statements) => {
      if (statements.some((st) => st.sql.startsWith('SELECT') && st.sql.includes('ORDER BY'))) {
        claims++;
        throw refusal;
      }
    };
    const w = await worker(s, { concurrency: 1 });
    await expect(w.run()).rejects.toBe(refusal);
    expect(claims).toBe(1);
    expect(statuses(s)).toEqual([null]);
  });
});

describe('Worker on a store with an idle probe', () => {
  /** Makes `s` a probing store whose waitForWork records each wait and hands it to `onWait`. */
  function probing(s: SqlJsStore, onWait: (ms: number, call: number) => Promise<void> | void): Array<{ ms: number; table: string | undefined }> {
    const waits: Array<{ ms: number; table: string | undefined }> = [];
    (s as { capabilities: StoreCapabilities }).capabilities = { ...s.capabilities, idleProbe: true };
    (s as Store).waitForWork = async (ms, _signal, table) => {
      waits.push({ ms, table: table?.table });
      await onWait(ms, waits.length);
    };
    return waits;
  }

  it('an idle worker waits in the store for IDLE_PROBE_WAIT_MS, naming its table, and claims once the wait ends', async () => {
    const s = await withJobs(0);
    const ran = gate();
    const waits = probing(s, (_ms, call) => {
      if (call === 2) s.db.run('INSERT INTO jobs (id, date) VALUES (1, 1)');
    });
    const w = await worker(s, { handler: () => ran.open() });
    const running = w.run();
    await ran.promise;
    await w.stop();
    await running;
    expect(waits.slice(0, 2)).toEqual([
      { ms: IDLE_PROBE_WAIT_MS, table: 'jobs' },
      { ms: IDLE_PROBE_WAIT_MS, table: 'jobs' },
    ]);
    // One empty claim before each wait, and the claim that found the row: no claims between probes.
    expect(w.counters.claimCalls).toBe(3);
    expect(statuses(s)).toEqual([1]);
  });

  it('starts no wait once stop() was called during a claim: a drained table\'s probe would hold run() for its whole IDLE_PROBE_WAIT_MS', async () => {
    const s = await withJobs(0);
    let armed = false;
    let stopCall: Promise<unknown> | null = null;
    // The first wait arms the hook; the next statement (the claim after it) sees stop() called while it runs.
    const waits = probing(s, () => {
      armed = true;
    });
    const w = await worker(s, {});
    s.afterCommit = () => {
      if (!armed || stopCall) return;
      stopCall = w.stop();
    };
    await w.run();
    await stopCall;
    expect(stopCall).not.toBeNull();
    // The wait before stop() only: before the fix the claim's empty answer led into a second one.
    expect(waits).toHaveLength(1);
  });

  it('a worker that retried a row waits only until that row comes due, not for the probe\'s IDLE_PROBE_WAIT_MS, and runs it then', async () => {
    const s = await withJobs(1);
    const ran = gate();
    const attempts: number[] = [];
    // Each wait sleeps for real (bounded): the row must come due on the store's clock before a claim takes it.
    const waits = probing(s, (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 2_000))));
    const w = await worker(s, {
      retryDelayMs: 200,
      maxAttempts: 3,
      handler: (job) => {
        attempts.push(job.attempt);
        if (job.attempt === 1) throw new Error('temporary');
        ran.open();
      },
    });
    const running = w.run();
    await ran.promise;
    await w.stop();
    await running;
    expect(attempts).toEqual([1, 2]);
    // The first wait after the retry ends when the row is due (200 ms with jitter, plus a few ms of slack).
    expect(waits[0]!.ms).toBeGreaterThan(0);
    expect(waits[0]!.ms).toBeLessThanOrEqual(205);
    expect(statuses(s)).toEqual([1]);
  });

  it('with exitWhenEmpty the wait is the polling backoff, so another worker\'s row finishing is seen', async () => {
    const s = await withJobs(1);
    s.db.run("UPDATE jobs SET status = 9, claimed_at = ?, worker_id = 'elsewhere'", [Date.now()]);
    const waits = probing(s, (_ms, call) => {
      if (call === 3) s.db.run('UPDATE jobs SET status = 1');
    });
    const w = await worker(s, { exitWhenEmpty: true, leaseMs: 3_600_000 });
    await w.run();
    expect(waits.length).toBeGreaterThanOrEqual(3);
    expect(waits.every((wait) => wait.ms <= 5)).toBe(true);
  });
});

describe('Worker on a store that wakes on inserts (NOTIFY, a file watch), not when a row comes due', () => {
  it("asks the database when another process's delayed row comes due and waits only until then, not for its poll", async () => {
    const s = await withJobs(0);
    const waits: number[] = [];
    // waitForWork as PostgreSQL's LISTEN or SQLite's file watch: it ends on an insert or after `ms`. The first
    // wait sees another process insert a row delayed by a second (and ends, as its notification would).
    (s as Store).waitForWork = (ms) => {
      waits.push(ms);
      if (waits.length === 1) {
        s.db.run('INSERT INTO jobs (id, date, next_attempt_at) VALUES (1, 1, ?)', [Date.now() + 1_000]);
        return Promise.resolve();
      }
      return new Promise((resolve) => setTimeout(resolve, Math.min(ms, 2_000)));
    };
    const ran = gate();
    const w = await worker(s, { pollMinMs: 60_000, pollMaxMs: 60_000, handler: () => ran.open() });
    const running = w.run();
    await ran.promise;
    await w.stop();
    await running;
    // The wait after the insert ends when the row is due (a second less what passed since, plus 5 ms of slack and
    // a few of rounding: the store's clock is SQLite's julianday, in floating point), not after the poll's 60 s.
    expect(waits[1]).toBeGreaterThan(0);
    expect(waits[1]).toBeLessThanOrEqual(1_010);
    expect(statuses(s)).toEqual([1]);
  });
});
