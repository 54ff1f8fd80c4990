/**
 * statusq demo: seeds the seed's table_a into a fresh SQLite file, migrates it for leases and retries,
 * drains it with several workers on separate connections, then proves from a ledger of every handler
 * execution that no row was handled twice. Exit code 0 when every check passes, 1 otherwise.
 */
import { rmSync } from 'node:fs';
import { connect, type SqliteStore } from '@statusq/adapter-sqlite';
import { Queue, Worker, describeError, loadHandler, type Handler, type HandlerModule } from '@statusq/core';
import { generateTableARows, handlerPath, type TableARow } from '@statusq/test-fixtures';
import { verifyRun } from './checks.js';
import { TABLE, createDemoDatabase, readFinalRows, sqliteUrl } from './database.js';
import { Ledger, recordingHandler } from './ledger.js';
import { USAGE, UsageError, parseOptions, type DemoOptions } from './options.js';
import { runLauncher } from './processes.js';
import { ProgressLine } from './progress.js';
import { describeMigration, describeSeed, kindCounts, printSummary } from './report.js';

/** Poison rows must use every attempt, so the check on them knows what to expect. */
const MAX_ATTEMPTS = 3;
/** Small so retries come due within the run; the worker doubles it per attempt. */
const RETRY_DELAY_MS = 20;
/** Idle workers wait at most this long for a scheduled retry to come due, which keeps the tail short. */
const POLL_MAX_MS = 100;
/** Every 25th row fails its first attempt only, to show a retry that then succeeds. */
const FLAKY_EVERY = 25;
/** On Ctrl-C running jobs get this long to finish before their claims are handed back (jobs here take a few ms). */
const STOP_TIMEOUT_MS = 500;

interface DemoWorker {
  label: string;
  worker: Worker;
  errors: string[];
}

async function main(options: DemoOptions): Promise<boolean> {
  const rows = generateTableARows(options.rows, { flakyEvery: FLAKY_EVERY });
  const who = options.processes ? `${options.processes} worker processes (statusq work --processes)` : `${options.workers} workers`;
  console.log(`statusq demo: ${who} x ${options.concurrency} slots (batch ${options.batch}), maxAttempts ${MAX_ATTEMPTS}`);
  console.log(`database: ${options.db}`);

  const seedStart = performance.now();
  const migration = await createDemoDatabase(options.db, rows);
  console.log(describeSeed(rows, performance.now() - seedStart));
  console.log(describeMigration(migration));

  const stores: SqliteStore[] = [];
  const openStore = async () => {
    const store = await connect(sqliteUrl(options.db));
    stores.push(store);
    return store;
  };
  try {
    if (options.processes) return await mainWithProcesses(options, rows, openStore);
    const { handler, isAbuse } = await loadHandler(handlerPath('table-a.mjs'));
    // The fixture exports one function; a map by kind here would be a broken fixture, not a demo to run.
    if (!handler) throw new Error('the table_a fixture handler exports no function');
    const fixture = { handler, isAbuse };
    const ledger = new Ledger();
    const workers: DemoWorker[] = [];
    for (let i = 1; i <= options.workers; i++) workers.push(await createWorker(`w${i}`, await openStore(), fixture, ledger, options));
    // The progress line and the final checks read through a connection of their own, as a dashboard would.
    const monitor = await Queue.open(await openStore(), { table: TABLE });

    console.log('');
    const stopOnInterrupt = interruptHandler(workers);
    const progress = new ProgressLine(monitor);
    const started = performance.now();
    progress.start();
    try {
      await Promise.all(workers.map((w) => w.worker.run()));
    } finally {
      await progress.stop();
      process.off('SIGINT', stopOnInterrupt.listener);
    }
    const elapsedMs = performance.now() - started;

    const reports = workers.map((w) => ({ label: w.label, counters: w.worker.counters, runs: ledger.countByWorker(w.label), errors: w.errors }));
    const verdict = verifyRun(await readFinalRows(monitor.store), ledger, MAX_ATTEMPTS, reports);
    printSummary({
      elapsedMs,
      totalRows: rows.length,
      counts: await monitor.counts(),
      workers: reports,
      seeded: kindCounts(rows),
      maxAttempts: MAX_ATTEMPTS,
      verdict,
      interrupted: stopOnInterrupt.interrupted(),
    });
    return verdict.passed && !stopOnInterrupt.interrupted();
  } finally {
    await Promise.all(stores.map((s) => s.close()));
  }
}

