/**
 * The shared conformance suite on SQLite, as a project runs it (`runConformance(sqliteConformance)`), except
 * that the child processes import this checkout's build (dist/index.js): build first. The fault groups run in
 * the chaos tier (sqlite.faults.test.ts).
 */
import { fileURLToPath } from 'node:url';
import { NO_FAULT_GROUPS, runConformance } from '@statusq/conformance';
import { sqliteConformance } from './testing.js';

runConformance({ ...sqliteConformance, adapterModule: fileURLToPath(new URL('../dist/index.js', import.meta.url)), groups: NO_FAULT_GROUPS });
