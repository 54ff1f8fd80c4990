import { defineConfig } from 'vitest/config';
import { sharedTestConfig } from '../../vitest.shared.ts';

// Unit tests of the bench's own logic (the scale runs' ledger proof): no database, no hosts.
export default defineConfig({ test: { ...sharedTestConfig, include: ['src/**/*.test.ts'] } });
