import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

// Pure unit tests of core: no database, no driver.
export default defineConfig({ test: { ...sharedTestConfig, include: ['src/**/*.test.ts'] } });
