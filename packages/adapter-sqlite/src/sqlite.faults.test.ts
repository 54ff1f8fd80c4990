/**
 * The conformance suite's fault groups on SQLite. Most need a server to restart, a network to freeze or a
 * server to turn read-only, none of which an SQLite file has, and skip by capability; what an SQLite worker
 * can meet (the database failing under an exitWhenEmpty worker) runs here.
 */
import { fileURLToPath } from 'node:url';
import { FAULT_GROUPS, runConformance } from '@statusq/conformance';
import { sqliteConformance } from './testing.js';

runConformance({ ...sqliteConformance, adapterModule: fileURLToPath(new URL('../dist/index.js', import.meta.url)), groups: FAULT_GROUPS });
