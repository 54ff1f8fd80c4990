// Reads the JSON reports vitest writes in CI (test-results*.json at the root, every tier) and fails when a suite
// that must run did not: a missing report, a package with no passed test, a failed test, or a skipped test in
// a database suite. A test may be skipped only when its title says which capability the adapter lacks
// ("[needs listenNotify] ...") and that adapter is known to lack it (MAY_SKIP): an adapter that lost an option
// it had (knexConfig, queryPlans) fails here instead of skipping quietly.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { readTestReports } from './test-tiers.mjs';

const root = new URL('..', import.meta.url).pathname;
const packages = ['packages', 'apps'].flatMap((dir) => readdirSync(join(root, dir)).map((name) => join(dir, name)));
const mustReport = packages.filter((p) => /^packages\/adapter-|^packages\/broker-|^packages\/core$|^apps\/cli$/.test(p));
/** Per adapter, the capabilities it lacks, and where only part of its suite lacks one, the runs that do. */
const MAY_SKIP = {
  // readOnlySwitch: no server to turn read-only under open connections (a read-only file is refused at open,
  // and its SQLITE_READONLY mapping is tested in sqlite-store.test.ts).
  'packages/adapter-sqlite': { listenNotify: /./, disposableServer: /./, throughProxy: /./, readOnlySwitch: /./ },
  'packages/adapter-postgres': { writeLock: /./ },
  // The conditional-update run is the fallback of a server without SKIP LOCKED: no batch claim there.
  'packages/adapter-mysql': { writeLock: /./, listenNotify: /./, batchClaim: /conditional-update claim/, skipLocked: /conditional-update claim/ },
};
const problems = [];
let passed = 0;
let failed = 0;
let skipped = 0;

const report = readTestReports(root);
if (!report) {
  console.error('check-test-reports: no test-results*.json (the tests did not run)');
  process.exit(1);
}
const ranIn = new Map(packages.map((pkg) => [pkg, 0]));
for (const suite of report.testResults) {
  /** The package a test file is in (packages/x or apps/x). */
  const pkg = suite.path.split('/').slice(0, 2).join('/');
  if (suite.status === 'failed' && (suite.assertionResults ?? []).length === 0) problems.push(`${pkg}: ${suite.name} failed to load: ${suite.message ?? ''}`);
  for (const test of suite.assertionResults ?? []) {
    if (test.status === 'passed') {
      passed++;
      ranIn.set(pkg, (ranIn.get(pkg) ?? 0) + 1);
    } else if (test.status === 'failed') {
      failed++;
      problems.push(`${pkg}: failed: ${test.fullName}`);
    } else {
      skipped++;
      if (pkg.startsWith('packages/adapter-')) {
        const need = /\[needs (\w+)\]/.exec(test.fullName)?.[1];
        const where = need === undefined ? undefined : MAY_SKIP[pkg]?.[need];
        if (!where?.test(test.fullName)) problems.push(`${pkg}: skipped in CI${need ? ` (it is not known to lack ${need})` : ''}: ${test.fullName}`);
      }
    }
  }
}
for (const [pkg, ran] of ranIn) {
  if (ran === 0 && mustReport.includes(pkg)) problems.push(`${pkg}: no test passed (its suite did not run)`);
  if (ran > 0) console.log(`${pkg}: ${ran} passed`);
}

console.log(`statusq: ${passed} passed, ${failed} failed, ${skipped} skipped`);
if (problems.length > 0) {
  for (const problem of problems) console.error(`check-test-reports: ${problem}`);
  process.exit(1);
}
