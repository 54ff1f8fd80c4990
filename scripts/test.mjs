// `pnpm test [TIER ...] [-- VITEST ARGS]`: builds, then runs the test tiers (scripts/test-tiers.mjs). With no
// tier it runs all of them, with lint and typecheck, which is what `.ci/run` runs, in four phases: the
// unit, conformance and browser files beside lint and typecheck, the packed-package check and the README's
// demo (both cores busy); then the chaos files beside the two example apps (one after the other); then the
// benchmark and scale-out, each as two processes (PostgreSQL, and the other databases); then the checks on
// Node 22 and 24.
// CONTRIBUTING.md's timing table says where the time goes.
// Each step's time goes to artifacts/test-steps.json, which scripts/test-timings.mjs turns into that table.
// Exit: 0 all passed, 1 a step failed, 2 a bad tier name, STATUSQ_DIALECTS or STATUSQ_TEST_WORKERS.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:net';
import { OTHER_NODE_LINES } from './node-lines.mjs';
import { MYSQL_SERVER, POSTGRES_SERVER } from './packs.mjs';
import { TIERS, TierUsageError, selectedDialects } from './test-tiers.mjs';

const root = new URL('..', import.meta.url).pathname;
const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
const named = dash === -1 ? argv : argv.slice(0, dash);
const vitestArgs = dash === -1 ? [] : argv.slice(dash + 1);

let tiers;
try {
  const unknown = named.filter((name) => !TIERS.includes(name));
  if (unknown.length > 0) throw new TierUsageError(`unknown tier ${unknown.map((n) => `"${n}"`).join(', ')}: the tiers are ${TIERS.join(', ')}`);
  selectedDialects();
  tiers = named.length === 0 ? [...TIERS] : named;
} catch (error) {
  if (!(error instanceof TierUsageError)) throw error;
  console.error(`statusq tests: ${error.message}`);
  process.exit(2);
}
const everything = named.length === 0;

const steps = [];
const stepsFile = join(root, 'artifacts/test-steps.json');
const began = performance.now();
/** Written after every step, so a run that is stopped still says where its time went. */
function saveSteps() {
  mkdirSync(join(root, 'artifacts'), { recursive: true });
  writeFileSync(stepsFile, `${JSON.stringify({ tiers, dialects: selectedDialects(), total: Math.round((performance.now() - began) / 100) / 10, steps }, null, 2)}\n`);
}

/** Runs one step, its output prefixed with its name; resolves with its exit code (never rejects). */
function step(name, command, args, options = {}) {
  const started = performance.now();
  const prefix = `[${name.split(':')[0]}]`;
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], ...options });
    for (const stream of [child.stdout, child.stderr]) {
      let partial = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop();
        for (const line of lines) process.stdout.write(`${prefix} ${line}\n`);
      });
      stream.on('end', () => partial && process.stdout.write(`${prefix} ${partial}\n`));
    }
    const done = (code) => {
      const seconds = Math.round((performance.now() - started) / 100) / 10;
      steps.push({ step: name, seconds, code });
      saveSteps();
      console.log(`${prefix} ${name} ${code === 0 ? 'passed' : `FAILED (exit ${code})`} in ${seconds} s`);
      resolve(code);
    };
    child.on('error', (error) => {
      console.log(`${prefix} could not start ${command}: ${error.message}`);
      done(127);
    });
    child.on('exit', (code, signal) => done(code ?? (signal ? 128 : 1)));
  });
}

