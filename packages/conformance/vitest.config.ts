import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

// Unit tests of the suite's own helpers (the TCP proxy); the suite itself runs in each adapter's package.
export default defineConfig({ test: { ...sharedTestConfig, include: ['src/**/*.test.ts'] } });
