/**
 * The shared conformance suite on SQLite, as a project runs it (`runConformance(sqliteConformance)`), except
 * that the child processes import this checkout's build (dist/index.js): build first.
 */
import { fileURLToPath } from 'node:url';
import { runConformance } from '@statusq/conformance';
import { sqliteConformance } from './testing.js';

runConformance({ ...sqliteConformance, adapterModule: fileURLToPath(new URL('../dist/index.js', import.meta.url)) });
