/**
 * The conformance suite's read-only cases on a private PostgreSQL (test/private-postgres.ts; the shared
 * server's settings are never touched): `ALTER SYSTEM SET default_transaction_read_only = on` and a reload in
 * the middle of a run, the way a switchover fences the old primary before promoting the standby, and back off.
 * Every session, pooled ones included, applies a reload before its next statement, so the workers' next write
 * is refused with 25006, exactly as a hot standby refuses it (`cannot execute UPDATE in a read-only
 * transaction`). The suite skips without a server, as postgres.conformance.test.ts does.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { Queue, StoreError, Worker, initTable } from '@statusq/core';
import { PrivateServer, runConformance, waitFor } from '@statusq/conformance';
import { connect } from './index.js';
import { databasesRequired, postgresConformance, postgresUnavailable, withClient } from './testing.js';
import { startPrivatePostgres } from './test/private-postgres.js';
import type { DisposableServer } from '@statusq/conformance';

const adapterModule = fileURLToPath(new URL('../dist/index.js', import.meta.url));

let server: Promise<DisposableServer> | null = null;
let databases = 0;
const privateServer = () => (server ??= startPrivatePostgres());
/** The private server's URL for database `name`. */
const on = async (name: string) => {
  const url = new URL((await privateServer()).url);
  url.pathname = `/${name}`;
  return url.toString();
};

/**
 * Sets the server-wide default (or resets it) and waits until a new session sees it: by then the postmaster
 * has re-read its configuration and signalled every session, which each apply before their next statement.
 */
async function setReadOnly(readOnly: boolean): Promise<void> {
  const admin = await on('postgres');
  await withClient(admin, async (c) => {
    // The admin session itself must be able to write the setting back when the server is read-only.
    await c.query('SET default_transaction_read_only = off');
    await c.query(readOnly ? 'ALTER SYSTEM SET default_transaction_read_only = on' : 'ALTER SYSTEM RESET default_transaction_read_only');
    await c.query('SELECT pg_reload_conf()');
  });
  const want = readOnly ? 'on' : 'off';
  await waitFor(
    `a new session to see default_transaction_read_only = ${want}`,
    () => withClient(admin, async (c) => (await c.query<{ v: string }>('SELECT current_setting($1) AS v', ['default_transaction_read_only'])).rows[0]!.v === want),
    { timeoutMs: 10_000 },
  );
}

/** The newest installed PostgreSQL's bin directory, as test/private-postgres.ts finds it. */
function binDir(): string {
  if (process.env.STATUSQ_POSTGRES_BIN) return process.env.STATUSQ_POSTGRES_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'postgres'))) : [];
  return join(root, versions.sort((a, b) => Number(b) - Number(a))[0] ?? 'none', 'bin');
}

/**
 * A hot standby of the private server: pg_basebackup -R (streaming replication, standby.signal) into a
 * data directory of its own, started on another free port. initdb's default pg_hba.conf lets 127.0.0.1
 * replicate with trust. --checkpoint=fast: the default spread checkpoint made the backup wait past 30 s.
 */
async function startStandby(primaryPort: number): Promise<PrivateServer> {
  const bin = binDir();
  return PrivateServer.start({
    name: 'PostgreSQL standby',
    user: 'postgres',
    init: (dir) => ({ file: join(bin, 'pg_basebackup'), args: ['-D', join(dir, 'data'), '-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-R', '-X', 'stream', '--checkpoint=fast', '--no-sync'] }),
    run: (dir, port) => ({
      file: join(bin, 'postgres'),
      args: ['-D', join(dir, 'data'), '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off', '-c', 'shared_buffers=32MB', '-c', 'hot_standby=on'],
    }),
    stopSignal: 'SIGINT',
    ready: (port) =>
      withClient(`postgres://postgres@127.0.0.1:${port}/postgres`, (c) => c.query('SELECT 1'), 2000).then(
        () => true,
        () => false,
      ),
  });
}

const unavailable = await postgresUnavailable();
if (unavailable === null) {
  afterAll(async () => {
    await (await server)?.stop();
  });

  it('a hot standby: claims are refused as ReadOnly (25006), a worker ends with ReadOnly after its wait, doctor fails the standby check', async () => {
    const name = `statusq_ro_${++databases}`;
    const primaryUrl = await on(name);
    await withClient(await on('postgres'), (c) => c.query(`CREATE DATABASE ${name}`));
    const primary = await connect(primaryUrl);
    const standby = await startStandby(Number(new URL(primaryUrl).port));
    const url = new URL(primaryUrl);
    url.port = String(standby.port);
    const replica = await connect(url.toString());
    try {
      await initTable(primary, 'jobs');
      await (await Queue.open(primary, { table: 'jobs' })).enqueue([{ n: 1 }, { n: 2 }]);
      await waitFor('the standby to replay the enqueue', async () => {
        try {
          return (await replica.execute({ sql: 'SELECT count(*)::int AS n FROM jobs', params: [] })).rows[0]!.n === 2;
        } catch {
          return false;
        }
      }, { timeoutMs: 20_000 });
      const queue = await Queue.open(replica, { table: 'jobs' });
      for (const strategy of ['native', 'conditional-update'] as const) {
        const refused = await queue.claim({ limit: 2, token: 't' }, strategy).then(
          () => null,
          (e: unknown) => e,
        );
        expect(refused, strategy).toBeInstanceOf(StoreError);
        expect(refused, strategy).toMatchObject({ kind: 'ReadOnly', nativeCode: '25006' });
        expect((refused as StoreError).message, strategy).toMatch(/read-only transaction/);
      }
      const worker = await Worker.create({ store: replica, table: { table: 'jobs' }, handler: () => undefined, readOnlyWaitMs: 300, pollMaxMs: 20 });
      await expect(worker.run()).rejects.toMatchObject({ kind: 'ReadOnly', nativeCode: '25006' });
      const checks = await replica.inspection.serverChecks!();
      expect(checks).toEqual([expect.objectContaining({ name: 'standby', status: 'fail', fix: expect.stringMatching(/^point the URL at the primary/) })]);
      expect((await primary.inspection.serverChecks!()).map((c) => `${c.name} ${c.status}`)).toEqual(['standby pass', 'read_only pass', 'notify pass']);
      expect(await (await Queue.open(primary, { table: 'jobs' })).counts()).toMatchObject({ pending: 2, processing: 0 });
    } finally {
      await replica.close();
      await primary.close();
      await standby.stop();
    }
  });

  runConformance({
    ...postgresConformance,
    name: 'postgres read-only',
    adapterModule,
    groups: ['read-only'],
    url: async () => {
      const name = `statusq_ro_${++databases}`;
      await withClient(await on('postgres'), (c) => c.query(`CREATE DATABASE ${name}`));
      return on(name);
    },
    dropDatabase: async (url) => {
      await setReadOnly(false);
      await withClient(await on('postgres'), (c) => c.query(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)} WITH (FORCE)`));
    },
    readOnlySwitch: () => ({ on: () => setReadOnly(true), off: () => setReadOnly(false) }),
  });
} else if (databasesRequired()) {
  it('PostgreSQL server is reachable (STATUSQ_REQUIRE_DATABASES=1)', () => {
    throw new Error(unavailable);
  });
} else {
  it.skip(`[needs postgres] read-only cases: ${unavailable}`, () => undefined);
}
