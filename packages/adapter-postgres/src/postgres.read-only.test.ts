/**
 * The conformance suite's read-only cases on a private PostgreSQL (test/private-postgres.ts; the shared
 * server's settings are never touched): `ALTER SYSTEM SET default_transaction_read_only = on` and a reload in
 * the middle of a run, the way a switchover fences the old primary before promoting the standby, and back off.
 * Every session, pooled ones included, applies a reload before its next statement, so the workers' next write
 * is refused with 25006, exactly as a hot standby refuses it (`cannot execute UPDATE in a read-only
 * transaction`). The suite skips without a server, as postgres.conformance.test.ts does.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, it } from 'vitest';
import { runConformance, waitFor } from '@statusq/conformance';
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

const unavailable = await postgresUnavailable();
if (unavailable === null) {
  afterAll(async () => {
    await (await server)?.stop();
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
