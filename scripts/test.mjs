// `pnpm test [TIER ...] [-- VITEST ARGS]`: builds, then runs the test tiers (scripts/test-tiers.mjs). With no
// tier it runs all of them, with lint and typecheck, which is what `.ci/run` runs. Steps that wait on
// different things run side by side: lint and typecheck (CPU), the vitest tiers (mostly waiting on servers,
// timers and child processes), the packed-package checks (mostly npm install); the benchmark and the
// scale-out run start once the tests are over, so nothing else shares the machine while they measure.
// Each step's time goes to artifacts/test-steps.json, which scripts/test-timings.mjs turns into the table in
// CONTRIBUTING.md. Exit: 0 all passed, 1 a step failed, 2 a bad tier name or STATUSQ_DIALECTS.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
const codes = [];

codes.push(await step('build', ...npx('turbo', 'run', 'build', '--output-logs=errors-only')));
if (codes[0] === 0) {
  const packs = tiers.includes('system') ? mkdtempSync(join(tmpdir(), 'statusq-packs-')) : null;
  try {
    const together = [];
    if (everything) together.push(step('lint+typecheck', ...npx('turbo', 'run', 'lint', 'typecheck', '--output-logs=errors-only')));
    if (vitestTiers.length > 0) together.push(step(`vitest: ${vitestTiers.join(', ')}`, ...npx('vitest', 'run', ...vitestTiers.flatMap((tier) => ['--project', tier]), ...vitestArgs)));
    if (packs) {
      // The public packages as a user gets them: packed, publint-clean, installed with plain npm into a fresh
      // project where `npx statusq` runs (mostly npm's install, beside the tests).
      together.push(step('check-packages', 'node', ['scripts/check-packages.mjs', '--packs', packs]));
      // The README's demo command, word for word: it exits non-zero if any row was handled twice.
      together.push(step('demo', ...npx('-y', 'pnpm@12.4.2', 'demo')));
    }
    codes.push(...(await Promise.all(together)));
    if (packs) {
      // Alone on the machine, one after another: the example app from the same tarballs on SQLite and MariaDB
      // (its conformance file has timed cases: rate limits, leases), the benchmark harness, small, so it never
      // rots (its numbers are not judged here), and scale-out on hosts made here, which exits 1 unless every
      // run's ledger proof holds.
      codes.push(await step('check-example', 'node', ['scripts/check-example.mjs', '--packs', packs]));
      codes.push(await step('bench --quick', 'timeout', ['600', 'node', 'apps/bench/dist/bench.js', '--quick']));
      codes.push(await step('scale --quick', 'timeout', ['900', 'node', 'apps/bench/dist/scale/scale.js', '--quick']));
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
