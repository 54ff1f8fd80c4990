// Runs examples/table-a-worker as a user would: a copy of it outside the workspace, its @statusq/*
// dependencies pointed at the packed tarballs, installed with plain npm, built with its own tsc. Then, on
// SQLite and on MariaDB (a database of its own, dropped afterwards): seed 500 rows, work until empty, check
// every row is done or abuse as the example's rule says; seed a larger backlog, SIGTERM the worker mid-way,
// check it exits 0 within its stop timeout with no row left in processing, and drain the rest; and run the
// example's conformance file. Prints the example's own output. First, docs/guide/from-code.md's From code block must
// be the example's src/worker.ts.
// Run after the build: node scripts/check-example.mjs [--packs DIR] (DIR: tarballs check-packages.mjs packed).
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MYSQL_SERVER, installFromTarballs, outputTail, packedTarballs, root, run, scratchDatabase, vitestSummary } from './packs.mjs';

const EXAMPLE = join(root, 'examples/table-a-worker');
const SEEDED = 500;
const BACKLOG = 3000;
const BLOCKED_HOST = 'spam.example'; // the example's rule; its seed puts every tenth row there
/** The worker's own stop timeout (src/worker.ts); core's hand-back margin (STOP_MARGIN_MS) is added once core is installed. */
const WORKER_STOP_TIMEOUT_MS = 30_000;
let STOP_BOUND_MS;

const began = performance.now();
const seconds = (since) => `${((performance.now() - since) / 1000).toFixed(1)} s`;
const failures = [];
const expect = (ok, message) => {
  if (!ok) failures.push(message);
  return ok;
};
const show = (label, text) => {
  for (const line of text.trimEnd().split('\n')) if (line) console.info(`  [${label}] ${line}`);
};

// One source of truth: the docs' "From code" block (docs/guide/from-code.md) is the example's worker, character for character.
const page = readFileSync(join(root, 'docs/guide/from-code.md'), 'utf8');
const block = /^# From code\n[\s\S]*?^```ts\n([\s\S]*?)^```$/m.exec(page)?.[1];
expect(block === readFileSync(join(EXAMPLE, 'src/worker.ts'), 'utf8'), "docs/guide/from-code.md's From code block is not examples/table-a-worker/src/worker.ts: copy the file into it");

const work = mkdtempSync(join(tmpdir(), 'statusq-example-'));
let dropDatabase = async () => {};
try {
  const tarballs = packedTarballs(work);
  const app = join(work, 'table-a-worker');
  cpSync(EXAMPLE, app, { recursive: true, filter: (path) => !/(^|\/)(node_modules|dist)$|\.db(-wal|-shm)?$/.test(relative(EXAMPLE, path)) });
  installFromTarballs(app, tarballs);
  // An env value of undefined removes that variable.
  const npm = (args, env = {}) => run('npm', args, app, { env: Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([, v]) => v !== undefined)), timeout: 600_000 });
  npm(['run', 'build']);
  npm(['run', 'typecheck']);
  console.info(`example installed from the tarballs with npm and built (${seconds(began)})`);
  const { STOP_MARGIN_MS } = await import(pathToFileURL(join(app, 'node_modules/@statusq/core/dist/tools.js')).href);
  // A name missing from that entry would make the bound NaN, and the timer built on it fire at once.
  if (!Number.isSafeInteger(STOP_MARGIN_MS)) throw new Error(`@statusq/core/tools exports no STOP_MARGIN_MS (got ${STOP_MARGIN_MS})`);
  STOP_BOUND_MS = WORKER_STOP_TIMEOUT_MS + STOP_MARGIN_MS;

  const mariadb = await scratchDatabase(app, MYSQL_SERVER, 'statusq_example');
  dropDatabase = mariadb.drop;
  const mariadbUrl = mariadb.url;

  for (const [label, url] of [
    ['sqlite', `sqlite:${join(app, 'dev.db')}`],
    ['mariadb', mariadbUrl],
  ]) {
    const step = performance.now();
    const env = { DATABASE_URL: url };
    const report = () => JSON.parse(npm(['run', '--silent', 'report'], env));
    show(label, npm(['run', '--silent', 'seed', '--', String(SEEDED)], env));
    show(label, npm(['start', '--silent'], { ...env, EXIT_WHEN_EMPTY: '1' }));
    const first = report();
    show(label, JSON.stringify(first));
    expectByRule(label, first, { done: SEEDED - SEEDED / 10, abuse: SEEDED / 10 });

    // Graceful shutdown: SIGTERM while jobs run (20 ms each, 8 at a time), as a process manager sends it.
    show(label, npm(['run', '--silent', 'seed', '--', String(BACKLOG)], env));
    const stop = await terminateMidway(app, { ...env, WORK_MS: '20' }, label);
    const afterStop = report();
    show(label, `SIGTERM after ${stop.settledBeforeSignal} settled: exit ${stop.code} in ${stop.ms} ms; ${JSON.stringify(afterStop.byStatus)}`);
    expect(stop.code === 0, `${label}: the worker exited ${stop.code} (signal ${stop.signal}) after SIGTERM, not 0`);
    expect(stop.ms < STOP_BOUND_MS, `${label}: the worker took ${stop.ms} ms to stop, past ${STOP_BOUND_MS} ms`);
    expect(!afterStop.byStatus.processing, `${label}: ${afterStop.byStatus.processing} rows left in processing (9) after SIGTERM`);
    expect(afterStop.byStatus.pending > 0, `${label}: SIGTERM came after the backlog was done, so it stopped nothing`);
    show(label, npm(['start', '--silent'], { ...env, EXIT_WHEN_EMPTY: '1' }));
    const total = SEEDED + BACKLOG;
    expectByRule(label, report(), { done: total - total / 10, abuse: total / 10 });
    console.info(`${label}: ${SEEDED} rows worked until empty, SIGTERM drained cleanly, the rest of ${BACKLOG} worked after a restart (${seconds(step)})`);
  }

  for (const [label, env] of [
    ['sqlite', { STATUSQ_MYSQL_URL: undefined }],
    ['mariadb', { STATUSQ_MYSQL_URL: MYSQL_SERVER }],
  ]) {
    const step = performance.now();
    let output;
    let passed = true;
    try {
      output = npm(['test'], env);
    } catch (error) {
      output = `${error.stdout}${error.stderr}`;
      passed = expect(false, `${label}: the example's conformance file failed`);
    }
    show(label, `conformance file: ${vitestSummary(output)} (${seconds(step)})`);
    if (!passed) show(label, outputTail(output));
  }
} catch (error) {
  failures.push(`${error.message}\n${error.stdout ?? ''}${error.stderr ?? ''}`);
} finally {
  await dropDatabase().catch((error) => failures.push(`dropping the example's database: ${error.message}`));
  rmSync(work, { recursive: true, force: true });
}
console.info(`examples/table-a-worker: ${failures.length === 0 ? 'passed' : 'FAILED'} in ${seconds(began)}`);
if (failures.length > 0) {
  console.error(failures.join('\n'));
  process.exit(1);
}

