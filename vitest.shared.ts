// Settings every package's vitest config shares. In CI each package also writes test-results.json, which
// scripts/check-test-reports.mjs reads to fail the run when a database suite was skipped.
import type { ViteUserConfig } from 'vitest/config';

export const sharedTestConfig: NonNullable<ViteUserConfig['test']> = {
  testTimeout: 60_000,
  hookTimeout: 60_000,
  reporters: process.env.CI ? ['default', ['json', { outputFile: 'test-results.json' }]] : ['default'],
};

/**
 * A package whose tests run real workers, child processes and real database servers: its files run one at
 * a time, so a 2-core machine shared with other database suites does not time itself out.
 */
export function databaseSuiteConfig(testTimeoutMs = 60_000): NonNullable<ViteUserConfig['test']> {
  return { ...sharedTestConfig, include: ['src/**/*.test.ts'], fileParallelism: false, testTimeout: testTimeoutMs, hookTimeout: 60_000 };
}
