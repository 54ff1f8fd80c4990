import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Queue, StoreError, Worker, initTable, type Store } from '@statusq/core';
import { EXIT, type ConnectOptions } from '@statusq/core/tools';
import { openStore } from '../adapters.js';
import { oneLine } from '../text.js';
import type { Check, RaceReport } from '../doctor-report.js';
import type { Io } from '../with-store.js';

export const RACE_DEFAULTS = { jobs: 2_000, workers: 4 } as const;
export const RACE_LIMITS = { jobs: 100_000, workers: 32 } as const;
/** The whole race, enqueue to last settle; a few thousand rows take seconds on every database measured. */
export const RACE_DEADLINE_MS = 120_000;
/** Slots per racing worker, so that claims of several workers overlap. */
const RACE_CONCURRENCY = 4;

/** Rows a scratch-table INSERT carries: a signal is heard between two of them. */
const RACE_ENQUEUE_CHUNK = 1_000;

interface RaceOutcome {
  report: RaceReport;
  /** Why the race failed; null when it ran to the end. */
  failure: string | null;
  /** The scratch table could not be created (no CREATE privilege): the race did not run, which is no failure of the claim. */
  skipped: string | null;
  interrupted: boolean;
}

/**
 * The conformance race in short, on this server: a managed scratch table with `jobs` rows, `workers` Workers
 * each on its own store (as separate processes would be) claiming natively at once; every job must run
 * exactly once and end done. The scratch table is always dropped: SIGINT/SIGTERM, from before it is created
 * until it is dropped, stops what runs, skips the rest and drops it (a second signal exits at once).
 */
export async function runRace(url: string, connectOptions: ConnectOptions, adapter: string | undefined, admin: Store, jobs: number, workers: number, io: Io): Promise<RaceOutcome> {
  const table = `statusq_doctor_${randomBytes(5).toString('hex')}`;
  const report: RaceReport = { table, jobs, workers, done: 0, ranTwice: 0, neverRan: jobs, left: { pending: 0, processing: 0, failed: 0, abuse: 0, other: 0 }, candidatesLost: 0, errors: 0, ms: 0, jobsPerSecond: 0, dropped: false };
  let failure: string | null = null;
  let skipped: string | null = null;
  let interrupted = false;
  let onInterrupt = () => {};
  const interruption = new Promise<'interrupted'>((resolve) => (onInterrupt = () => resolve('interrupted')));
  const unregister = io.onSignal((signal) => {
    if (interrupted) {
      io.err(`statusq doctor: ${signal} again: exiting now; drop the scratch table ${table} by hand if it is still there`);
      process.exit(EXIT.stoppedHard);
    }
    interrupted = true;
    io.err(`statusq doctor: ${signal}: stopping the race and dropping ${table}; send again to exit at once`);
    onInterrupt();
  });
  io.err(`statusq doctor: race: ${jobs} jobs, ${workers} workers on scratch table ${table}`);
  try {
    try {
      await initTable(admin, table);
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      skipped = oneLine(error);
    }
    if (skipped === null && !interrupted) await race();
  } catch (error) {
    failure = oneLine(error);
  } finally {
    report.dropped = await dropScratch(admin, table);
    unregister();
  }
  if (interrupted) failure = 'interrupted by a signal';
  return { report, failure, skipped, interrupted };

  async function race(): Promise<void> {
    const queue = await Queue.open(admin, { table });
    for (let from = 0; from < jobs && !interrupted; from += RACE_ENQUEUE_CHUNK) {
      await queue.enqueue(Array.from({ length: Math.min(RACE_ENQUEUE_CHUNK, jobs - from) }, (_, i) => ({ n: from + i })));
    }
    if (interrupted) return;
    const { rows } = await admin.execute({ sql: `SELECT ${admin.dialect.quoteIdentifier(queue.idColumn.name)} AS id FROM ${admin.dialect.quoteIdentifier(table)}`, params: [] });
    const runs = new Map<string, number>(rows.map((r) => [String(r.id), 0]));
    const stores: Store[] = [];
    try {
      for (let i = 0; i < workers && !interrupted; i++) stores.push(await openStore(url, connectOptions, adapter));
      if (interrupted) return;
      const racers = await Promise.all(
        stores.map((store) =>
          Worker.create({
            store,
            table: { table },
            claimStrategy: 'native',
            concurrency: RACE_CONCURRENCY,
            exitWhenEmpty: true,
            maxAttempts: 1,
            handler: (job) => void runs.set(String(job.id), (runs.get(String(job.id)) ?? 0) + 1),
          }),
        ),
      );
      for (const racer of racers) racer.on('error', () => void report.errors++);
      const started = performance.now();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), RACE_DEADLINE_MS)));
      const running = racers.map((r) => r.run());
      // One racer failing stops them all: the others must not go on claiming from stores about to close.
      const finished = await Promise.race([Promise.all(running), late, interruption])
        .catch((error: unknown) => ({ failed: error }))
        .finally(() => clearTimeout(timer));
      report.ms = Math.round(performance.now() - started);
      if (Array.isArray(finished)) {
        report.candidatesLost = finished.reduce((sum, c) => sum + c.candidatesLost, 0);
      } else {
        if (finished === 'late') failure = `the workers had not emptied the queue after ${RACE_DEADLINE_MS / 1000} s`;
        else if (finished !== 'interrupted') failure = `a worker failed: ${oneLine(finished.failed)}`;
        await Promise.allSettled(racers.map((r) => r.stop(5_000)));
        await Promise.allSettled(running);
      }
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    if (interrupted) return;
    const counts = await queue.counts();
    report.done = counts.done;
    report.left = { pending: counts.pending, processing: counts.processing, failed: counts.failed, abuse: counts.abuse, other: counts.other };
    report.ranTwice = [...runs.values()].filter((n) => n > 1).length;
    report.neverRan = [...runs.values()].filter((n) => n === 0).length;
    report.jobsPerSecond = report.ms > 0 ? Math.round((report.done * 1000) / report.ms) : report.done;
  }
}

