// Reads the JSON reports vitest writes in CI (test-results.json per package) and fails when a suite that
// must run did not: a missing report, a failed test, or a skipped test in a database suite. A test may be
// skipped only when its title says which capability the adapter lacks ("[needs listenNotify] ...") and that
// adapter is known to lack it (MAY_SKIP): an adapter that lost an option it had (knexConfig, queryPlans)
// fails here instead of skipping quietly.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

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

for (const pkg of packages) {
  const file = join(root, pkg, 'test-results.json');
  if (!existsSync(file)) {
    if (mustReport.includes(pkg)) problems.push(`${pkg}: no test report (its suite did not run)`);
    continue;
  }
  const report = JSON.parse(readFileSync(file, 'utf8'));
  let ran = 0;
  for (const suite of report.testResults ?? []) {
    if (suite.status === 'failed' && (suite.assertionResults ?? []).length === 0) problems.push(`${pkg}: ${suite.name} failed to load: ${suite.message ?? ''}`);
    for (const test of suite.assertionResults ?? []) {
      if (test.status === 'passed') {
        passed++;
        ran++;
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
  if (ran === 0 && mustReport.includes(pkg)) problems.push(`${pkg}: no test passed`);
  console.log(`${pkg}: ${ran} passed`);
}

console.log(`statusq: ${passed} passed, ${failed} failed, ${skipped} skipped`);
if (problems.length > 0) {
  for (const problem of problems) console.error(`check-test-reports: ${problem}`);
  process.exit(1);
}