/** The same run, with the workers in `statusq work --processes N` and the ledger in a file they append to. */
async function mainWithProcesses(options: DemoOptions, rows: readonly TableARow[], openStore: () => Promise<SqliteStore>): Promise<boolean> {
  const monitor = await Queue.open(await openStore(), { table: TABLE });
  const ledgerPath = `${options.db}.ledger`;
  rmSync(ledgerPath, { force: true });
  console.log('');
  let interrupted = false;
  // Ctrl-C reaches the launcher too, which drains its children; this process waits and still reports.
  const onInterrupt = () => (interrupted = true);
  process.on('SIGINT', onInterrupt);
  const progress = new ProgressLine(monitor);
  const started = performance.now();
  progress.start();
  let run;
  try {
    run = await runLauncher({
      dbPath: options.db,
      table: TABLE,
      processes: options.processes!,
      concurrency: options.concurrency,
      batch: options.batch,
      maxAttempts: MAX_ATTEMPTS,
      retryDelayMs: RETRY_DELAY_MS,
      ledgerPath,
    });
  } finally {
    await progress.stop();
    process.off('SIGINT', onInterrupt);
  }
  const elapsedMs = performance.now() - started;
  const verdict = verifyRun(await readFinalRows(monitor.store), run.ledger, MAX_ATTEMPTS, run.workers);
  printSummary({
    elapsedMs,
    totalRows: rows.length,
    counts: await monitor.counts(),
    workers: run.workers,
    seeded: kindCounts(rows),
    maxAttempts: MAX_ATTEMPTS,
    verdict,
    interrupted,
  });
  if (run.exitCode !== 0) console.log(`statusq work --processes exited with code ${run.exitCode}`);
  return verdict.passed && run.exitCode === 0 && !interrupted;
}

async function createWorker(label: string, store: SqliteStore, fixture: { handler: Handler; isAbuse?: HandlerModule['isAbuse'] }, ledger: Ledger, options: DemoOptions): Promise<DemoWorker> {
  const worker = await Worker.create({
    store,
    table: { table: TABLE },
    handler: recordingHandler(fixture.handler, ledger, label),
    isAbuse: fixture.isAbuse,
    concurrency: options.concurrency,
    batch: options.batch,
    maxAttempts: MAX_ATTEMPTS,
    retryDelayMs: RETRY_DELAY_MS,
    pollMaxMs: POLL_MAX_MS,
    exitWhenEmpty: true,
  });
  const errors: string[] = [];
  // The worker survives these (it retries, or leaves the row to the lease reaper); the summary shows them.
  worker.on('error', ({ error, during }) => errors.push(`${during}: ${describeError(error)}`));
  return { label, worker, errors };
}

/** First Ctrl-C drains the workers so the summary still prints; a second one exits at once. */
function interruptHandler(workers: readonly DemoWorker[]) {
  let interrupted = false;
  const listener = () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    process.stderr.write('\ninterrupted: stopping workers (Ctrl-C again to quit now)\n');
    for (const w of workers) void w.worker.stop(STOP_TIMEOUT_MS);
  };
  process.on('SIGINT', listener);
  return { listener, interrupted: () => interrupted };
}

function run(argv: readonly string[]): void {
  let options: DemoOptions | 'help';
  try {
    options = parseOptions(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`demo: ${error.message}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  if (options === 'help') {
    console.log(USAGE);
    return;
  }
  // exitCode rather than process.exit(): the process must end by itself, which shows nothing was left open.
  main(options).then(
    (passed) => (process.exitCode = passed ? 0 : 1),
    (error: unknown) => {
      console.error(`demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      process.exitCode = 1;
    },
  );
}

run(process.argv.slice(2));