const npx = (...args) => ['npx', args];
const vitestTiers = tiers.filter((tier) => tier !== 'system');
// With every tier, the chaos files get a vitest run of their own after the rest (beside the example app);
// a run of chosen tiers is one vitest run, whose config still puts chaos last.
const firstTiers = everything ? vitestTiers.filter((tier) => tier !== 'chaos') : vitestTiers;
const laterTiers = everything ? ['chaos'] : [];
/** One vitest run of `runTiers`; in CI its JSON report is test-results.<report>.json (check-test-reports reads them all). */
// The chaos files run two at a time (unless STATUSQ_TEST_WORKERS says otherwise): they restart private servers
// and brokers against deadlines, and with three at once beside the example app a broker race failed (its
// relay re-published rows nobody claimed in time; 2026-12-05); two at once took no longer than three.
const CHAOS_WORKERS = 2;
// Through the variable vitest.config.ts reads: vitest's --maxWorkers flag does not reach the projects, which
// take the root config's pool size (a run with the flag still ran three chaos files at once).
const vitestRun = (runTiers, report) => {
  const pool = runTiers.every((tier) => tier === 'chaos') && !process.env.STATUSQ_TEST_WORKERS ? { STATUSQ_TEST_WORKERS: String(CHAOS_WORKERS) } : {};
  const env = { ...process.env, ...pool, ...(report && { STATUSQ_TEST_REPORT: report }) };
  return step(`vitest: ${runTiers.join(', ')}`, ...npx('vitest', 'run', ...runTiers.flatMap((tier) => ['--project', tier]), ...vitestArgs), { env });
};

/** Whether something accepts TCP connections at the host and port of `url`, within two seconds. */
function answers(url, defaultPort) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname || '127.0.0.1', port: Number(port || defaultPort), timeout: 2_000 });
    const end = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => end(true));
    socket.once('error', () => end(false));
    socket.once('timeout', () => end(false));
  });
}

/**
 * Why the system tier's server steps (the packed packages' doctor runs, the example app on MariaDB, the
 * benchmark, scale-out) cannot run here, or null. Outside CI a machine without the servers skips them with
 * this reason, as the database suites skip; in CI (STATUSQ_REQUIRE_DATABASES=1) they always run, and fail.
 */
async function systemServersMissing() {
  if (process.env.STATUSQ_REQUIRE_DATABASES === '1') return null;
  const missing = [];
  if (!(await answers(POSTGRES_SERVER, 5432))) missing.push(`PostgreSQL (${new URL(POSTGRES_SERVER).host})`);
  if (!(await answers(MYSQL_SERVER, 3306))) missing.push(`MariaDB/MySQL (${new URL(MYSQL_SERVER).host})`);
  return missing.length === 0 ? null : `${missing.join(' and ')} did not answer (bash scripts/services.sh starts them)`;
}

