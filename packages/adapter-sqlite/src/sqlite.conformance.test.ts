/**
 * The shared conformance suite on SQLite: every test gets its own database file in a fresh temp directory
 * (removed afterwards, with its -wal and -shm files). Child processes import the built adapter
 * (dist/index.js), so build first: `npx tsc -p .` here and in packages/conformance.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runConformance } from '@statusq/conformance';
import { connect } from './index.js';
import { sqliteFixtures, sqliteQueryPlans } from './testing.js';

const fileOf = (url: string) => url.slice('sqlite:'.length);

runConformance({
  name: 'sqlite',
  adapterModule: fileURLToPath(new URL('../dist/index.js', import.meta.url)),
  url: () => `sqlite:${join(mkdtempSync(join(tmpdir(), 'statusq-sqlite-')), 'test.db')}`,
  createStore: (url) => connect(url),
  fixtures: sqliteFixtures,
  queryPlans: sqliteQueryPlans,
  enforcesTextLength: false,
  writeLock: {
    // Gives up on another process's write lock after 20 ms: the Busy test needs to meet SQLITE_BUSY quickly.
    createImpatientStore: (url) => connect(url, { busyTimeoutMs: 20 }),
    take: ['BEGIN IMMEDIATE'],
    release: ['COMMIT'],
    nativeCode: /^SQLITE_BUSY/,
  },
  dropDatabase: (url) => rmSync(dirname(fileOf(url)), { recursive: true, force: true }),
});
