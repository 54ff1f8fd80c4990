/**
 * The conformance suite's read-only cases on a private MariaDB (test/private-mariadb.ts; the shared server's
 * global settings are never touched): `SET GLOBAL read_only = ON` in the middle of a run, the way a failover
 * (orchestrator, MHA, a managed service's switchover) fences the old primary, and OFF again. The workers connect
 * as an account without READ_ONLY ADMIN (MariaDB 10.11 gives it to ALL ON *.* and root, which read_only does
 * not stop), as an application's account should. Both claims: the native one (SELECT ... FOR UPDATE SKIP
 * LOCKED, which read_only refuses too) and the conditional update (whose candidate SELECT it allows).
 */
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { runConformance } from '@statusq/conformance';
import { connect } from './index.js';
import { mysqlConformance } from './testing.js';
import { mysqlSuite } from './test/mysql-test-db.js';
import { startPrivateMariadb, type PrivateMariadb } from './test/private-mariadb.js';

const adapterModule = fileURLToPath(new URL('../dist/index.js', import.meta.url));
const ACCOUNT = 'statusq_app';

let server: Promise<PrivateMariadb> | null = null;
let databases = 0;
/** One private server for the file, started by the first test that needs it. */
const privateServer = () =>
  (server ??= startPrivateMariadb('', {
    // The application's account: every privilege on its own databases, none that lifts read_only.
    setup: [`CREATE USER '${ACCOUNT}'@'%'`, `GRANT ALL PRIVILEGES ON \`statusq\\_ro\\_%\`.* TO '${ACCOUNT}'@'%'`],
  }));

async function setReadOnly(s: PrivateMariadb, on: boolean): Promise<void> {
  await s.admin(`SET GLOBAL read_only = ${on ? 'ON' : 'OFF'}`);
}

mysqlSuite('mysql on a read-only server', () => {
  afterAll(async () => {
    await (await server)?.stop();
  });
  it("doctor's read_only check: fails while the server is read-only, naming the fix; passes once it is not", async () => {
    const s = await privateServer();
    const name = `statusq_ro_${++databases}`;
    await s.admin(`CREATE DATABASE ${name}`);
    try {
      const check = async () => {
        // The settings are read at open: a new store, as each `statusq doctor` run opens one.
        const store = await connect(`mysql://${ACCOUNT}@127.0.0.1:${s.port}/${name}`);
        try {
          return (await store.inspection.serverChecks!()).find((c) => c.name === 'read_only');
        } finally {
          await store.close();
        }
      };
      expect(await check()).toEqual({ name: 'read_only', status: 'pass', detail: 'read_only is OFF: the server takes writes' });
      await setReadOnly(s, true);
      expect(await check()).toMatchObject({ status: 'fail', detail: expect.stringMatching(/^read_only is ON: the server refuses writes \(error 1290\)/), fix: expect.stringMatching(/^point the URL at the primary/) });
    } finally {
      await setReadOnly(s, false);
      await s.admin(`DROP DATABASE IF EXISTS ${name}`);
    }
  });

  for (const strategy of ['native', 'conditional-update'] as const) {
    runConformance({
      ...mysqlConformance,
      name: `mysql read-only, ${strategy} claim`,
      adapterModule,
      groups: ['read-only'],
      url: async () => {
        const s = await privateServer();
        const name = `statusq_ro_${++databases}`;
        await s.admin(`CREATE DATABASE ${name} CHARACTER SET utf8mb4`);
        return `mysql://${ACCOUNT}@127.0.0.1:${s.port}/${name}?claimStrategy=${strategy}`;
      },
      dropDatabase: async (url) => {
        const s = await privateServer();
        await setReadOnly(s, false);
        await s.admin(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)}`);
      },
      // read_only is global and takes effect at once for every session, pooled ones included (measured on
      // MariaDB 10.11: the next statement of an open connection gets 1290).
      readOnlySwitch: () => ({
        on: async () => setReadOnly(await privateServer(), true),
        off: async () => setReadOnly(await privateServer(), false),
      }),
    });
  }
});
