// Settings every package's vitest config shares. In CI each package also writes test-results.json, which
// scripts/check-test-reports.mjs reads to fail the run when a database suite was skipped.
import type { ViteUserConfig } from 'vitest/config';

export const sharedTestConfig: NonNullable<ViteUserConfig['test']> = {
  testTimeout: 60_000,
  hookTimeout: 60_000,
  reporters: process.env.CI ? ['default', ['json', { outputFile: 'test-results.json' }]] : ['default'],
};
