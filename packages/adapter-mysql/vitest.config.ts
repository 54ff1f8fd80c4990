import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

// Real workers, child processes and a real MariaDB/MySQL server (STATUSQ_MYSQL_URL); one file at a time
// keeps a 2-core machine, shared with other database suites, from timing itself out.
export default defineConfig({
  test: {
    ...sharedTestConfig,
    include: ['src/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 60_000,
  },
});
