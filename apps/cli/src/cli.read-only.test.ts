// `statusq work` and `statusq doctor` on a read-only PostgreSQL database, as an operator meets one: a replica
// or a failover in progress. The shared server's own settings are never changed: the test database gets
// `ALTER DATABASE ... SET default_transaction_read_only = on`, which only new sessions of that database take
// (the same 25006 a hot standby answers). Because a read-only refusal drops its connection, the worker's next
// check opens a new session, and so sees the setting reset: what reaching a new primary after a failover is.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, dropTestDatabase, postgresUnavailable, withClient } from '@statusq/adapter-postgres/testing';
import { launchCli, logLines, runCliInProcess, until, writeFixture } from './test/cli-harness.js';
import { checkOf, reportOf } from './test/cli-doctor-scenarios.js';

const unavailable = await postgresUnavailable();
let dir = '';
beforeAll(() => void (dir = mkdtempSync(join(tmpdir(), 'statusq-cli-read-only-'))));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const statusq = (...args: string[]) => runCliInProcess(dir, args);

async function readOnlyDatabase(readOnly: boolean, url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  await withClient(url, async (c) => {
    // This admin session is a new session of the database too: it lifts the default for itself first.
    await c.query('SET default_transaction_read_only = off');
    await c.query(readOnly ? `ALTER DATABASE "${name}" SET default_transaction_read_only = on` : `ALTER DATABASE "${name}" RESET default_transaction_read_only`);
  });
}

/** A database with `jobs` holding `count` pending jobs, then made read-only for new sessions. */
async function readOnlyQueue(count: number): Promise<string> {
  const url = await createTestDatabase('statusq_cli_ro');
  expect((await statusq('init', '--db', url)).code).toBe(0);
  for (let n = 0; n < count; n++) expect((await statusq('enqueue', '--db', url, '--payload', JSON.stringify({ n }))).code).toBe(0);
  await readOnlyDatabase(true, url);
  return url;
}

const describeOn = unavailable === null ? describe : describe.skip;
if (unavailable !== null && process.env.STATUSQ_REQUIRE_DATABASES === '1') it('PostgreSQL is reachable (STATUSQ_REQUIRE_DATABASES=1)', () => void expect.fail(unavailable));

describeOn(`statusq on a read-only PostgreSQL database${unavailable === null ? '' : ` [needs postgres] ${unavailable}`}`, () => {
  it('work: one warn line when it meets the read-only database, exit 1 after --read-only-wait with one clear line; the rows stay pending', async () => {
    const url = await readOnlyQueue(3);
    try {
      const handler = writeFixture(dir, 'noop.mjs', 'export default async () => {};\n');
      const started = Date.now();
      const run = await statusq('work', '--db', url, '--table', 'jobs', '--handler', handler, '--read-only-wait', '1500ms', '--exit-when-empty', '--log-format', 'json');
      const tookMs = Date.now() - started;
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toMatch(/^statusq: database error \(ReadOnly 25006\): the database is read-only and did not take writes again within 1\.5 s .*point the URL at the primary/);
      expect(run.stderr.split('\n')).toHaveLength(1);
      const lines = logLines(run.stdout);
      const waits = lines.filter((l) => l.msg.startsWith('database is read-only'));
      expect(waits).toHaveLength(1);
      expect(waits[0]!).toMatchObject({ level: 'warn', waitMs: 1500 });
      expect(waits[0]!.msg).toMatch(/^database is read-only \(a replica, or a failover in progress\): waiting up to 1\.5 s for it to take writes again/);
      // The refusals during the wait are not one line each.
      expect(lines.filter((l) => l.level === 'warn' || l.level === 'error').length).toBeLessThanOrEqual(3);
      expect(tookMs).toBeLessThan(15_000);
      await readOnlyDatabase(false, url);
      expect(JSON.parse((await statusq('stats', '--db', url, '--table', 'jobs', '--json')).stdout)).toMatchObject({ pending: 3, processing: 0, done: 0 });
    } finally {
      await dropTestDatabase(url);
    }
  });

  it('work: once the database takes writes again it says so in one line and finishes the queue (exit 0)', async () => {
    const url = await readOnlyQueue(3);
    try {
      const handler = writeFixture(dir, 'noop.mjs', 'export default async () => {};\n');
      const work = launchCli(dir, ['work', '--db', url, '--table', 'jobs', '--handler', handler, '--read-only-wait', '60s', '--exit-when-empty', '--log-format', 'json']);
      let stdout = '';
      work.child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      await until('the worker to log that the database is read-only', () => stdout.includes('database is read-only'), 30_000);
      await readOnlyDatabase(false, url);
      const run = await work.ended;
      expect(run.code, run.stderr).toBe(0);
      const lines = logLines(run.stdout);
      expect(lines.filter((l) => l.msg.startsWith('database is read-only'))).toHaveLength(1);
      const back = lines.filter((l) => l.msg.startsWith('database writable again after'));
      expect(back).toHaveLength(1);
      expect(back[0]!.msg).toMatch(/^database writable again after \d+\.\d s$/);
      expect(JSON.parse((await statusq('stats', '--db', url, '--table', 'jobs', '--json')).stdout)).toMatchObject({ pending: 0, processing: 0, done: 3 });
    } finally {
      await dropTestDatabase(url);
    }
  });

  it('doctor: the read_only check fails naming default_transaction_read_only (exit 1); the standby check passes on a primary', async () => {
    const url = await readOnlyQueue(0);
    try {
      const run = await statusq('doctor', '--db', url, '--race-jobs', '0', '--json');
      expect(run.code, run.stdout + run.stderr).toBe(1);
      const report = reportOf(run);
      expect(checkOf(report, 'standby')).toMatchObject({ status: 'pass' });
      expect(checkOf(report, 'read_only')).toMatchObject({ status: 'fail', detail: expect.stringMatching(/default_transaction_read_only is on/), fix: expect.stringMatching(/RESET default_transaction_read_only/) });
    } finally {
      await dropTestDatabase(url);
    }
  });
});