// A failed step is in `steps`; every later step still runs, so one run reports every failure.
if ((await step('build', ...npx('turbo', 'run', 'build', '--output-logs=errors-only'))) === 0) {
  const missing = tiers.includes('system') ? await systemServersMissing() : null;
  if (missing) console.log(`[system] skipped check-packages, check-example, check-url-fetcher, bench --quick and scale --quick: ${missing}`);
  const packs = tiers.includes('system') && !missing ? mkdtempSync(join(tmpdir(), 'statusq-packs-')) : null;
  try {
    // Three phases, each a few steps side by side; the machine's two cores are busy in the first, and the
    // later ones mostly wait on servers, restarts and leases.
    const first = [];
    if (everything) first.push(step('lint+typecheck', ...npx('turbo', 'run', 'lint', 'typecheck', '--output-logs=errors-only')));
    // No import loop anywhere (type-only imports too) and core's rooms importing only downward (.dependency-cruiser.cjs).
    if (everything) first.push(step('imports', ...npx('depcruise', '--config', '.dependency-cruiser.cjs', 'packages', 'apps', 'test-fixtures', 'examples')));
    // Each public entry's names within its budget, as explicit lists (scripts/check-public-face.mjs).
    if (everything) first.push(step('public-face', 'node', ['scripts/check-public-face.mjs']));
    // Outside the adapters no source file names a database, bar the URL-scheme map (scripts/check-dialect-words.mjs).
    if (everything) first.push(step('dialect-words', 'node', ['scripts/check-dialect-words.mjs']));
    if (firstTiers.length > 0) first.push(vitestRun(firstTiers, laterTiers.length > 0 ? 'first' : undefined));
    // The public packages as a user gets them: packed, publint-clean, installed with plain npm into a fresh
    // project where `npx statusq` runs (mostly npm's install, beside the tests).
    if (packs) first.push(step('check-packages', 'node', ['scripts/check-packages.mjs', '--packs', packs]));
    // The README's demo command, word for word (SQLite only): it exits non-zero if any row was handled twice.
    if (tiers.includes('system')) first.push(step('demo', ...npx('-y', 'pnpm@12.4.2', 'demo')));
    await Promise.all(first);
    // The chaos files (private servers restarted and killed, proxies, brokers), beside the example app from
    // the same tarballs on SQLite and MariaDB; neither shares a server with the other's faults.
    const second = laterTiers.length > 0 ? [vitestRun(laterTiers, 'chaos')] : [];
    // Then the URL-fetching example against a local HTTP server, per-host limits across two worker processes:
    // after the first example rather than beside it, so that the chaos files keep the company they were tuned with.
    if (packs) second.push(step('check-example', 'node', ['scripts/check-example.mjs', '--packs', packs]).then(() => step('check-url-fetcher', 'node', ['scripts/check-url-fetcher.mjs', '--packs', packs])));
    await Promise.all(second);
    if (packs) {
      // The benchmark harness, small, so it never rots (its numbers are not judged here), and scale-out on
      // hosts made here, which exits 1 unless every run's ledger proof holds. Each runs as two processes, one
      // for PostgreSQL and one for the rest: most of their time is waiting on set-up, servers and timers, and the
      // halves share nothing (each dialect has its own bench database; hosts and brokers' queues are named
      // after the process that made them). PostgreSQL's bench half carries the peers; its scale half, failover
      // and PgBouncer; MariaDB's, Galera.
      await Promise.all([
        step('bench --quick --dialects postgres', 'timeout', ['600', 'node', 'apps/bench/dist/bench.js', '--quick', '--dialects', 'postgres']),
        step('bench --quick --dialects sqlite,mysql', 'timeout', ['600', 'node', 'apps/bench/dist/bench.js', '--quick', '--dialects', 'sqlite,mysql']),
        step('scale --quick --dialects postgres', 'timeout', ['900', 'node', 'apps/bench/dist/scale/scale.js', '--quick', '--dialects', 'postgres']),
        step('scale --quick --dialects mysql', 'timeout', ['900', 'node', 'apps/bench/dist/scale/scale.js', '--quick', '--dialects', 'mysql']),
        // The documentation site: built with 0 dead links or anchors, the guides' CLI flags held to the help,
        // their TypeScript compiled against these tarballs, their runnable shell blocks run on SQLite, and three
        // pages shot into artifacts/ (docs/scripts/check.mjs).
        step('docs', 'node', ['docs/scripts/check.mjs', '--packs', packs]),
      ]);
      // The other Node lines users run (22 and 24), side by side: the unit tier, the conformance kit on the three
      // databases and the packed CLI, each line fetched from the npm registry (scripts/check-node-line.mjs). A
      // phase of their own: beside the chaos files (2026-12-05) their installs and races took both cores, the
      // private RabbitMQ restarts missed their deadlines and the chaos run failed.
      await Promise.all(OTHER_NODE_LINES.map((line) => step(`node ${line}: unit, conformance kit, packed packages`, 'node', ['scripts/check-node-line.mjs', String(line), '--packs', packs])));
    } else if (tiers.includes('system')) {
      // Without the servers the documentation is still checked: it needs SQLite only, and packs for itself.
      await step('docs', 'node', ['docs/scripts/check.mjs']);
    }
  } finally {
    if (packs) rmSync(packs, { recursive: true, force: true });
  }
}

saveSteps();
const total = Math.round((performance.now() - began) / 100) / 10;
const failed = steps.filter((s) => s.code !== 0);
console.log(`statusq tests (${tiers.join(', ')}): ${failed.length === 0 ? 'passed' : `${failed.map((s) => s.step).join(', ')} FAILED`} in ${total} s`);
process.exit(failed.length === 0 ? 0 : 1);
