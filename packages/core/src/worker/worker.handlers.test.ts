import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Handler } from './handler.js';
import type { JobId } from '../store/store.js';
import { jobsStoreEachTest } from '../test/sqljs-store.js';
import { gate, statuses, worker } from '../test/worker-on-jobs.js';
import { Worker } from './worker.js';

// The worker against an in-memory SQLite (sql.js), as its handlers meet it: a stop or a job timeout while they
// run (what is handed back, retried or left for a recycle, read from the rows another worker would find), the
// claims not started yet, and the rows they are given, typed by the table's interface.

const withJobs = jobsStoreEachTest();

describe('Worker on an in-memory store', () => {
  it('stop past its timeout aborts the running jobs, hands their claims back and reports them abandoned', async () => {
    const s = await withJobs(2);
    const handlers = gate();
    const started = gate();
    let running = 0;
    const w = await worker(s, {
      concurrency: 2,
      handler: async () => {
        if (++running === 2) started.open();
        await handlers.promise; // ignores ctx.signal
      },
    });
    const run = w.run();
    await started.promise;
    const report = await w.stop(20);
    expect(report).toEqual({ drained: false, handedBack: 2, abandoned: 2 });
    expect(statuses(s)).toEqual([null, null]);
    handlers.open();
    expect(await run).toMatchObject({ claimed: 2, released: 2, completed: 0, claimLost: 0 });
    expect(s.rows('SELECT attempt_count AS n FROM jobs').map((r) => r.n)).toEqual([0, 0]);
  });

  it('retries a job that ran past its timeout, as a failed attempt', async () => {
    const s = await withJobs(1);
    const w = await worker(s, {
      jobTimeoutMs: 20,
      retryDelayMs: 60_000,
      handler: (_job, ctx) =>
        new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        }),
    });
    const retried = new Promise<{ error: string; delayMs: number }>((resolve) => w.on('retried', resolve));
    const run = w.run();
    const event = await retried;
    expect(event.error).toMatch(/timeout of 20 ms/);
    expect(event.delayMs).toBeGreaterThan(0);
    await w.stop();
    expect(await run).toMatchObject({ claimed: 1, timedOut: 1, retried: 1, failed: 0, completed: 0 });
    const [row] = s.rows('SELECT status, attempt_count, last_error, next_attempt_at > date AS later FROM jobs');
    expect(row).toMatchObject({ status: null, attempt_count: 1, later: 1 });
    expect(String(row!.last_error)).toMatch(/timeout of 20 ms/);
  });

  it('lists the rest of a claimed batch as unstarted while the first handler runs synchronously', async () => {
    const s = await withJobs(3);
    let seen: Array<{ id: unknown }> | null = null;
    const w: Worker = await worker(s, {
      concurrency: 3,
      exitWhenEmpty: true,
      handler: (job) => {
        seen ??= w.unstartedClaims().filter((c) => c.id !== job.id);
      },
    });
    await w.run();
    // Newest first: job 3 starts first, and 2 and 1 have not run yet.
    expect(seen!.map((c) => c.id).sort()).toEqual([1, 2]);
    expect(w.unstartedClaims()).toEqual([]);
  });

  it('ends the run with reason recycle and settles the row as a failed attempt when a handler ignores its timeout', async () => {
    const s = await withJobs(1);
    const never = gate();
    const w = await worker(s, { jobTimeoutMs: 10, jobTimeoutGraceMs: 10, retryDelayMs: 60_000, handler: () => never.promise });
    const stopped = new Promise<{ reason: string }>((resolve) => w.on('stopped', resolve));
    const counters = await w.run();
    expect(await stopped).toEqual({ reason: 'recycle' });
    expect(counters).toMatchObject({ claimed: 1, timedOut: 1, retried: 1 });
    expect(s.rows('SELECT status, attempt_count FROM jobs')).toEqual([{ status: null, attempt_count: 1 }]);
    never.open();
  });
});

describe('Worker.create<Row>', () => {
  it('hands the handler and the abuse rule rows typed by an interface of the table (no index signature), as the database returned them', async () => {
    interface JobRow {
      id: number;
      date: number;
      status: number | null;
    }
    const s = await withJobs(3);
    const seen: number[] = [];
    const w = await Worker.create<JobRow>({
      store: s,
      table: { table: 'jobs' },
      claimStrategy: 'conditional-update',
      pollMinMs: 1,
      pollMaxMs: 5,
      exitWhenEmpty: true,
      isAbuse: (row) => row.date === 2,
      handler: async (job) => {
        const date: number = job.row.date;
        const id: number = job.id;
        expect(typeof id).toBe('number');
        seen.push(date);
        // @ts-expect-error the row type names the table's columns only
        void job.row.url;
      },
    });
    expect(await w.run()).toMatchObject({ completed: 2, abused: 1 });
    expect(seen.sort()).toEqual([1, 3]);
  });

  // A type test: `pnpm test` runs tsc over the tests (typecheck), which fails on a wrong type here.
  it('types job.id by the row type\'s id, by the second type argument for an id column of another name, and as any JobId without either', () => {
    interface TextKeyed {
      job_key: string;
      status: number | null;
    }
    expectTypeOf<Parameters<Handler<{ id: bigint }>>[0]['id']>().toEqualTypeOf<bigint>();
    expectTypeOf<Parameters<Handler<TextKeyed, string>>[0]['id']>().toEqualTypeOf<string>();
    expectTypeOf<Parameters<Handler<TextKeyed>>[0]['id']>().toEqualTypeOf<JobId>();
    expectTypeOf<Parameters<Handler>[0]['id']>().toEqualTypeOf<JobId>();
    expectTypeOf<Parameters<Handler<{ id: string }>>[0]['id']>().not.toEqualTypeOf<number>();
  });
});
