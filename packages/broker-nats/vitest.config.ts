import { defineConfig } from 'vitest/config';
import { databaseSuiteConfig } from '../../vitest.shared.ts';

export default defineConfig({ test: databaseSuiteConfig(120_000) });
