// One vitest run for the whole workspace, a project per test tier (scripts/test-tiers.mjs says which file is
// in which). The unit, conformance and browser files share one pool of STATUSQ_TEST_WORKERS (default 3), the
// longest first; the chaos files follow (pnpm test runs them two at a time: scripts/test.mjs).
import { readFileSync, readdirSync } from 'node:fs';
import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { TEST_FILES, TEST_FILE_GLOBS, TierUsageError, globToRegExp, testReportFile, tierFiles } from './scripts/test-tiers.mjs';

const root = import.meta.dirname;

/** Every test file some tier does not list: a file there would never run, so the config refuses to load. */
function unclassified(): string[] {
  const inTier = Object.values(TEST_FILES).flat().map((entry) => globToRegExp(entry.files));
  const candidates = TEST_FILE_GLOBS.map(globToRegExp);
  const files = ['packages', 'apps']
    .flatMap((dir) => readdirSync(`${root}/${dir}`, { recursive: true, encoding: 'utf8' }).map((path) => `${dir}/${path}`))
    .filter((path) => !path.includes('node_modules/') && !path.includes('/dist/'));
  return files.filter((path) => candidates.some((re) => re.test(path)) && !inTier.some((re) => re.test(path)));
}

/** Longest first (scripts/test-durations.json, written by scripts/test-timings.mjs), so no long file starts last. */
class LongestFirst extends BaseSequencer {
  private readonly durations: Record<string, number> = JSON.parse(readFileSync(`${root}/scripts/test-durations.json`, 'utf8'));
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const expected = (spec: TestSpecification) => this.durations[relative(root, spec.moduleId)] ?? 0;
    return [...files].sort((a, b) => expected(b) - expected(a));
  }
}

let projects;
let poolSize = 3;
try {
  // Files at once, on the CI machine's 2 cores. The files wait on servers and child processes about a fifth
  // of the time at two at once (vmstat), so a third fills the gaps: the unit, conformance and browser files
  // took 449 s at three and 543 s at two, alone on the machine (2026-12-05), with no case failing. When each CLI
  // command was a process of its own, three files at once took as long as two and timed cases missed their
  // deadlines (a race's settle deadlocking past its retries, leases reaped late).
  const asked = process.env.STATUSQ_TEST_WORKERS;
  if (asked) {
    if (!/^[1-9][0-9]?$/.test(asked)) throw new TierUsageError(`STATUSQ_TEST_WORKERS must be a whole number from 1 to 99, got ${JSON.stringify(asked)}`);
    poolSize = Number(asked);
  }
  const missing = unclassified();
  if (missing.length > 0) throw new TierUsageError(`test files in no tier (add them to scripts/test-tiers.mjs): ${missing.join(', ')}`);
  projects = (['unit', 'conformance', 'chaos', 'browser'] as const).map((tier) => ({
    extends: true as const,
    test: {
      name: tier,
      include: tierFiles(tier),
      testTimeout: tier === 'unit' ? 60_000 : 120_000,
      // The chaos files run once the others are done (pnpm test runs them in a vitest run of their own):
      // restarting a private RabbitMQ node or waiting out a lease is timed against a deadline, and a machine
      // full of races made those deadlines pass (4 of 9 broker cases failed with 4 files at once, when each
      // CLI command was a process). Among themselves they mostly wait on servers, so they share the pool.
      ...(tier === 'chaos' ? { sequence: { groupOrder: 1 } } : {}),
    },
  }));
} catch (error) {
  if (!(error instanceof TierUsageError)) throw error;
  console.error(`statusq tests: ${error.message}`);
  process.exit(2);
}

export default defineConfig({
  test: {
    projects,
    hookTimeout: 60_000,
    // In CI, scripts/check-test-reports.mjs reads the JSON report: a database suite that skipped fails the run.
    reporters: process.env.CI ? ['default', ['json', { outputFile: testReportFile() }]] : ['default'],
    passWithNoTests: true,
    maxWorkers: poolSize,
    sequence: { sequencer: LongestFirst },
  },
});
