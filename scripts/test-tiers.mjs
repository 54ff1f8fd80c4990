// The test tiers: which tier every test file of the workspace belongs to, and which database dialects it
// runs on. The root vitest.config.ts makes one vitest project of each tier from this table, scripts/test.mjs
// runs them (`pnpm test`, `pnpm test:unit`, ...), and a test file that is in no tier fails the run, so none is
// dropped quietly. CONTRIBUTING.md says what each tier needs.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** The tiers, cheapest first. `system` is not vitest: it runs scripts over the packed packages and the apps. */
export const TIERS = ['unit', 'conformance', 'chaos', 'browser', 'system'];

/** The database dialects a file can run on; STATUSQ_DIALECTS names some of them (comma-separated). */
export const DIALECTS = ['sqlite', 'postgres', 'mysql'];

/**
 * Every vitest file, by tier. `dialects`: the servers (or SQLite) it runs on; a file with none runs whatever
 * STATUSQ_DIALECTS says. A file that runs on several checks `dialectSelected()` for each part.
 */
export const TEST_FILES = {
  // No server, no child process, no network: core against its in-memory store, pure functions of the
  // adapters, SQLite files in a temp directory, the CLI's report rendering and the dashboard served in process.
  unit: [
    { files: 'packages/core/src/**/*.test.ts' },
    { files: 'packages/adapter-mysql/src/mysql.unit.test.ts' },
    { files: 'packages/adapter-postgres/src/postgres-types.test.ts' },
    { files: 'packages/adapter-sqlite/src/sqlite-store.test.ts' },
    { files: 'apps/bench/src/report.test.ts' },
    { files: 'apps/bench/src/scale/ledger-check*.test.ts' },
    { files: 'apps/cli/src/dashboard/*.test.ts' },
    { files: 'apps/cli/src/metrics.test.ts' },
    { files: 'apps/demo/src/*.test.ts' },
  ],
  // Real databases and brokers, nothing broken on purpose: the shared conformance suite (both MySQL claim
  // strategies), each adapter's own server cases, the CLI as a user runs it on each dialect, the brokers.
  conformance: [
    { files: 'packages/adapter-sqlite/src/sqlite.conformance.test.ts', dialects: ['sqlite'] },
    { files: 'packages/adapter-sqlite/src/sqlite-beside.conformance.test.ts', dialects: ['sqlite'] },
    { files: 'packages/adapter-sqlite/src/sqlite-wake-ups.test.ts', dialects: ['sqlite'] },
    { files: 'packages/adapter-postgres/src/postgres.conformance.test.ts', dialects: ['postgres'] },
    { files: 'packages/adapter-postgres/src/postgres-beside.conformance.test.ts', dialects: ['postgres'] },
    { files: 'packages/adapter-postgres/src/postgres.test.ts', dialects: ['postgres'] },
    { files: 'packages/adapter-postgres/src/postgres.statements.test.ts', dialects: ['postgres'] },
    { files: 'packages/adapter-postgres/src/postgres-caller-transaction.test.ts', dialects: ['postgres'] },
    { files: 'packages/adapter-mysql/src/mysql.conformance.test.ts', dialects: ['mysql'] },
    { files: 'packages/adapter-mysql/src/mysql-fallback.conformance.test.ts', dialects: ['mysql'] },
    { files: 'packages/adapter-mysql/src/mysql-beside.conformance.test.ts', dialects: ['mysql'] },
    { files: 'packages/adapter-mysql/src/mysql.server*.test.ts', dialects: ['mysql'] },
    { files: 'packages/adapter-mysql/src/mysql.idle-probe.test.ts', dialects: ['mysql'] },
    { files: 'packages/adapter-mysql/src/mysql.binlog.test.ts', dialects: ['mysql'] },
    { files: 'packages/broker-nats/src/nats.test.ts' },
    { files: 'packages/broker-nats/src/nats.connect.test.ts' },
    { files: 'packages/broker-rabbitmq/src/rabbitmq.test.ts' },
    { files: 'apps/cli/src/cli.test.ts', dialects: ['sqlite'] },
    { files: 'apps/cli/src/cli.operations.test.ts', dialects: ['sqlite'] },
    { files: 'apps/cli/src/cli.processes.test.ts', dialects: ['sqlite'] },
    { files: 'apps/cli/src/cli.mysql.test.ts', dialects: ['mysql'] },
    { files: 'apps/cli/src/cli.mysql-operations.test.ts', dialects: ['mysql'] },
    { files: 'apps/cli/src/cli.mysql-binlog.test.ts', dialects: ['mysql'] },
    { files: 'apps/cli/src/cli.postgres.test.ts', dialects: ['postgres'] },
    { files: 'apps/cli/src/cli.postgres-operations.test.ts', dialects: ['postgres'] },
    { files: 'apps/cli/src/cli.broker.test.ts', dialects: ['mysql', 'postgres'] },
    { files: 'apps/cli/src/cli.doctor-servers.test.ts', dialects: ['mysql', 'postgres'] },
  ],
  // Faults on purpose: private servers restarted, killed, frozen or turned read-only, TCP proxies, PgBouncer,
  // Galera, hosts in network namespaces, and the broker path's conformance (its brokers restarted and killed).
  chaos: [
    { files: 'packages/adapter-sqlite/src/sqlite.faults.test.ts', dialects: ['sqlite'] },
    { files: 'packages/adapter-postgres/src/postgres.faults.test.ts', dialects: ['postgres'] },
    { files: 'packages/adapter-postgres/src/postgres.read-only.test.ts', dialects: ['postgres'] },
    { files: 'packages/adapter-postgres/src/postgres.pgbouncer.test.ts', dialects: ['postgres'] },
    { files: 'packages/adapter-mysql/src/mysql.faults.test.ts', dialects: ['mysql'] },
    { files: 'packages/adapter-mysql/src/mysql.read-only.test.ts', dialects: ['mysql'] },
    { files: 'packages/adapter-mysql/src/mysql.galera.test.ts', dialects: ['mysql'] },
    { files: 'packages/broker-*/src/*.restart.test.ts' },
    { files: 'packages/broker-*/src/*.conformance.test.ts', dialects: ['mysql', 'postgres'] },
    { files: 'test-fixtures/src/tcp-proxy.test.ts' },
    { files: 'apps/cli/src/cli.read-only.test.ts', dialects: ['postgres'] },
    { files: 'apps/cli/src/cli.pgbouncer.test.ts', dialects: ['postgres'] },
    { files: 'apps/bench/src/scale/topology.test.ts' },
  ],
  // The dashboard in Debian's Chromium.
  browser: [{ files: 'apps/cli/src/dashboard.browser.test.ts', dialects: ['sqlite'] }],
};