/** Each host's rows all settled as the rule says: the blocked host's abuse, every other host's done. */
function expectByRule(label, report, byStatus) {
  expect(JSON.stringify(report.byStatus) === JSON.stringify(byStatus), `${label}: rows by status ${JSON.stringify(report.byStatus)}, expected ${JSON.stringify(byStatus)}`);
  for (const [host, statuses] of Object.entries(report.byHost)) {
    const want = host === BLOCKED_HOST ? 'abuse' : 'done';
    expect(Object.keys(statuses).join() === want, `${label}: rows of ${host} ended ${JSON.stringify(statuses)}, all should be ${want}`);
  }
}

/**
 * Starts the worker as a process manager would (node, no npm in between), sends SIGTERM once it reports
 * its first progress line (every 500 settled rows), and resolves with how it exited and how long after the signal.
 */
function terminateMidway(app, env, label) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['dist/worker.js'], { cwd: app, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let signalled = null;
    let settledBeforeSignal = 0;
    const fail = (message) => {
      clearTimeout(bound);
      child.kill('SIGKILL');
      reject(new Error(`${label}: ${message}\n${output}`));
    };
    // Bounds the whole run: the first progress line within 60 s, and the exit within STOP_BOUND_MS of SIGTERM.
    let bound = setTimeout(() => fail('the worker reported no progress within 60 s'), 60_000);
    const read = (chunk) => {
      output += chunk;
      const settled = /settled (\d+)/.exec(output);
      if (settled && signalled === null) {
        settledBeforeSignal = Number(settled[1]);
        signalled = performance.now();
        child.kill('SIGTERM');
        clearTimeout(bound);
        bound = setTimeout(() => fail(`the worker had not exited ${STOP_BOUND_MS} ms after SIGTERM`), STOP_BOUND_MS);
      }
    };
    child.stdout.setEncoding('utf8').on('data', read);
    child.stderr.setEncoding('utf8').on('data', read);
    child.on('error', fail);
    child.on('exit', (code, signal) => {
      clearTimeout(bound);
      show(label, output);
      if (signalled === null) return reject(new Error(`${label}: the worker exited (${code ?? signal}) before SIGTERM\n${output}`));
      resolve({ code, signal, ms: Math.round(performance.now() - signalled), settledBeforeSignal });
    });
  });
}