/** Drops the scratch table (and, through the adapter, what init installed with it); true when it is gone. */
async function dropScratch(store: Store, table: string): Promise<boolean> {
  try {
    const statements = store.schema?.dropTable ? await store.schema.dropTable(table) : [{ sql: `DROP TABLE ${store.dialect.quoteIdentifier(table)}`, params: [] }];
    for (const statement of statements) await store.execute(statement);
  } catch {
    // Reported below: the table is still there.
  }
  return (await store.describeTable(table).catch(() => 'unknown')) === null;
}

export function raceCheck(race: RaceReport, failure: string | null, skipped: string | null): Check {
  if (skipped !== null && race.dropped) {
    return {
      name: 'race',
      status: 'warn',
      detail: `not run: the scratch table ${race.table} could not be created (${skipped})`,
      fix: 'grant this URL\'s user CREATE on the schema (some servers do not grant it on the default schema), or skip the race with --race-jobs 0',
    };
  }
  const { left } = race;
  const stuck = left.pending + left.processing + left.failed + left.abuse + left.other;
  const ok = failure === null && skipped === null && race.done === race.jobs && race.ranTwice === 0 && race.neverRan === 0 && stuck === 0 && race.dropped;
  const detail =
    (failure === null ? '' : `${failure}; `) +
    (skipped === null ? '' : `the scratch table could not be created: ${skipped}; `) +
    `${race.jobs} jobs, ${race.workers} workers on ${race.table}: ${race.done} done in ${race.ms} ms (${race.jobsPerSecond} jobs/s), ` +
    `${race.ranTwice} ran twice, ${race.neverRan} never ran, ${stuck} left (${Object.entries(left).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}), ` +
    `${race.candidatesLost} candidates lost, ${race.errors} worker errors; scratch table ${race.dropped ? 'dropped' : 'NOT dropped'}`;
  return { name: 'race', status: ok ? 'pass' : 'fail', detail, ...(race.dropped ? {} : { fix: `drop the scratch table ${race.table} by hand` }) };
}