/** Where test files live: every one of them must be in a tier above. */
export const TEST_FILE_GLOBS = ['packages/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts'];

/** A bad STATUSQ_DIALECTS or tier name: the message names what is known; the caller exits 2. */
export class TierUsageError extends Error {}

/** The dialects STATUSQ_DIALECTS selects (every one when it is unset or empty). */
export function selectedDialects(value = process.env.STATUSQ_DIALECTS) {
  const names = (value ?? '').split(',').map((name) => name.trim().toLowerCase()).filter(Boolean);
  if (names.length === 0) return [...DIALECTS];
  const unknown = names.filter((name) => !DIALECTS.includes(name));
  if (unknown.length > 0) throw new TierUsageError(`STATUSQ_DIALECTS names ${unknown.map((n) => `"${n}"`).join(', ')}: the dialects are ${DIALECTS.join(', ')}`);
  return DIALECTS.filter((dialect) => names.includes(dialect));
}

/** Whether a test file (or a part of one) that runs on `dialect` runs under the current STATUSQ_DIALECTS. */
export function dialectSelected(dialect) {
  return selectedDialects().includes(dialect);
}

/** The include globs of `tier` under the current STATUSQ_DIALECTS. */
export function tierFiles(tier, dialects = selectedDialects()) {
  return (TEST_FILES[tier] ?? []).filter((entry) => !entry.dialects || entry.dialects.length === 0 || entry.dialects.some((d) => dialects.includes(d))).map((entry) => entry.files);
}

// A RegExp for a path glob of this table: `*` matches within one folder, `**/` any number of folders.
export function globToRegExp(glob) {
  const source = glob
    .split(/(\*\*\/|\*)/)
    .map((part) => (part === '**/' ? '(?:.*/)?' : part === '*' ? '[^/]*' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${source}$`);
}

/**
 * Where vitest writes its JSON report in CI: `test-results.json` at the root, or `test-results.<name>.json`
 * when `pnpm test` runs the tiers in more than one vitest run (STATUSQ_TEST_REPORT names it).
 */
export function testReportFile(name = process.env.STATUSQ_TEST_REPORT) {
  return name ? `test-results.${name}.json` : 'test-results.json';
}

/**
 * Every JSON report the last run left at `root` (one per vitest run), as one: the earliest start and every
 * file's results, each file named by its path from packages/ or apps/ on, wherever the checkout that ran it
 * was. Null when there is none.
 */
export function readTestReports(root) {
  const reports = readdirSync(root)
    .filter((name) => /^test-results(\.[\w-]+)?\.json$/.test(name))
    .map((name) => JSON.parse(readFileSync(join(root, name), 'utf8')));
  if (reports.length === 0) return null;
  return {
    startTime: Math.min(...reports.map((report) => report.startTime ?? Date.now())),
    testResults: reports.flatMap((report) => report.testResults ?? []).map((suite) => ({ ...suite, path: suite.name.slice(suite.name.search(/(?:^|\/)(?:packages|apps)\//) + 1) })),
  };
}
