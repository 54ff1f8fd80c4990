import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

// Unit tests of the harness's own logic (the scale runs' exactly-once proof); the runs themselves are `pnpm scale`.
export default defineConfig({ test: { ...sharedTestConfig, include: ['src/**/*.test.ts'] } });
