// `pnpm test:timings`: where the last full run's time went. Reads what that run left (artifacts/ci-steps.json
// from .ci/run, artifacts/test-steps.json from scripts/test.mjs, test-results*.json from vitest in CI mode) and
// rewrites the timing table in CONTRIBUTING.md and scripts/test-durations.json, from which the root
// vitest.config.ts starts the longest files first. Run it after `bash .ci/run` (or `CI=true pnpm test`).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TEST_FILES, globToRegExp, readTestReports } from './test-tiers.mjs';

const root = new URL('..', import.meta.url).pathname;
const read = (path) => (existsSync(join(root, path)) ? JSON.parse(readFileSync(join(root, path), 'utf8')) : null);
const ci = read('artifacts/ci-steps.json');
const tests = read('artifacts/test-steps.json');
const report = readTestReports(root);
if (!report) {
  console.error('test-timings: run the suite first (bash .ci/run, or CI=true pnpm test): no test-results*.json');
  process.exit(1);
}

const tierOf = (path) => Object.entries(TEST_FILES).find(([, entries]) => entries.some((entry) => globToRegExp(entry.files).test(path)))?.[0] ?? '?';
const files = report.testResults
  .map((suite) => ({
    path: suite.path,
    seconds: Math.round((suite.endTime - suite.startTime) / 100) / 10,
    tests: (suite.assertionResults ?? []).filter((t) => t.status === 'passed').length,
  }))
  .map((file) => ({ ...file, tier: tierOf(file.path) }))
  .sort((a, b) => b.seconds - a.seconds);

const durations = Object.fromEntries([...files].sort((a, b) => a.path.localeCompare(b.path)).map((file) => [file.path, Math.round(file.seconds * 1000)]));
writeFileSync(join(root, 'scripts/test-durations.json'), `${JSON.stringify(durations, null, 2)}\n`);

const fmt = (seconds) => (seconds >= 90 ? `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s` : `${seconds} s`);
const lines = [];
lines.push(`Measured ${new Date(report.startTime ?? Date.now()).toISOString().slice(0, 10)} on the 2-core CI machine, Node ${process.versions.node}; regenerate with \`pnpm test:timings\` after a full run. The steps of \`pnpm test\` run side by side within each of its four phases (above), so they add up to more than the whole.`, '');
lines.push('| step | wall time |', '| --- | --- |');
for (const s of ci?.steps ?? []) lines.push(`| .ci/run: ${s.step} | ${fmt(s.seconds)} |`);
for (const s of tests?.steps ?? []) lines.push(`| pnpm test: ${s.step} | ${fmt(s.seconds)}${s.code === 0 ? '' : ` (failed, exit ${s.code})`} |`);
if (ci) lines.push(`| **.ci/run in all** | **${fmt(ci.total)}** |`);
else if (tests) lines.push(`| **pnpm test in all** | **${fmt(tests.total)}** |`);
lines.push('');
const tiers = [...new Set(files.map((f) => f.tier))];
lines.push('Each tier\'s files, added up (they run side by side, so the vitest step takes less than their sum):', '');
lines.push('| tier | files | tests passed | file time added up |', '| --- | --- | --- | --- |');
for (const tier of tiers) {
  const of = files.filter((f) => f.tier === tier);
  lines.push(`| ${tier} | ${of.length} | ${of.reduce((n, f) => n + f.tests, 0)} | ${fmt(Math.round(of.reduce((n, f) => n + f.seconds, 0)))} |`);
}
lines.push('', 'Every test file, longest first:', '', '| file | tier | tests | time |', '| --- | --- | --- | --- |');
for (const file of files) lines.push(`| \`${file.path}\` | ${file.tier} | ${file.tests} | ${fmt(file.seconds)} |`);

const contributing = join(root, 'CONTRIBUTING.md');
const text = readFileSync(contributing, 'utf8');
const begin = '<!-- timings:begin (pnpm test:timings writes this part) -->';
const end = '<!-- timings:end -->';
if (!text.includes(begin) || !text.includes(end)) {
  console.error(`test-timings: CONTRIBUTING.md has no ${begin} ... ${end} section`);
  process.exit(1);
}
writeFileSync(contributing, `${text.slice(0, text.indexOf(begin) + begin.length)}\n${lines.join('\n')}\n${text.slice(text.indexOf(end))}`);
console.log(`test-timings: ${files.length} files; CONTRIBUTING.md and scripts/test-durations.json rewritten`);
