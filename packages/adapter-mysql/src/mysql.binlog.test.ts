/**
 * statusq on servers that write a binary log (issue 18, mysql-binlog.ts), each a private MariaDB started with
 * `--log-bin=<dir>/binlog`: binlog_format STATEMENT, where InnoDB refuses writes at READ COMMITTED (error
 * 1665), as root (statusq switches its sessions to ROW) and as an account with only the grants statusq needs on
 * its databases (the open refuses, or with binlogFallback=conditional-update runs the conditional-update claim
 * at REPEATABLE READ); and binlog_format MIXED, which needs nothing. The conformance groups those settings can
 * break run on each. The CLI's side (`statusq work` exits 1 at once, `statusq doctor`) is in the CLI's
 * cli.mysql-binlog.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { StoreError, Worker, initTable } from '@statusq/core';
import { runConformance, type ConformanceGroup } from '@statusq/conformance';
import { connect, type MysqlStore } from './index.js';
import { mysqlConformance } from './testing.js';
import { mysqlSuite } from './test/mysql-test-db.js';
import type { PrivateMariadb } from './test/private-mariadb.js';
import { privateServer } from './test/setting-servers.js';

const adapterModule = fileURLToPath(new URL('../dist/index.js', import.meta.url));
/** The groups a binary log setting can break: every write path, under contention, with leases and retries. */
const GROUPS: ConformanceGroup[] = ['state-machine', 'fencing', 'retries', 'leases', 'race'];
/** An account with what statusq needs on its databases (statusq_*) and nothing global: no SUPER, no BINLOG ADMIN. */
const ACCOUNT = { user: 'statusq_app', password: 'Binl0gPw' };
const PLAIN = `${ACCOUNT.user}:${ACCOUNT.password}`;
const SETUP = [
  `CREATE USER '${ACCOUNT.user}'@'%' IDENTIFIED BY '${ACCOUNT.password}'`,
  `GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP ON \`statusq\\_%\`.* TO '${ACCOUNT.user}'@'%'`,
];

/** A private server with a binary log in `format`, started before the describe block's tests and stopped after them. */
function serverLogging(format: 'STATEMENT' | 'MIXED'): () => PrivateMariadb {
  return privateServer({ serverArgs: (dir) => [`--log-bin=${dir}/binlog`, `--binlog-format=${format}`, '--server-id=1'], setup: SETUP });
}

/** A fresh database on `server`, and its URL for `account` (root, or user:password) with `query`. */
async function databaseOn(server: PrivateMariadb, account: string, query = ''): Promise<string> {
  const name = `statusq_${randomBytes(6).toString('hex')}`;
  await server.admin(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
  return `mysql://${account}@127.0.0.1:${server.port}/${name}${query ? `?${query}` : ''}`;
}

async function dropOn(server: PrivateMariadb, url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!/^statusq_[0-9a-f]+$/.test(name)) throw new Error(`refusing to drop ${name}: not a test database`);
  await server.admin(`DROP DATABASE IF EXISTS \`${name}\``);
}

/** The session settings of several pooled connections at once (concurrent statements force new connections). */
async function sessions(store: MysqlStore): Promise<Array<{ format: string; isolation: string; connection: number }>> {
  const results = await Promise.all(
    Array.from({ length: 6 }, () => store.execute({ sql: 'SELECT @@session.binlog_format AS format, @@session.tx_isolation AS isolation, CONNECTION_ID() AS connection, SLEEP(0.05) AS slept', params: [] })),
  );
  return results.map(({ rows }) => ({ format: String(rows[0]!.format), isolation: String(rows[0]!.isolation), connection: Number(rows[0]!.connection) }));
}

/** Drains `jobs` no-op jobs with one worker; resolves with how many it handled. */
async function drain(store: MysqlStore, jobs: number): Promise<number> {
  await initTable(store, 'jobs');
  for (let i = 0; i < jobs; i++) await store.execute({ sql: 'INSERT INTO jobs (date) VALUES (NOW(3))', params: [] });
  let handled = 0;
  const worker = await Worker.create({ store, table: { table: 'jobs' }, concurrency: 4, exitWhenEmpty: true, pollMinMs: 2, pollMaxMs: 20, handler: () => void handled++ });
  await worker.run();
  return handled;
}

/**
 * The binary log's writes to `database`.`table` since the server started: row events (Write_rows,
 * Update_rows, ...) and DML logged as statements (Query events; DDL is always a statement and not counted).
 */
async function binlogEvents(server: PrivateMariadb, database: string, table: string): Promise<{ rowEvents: number; statements: string[] }> {
  const logs = (await server.admin('SHOW BINARY LOGS')) as Array<{ Log_name: string }>;
  let rowEvents = 0;
  const statements: string[] = [];
  for (const { Log_name: log } of logs) {
    const events = (await server.admin(`SHOW BINLOG EVENTS IN '${log}'`)) as Array<{ Event_type: string; Info: string }>;
    let ours = false;
    for (const { Event_type: type, Info: info } of events) {
      // `table_id: 30 (statusq_ab12cd.jobs)`
      if (type === 'Table_map') ours = info.endsWith(`(${database}.${table})`);
      else if (/_rows/.test(type)) rowEvents += ours ? 1 : 0;
      else if (type === 'Query' && info.includes(database) && info.includes(table) && /\b(INSERT|UPDATE|DELETE)\b/i.test(info)) statements.push(info);
    }
  }
  return { rowEvents, statements };
}

mysqlSuite('mysql with a binary log', () => {
  describe('binlog_format STATEMENT', () => {
    const server = serverLogging('STATEMENT');

    describe('as root, who may switch its own sessions: every statusq session logs by ROW', () => {
      it('every pooled connection runs binlog_format ROW at READ COMMITTED and the native claim; the binary log holds row events for statusq, statements for everyone else; doctor passes', async () => {
        const url = await databaseOn(server(), 'root');
        const store = (await connect(url)) as MysqlStore;
        try {
          expect(store.settings).toMatchObject({ logBin: true, binlogFormat: 'STATEMENT' });
          expect(store.binlog).toEqual({ mode: 'session-row', isolation: 'read-committed', fallback: false });
          expect(store.claimStrategy).toBe('native');
          const seen = await sessions(store);
          expect(new Set(seen.map((s) => s.connection)).size).toBeGreaterThan(1);
          for (const s of seen) expect(s).toMatchObject({ format: 'ROW', isolation: 'READ-COMMITTED' });
          expect(await drain(store, 30)).toBe(30);
          // Another client of the server keeps the server's format.
          const database = new URL(url).pathname.slice(1);
          await server().admin(`UPDATE \`${database}\`.\`jobs\` SET payload = '{}' WHERE id = 1`);
          const events = await binlogEvents(server(), database, 'jobs');
          expect(events.rowEvents).toBeGreaterThan(30);
          expect(events.statements.filter((s) => s.includes("payload = '{}'"))).toHaveLength(1);
          expect(events.statements.filter((s) => !s.includes("payload = '{}'"))).toEqual([]);
          const binlog = (await store.inspection.serverChecks!()).find((check) => check.name === 'binlog');
          expect(binlog).toMatchObject({ name: 'binlog', status: 'pass', detail: expect.stringMatching(/STATEMENT on the server; statusq's sessions log by row/) });
        } finally {
          await store.close();
        }
      });

      runConformance({
        ...mysqlConformance,
        name: 'mysql, binlog_format STATEMENT, root: sessions switched to ROW',
        adapterModule,
        url: () => databaseOn(server(), 'root'),
        dropDatabase: (url) => dropOn(server(), url),
        groups: GROUPS,
        scale: 0.5,
      });
    });

    describe('as an account without SUPER or BINLOG ADMIN', () => {
      it('open refuses at once: StoreError Unsupported (not retryable) naming binlog_format, the account and the three fixes, with the failed binlog check', async () => {
        const url = await databaseOn(server(), PLAIN);
        const started = Date.now();
        const error = await connect(url).then(
          async (store) => {
            await store.close();
            return null;
          },
          (e: unknown) => e,
        );
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(error).toBeInstanceOf(StoreError);
        const refusal = error as StoreError;
        expect(refusal).toMatchObject({ kind: 'Unsupported', nativeCode: 'BINLOG_FORMAT', retryable: false });
        expect(refusal.message).toMatch(/binlog_format STATEMENT/);
        expect(refusal.message).toContain(`'${ACCOUNT.user}'@'%' may not switch its own sessions to ROW`);
        expect(refusal.message).toMatch(/1227 Access denied; you need \(at least one of\) the SUPER, BINLOG ADMIN privilege/);
        expect(refusal.message).toContain("SET GLOBAL binlog_format = 'ROW'");
        expect(refusal.message).toContain(`GRANT BINLOG ADMIN ON *.* TO '${ACCOUNT.user}'@'%'`);
        expect(refusal.message).toContain('binlogFallback=conditional-update');
        expect(refusal.check).toMatchObject({ name: 'binlog', status: 'fail', fix: expect.stringContaining("SET GLOBAL binlog_format = 'ROW'") });
        // Nothing was left open on the server.
        const open = (await server().admin('SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE USER = ?', [ACCOUNT.user])) as Array<{ n: number }>;
        expect(Number(open[0]!.n)).toBe(0);
      });

      it('with binlogFallback=conditional-update: every session at REPEATABLE READ, logging by statement, the conditional-update claim; doctor warns', async () => {
        const url = await databaseOn(server(), PLAIN, 'binlogFallback=conditional-update');
        const store = (await connect(url)) as MysqlStore;
        try {
          expect(store.binlog).toMatchObject({ mode: 'statement', isolation: 'repeatable-read', fallback: true, refusal: expect.stringMatching(/^1227 /) });
          expect(store.claimStrategy).toBe('conditional-update');
          expect(store.nativeClaim).toBeUndefined();
          expect(store.capabilities).toMatchObject({ batchClaim: false, skipLocked: false });
          for (const s of await sessions(store)) expect(s).toMatchObject({ format: 'STATEMENT', isolation: 'REPEATABLE-READ' });
          expect(await drain(store, 30)).toBe(30);
          const database = new URL(url).pathname.slice(1);
          const events = await binlogEvents(server(), database, 'jobs');
          expect(events.rowEvents).toBe(0);
          expect(events.statements.length).toBeGreaterThan(30);
          const binlog = (await store.inspection.serverChecks!()).find((check) => check.name === 'binlog');
          expect(binlog).toMatchObject({ name: 'binlog', status: 'warn', detail: expect.stringMatching(/REPEATABLE READ with the conditional-update claim/), fix: expect.stringContaining('BINLOG ADMIN') });
        } finally {
          await store.close();
        }
      });

      it('claimStrategy=conditional-update takes the fallback without being asked (it costs that claim nothing)', async () => {
        const store = (await connect(await databaseOn(server(), PLAIN, 'claimStrategy=conditional-update'))) as MysqlStore;
        try {
          expect(store.binlog).toMatchObject({ mode: 'statement', isolation: 'repeatable-read', fallback: true });
        } finally {
          await store.close();
        }
      });

      runConformance({
        ...mysqlConformance,
        name: 'mysql, binlog_format STATEMENT, no BINLOG ADMIN, binlogFallback=conditional-update',
        adapterModule,
        url: () => databaseOn(server(), PLAIN, 'binlogFallback=conditional-update'),
        createStore: async (url) => {
          const store = (await connect(url)) as MysqlStore;
          // Every store of these cases runs the fallback, or the cases would prove nothing about it.
          expect(store.binlog.fallback).toBe(true);
          return store;
        },
        dropDatabase: (url) => dropOn(server(), url),
        groups: GROUPS,
        scale: 0.5,
      });

      it('after every case above: the server logged no unsafe statement and refused no write', () => {
        const log = server().log();
        expect(log).not.toMatch(/Unsafe statement written to the binary log/);
        expect(log).not.toMatch(/impossible to write to binary log/);
      });
    });
  });

  describe('binlog_format MIXED: nothing to do (InnoDB logs READ COMMITTED writes by row)', () => {
    const server = serverLogging('MIXED');

    it('sessions keep MIXED at READ COMMITTED with the native claim; writes pass, as row events; doctor passes', async () => {
      const url = await databaseOn(server(), PLAIN);
      const store = (await connect(url)) as MysqlStore;
      try {
        expect(store.binlog).toEqual({ mode: 'mixed', isolation: 'read-committed', fallback: false });
        expect(store.claimStrategy).toBe('native');
        for (const s of await sessions(store)) expect(s).toMatchObject({ format: 'MIXED', isolation: 'READ-COMMITTED' });
        expect(await drain(store, 30)).toBe(30);
        const events = await binlogEvents(server(), new URL(url).pathname.slice(1), 'jobs');
        expect(events.rowEvents).toBeGreaterThan(30);
        const binlog = (await store.inspection.serverChecks!()).find((check) => check.name === 'binlog');
        expect(binlog).toMatchObject({ name: 'binlog', status: 'pass' });
      } finally {
        await store.close();
      }
    });

    runConformance({
      ...mysqlConformance,
      name: 'mysql, binlog_format MIXED, no BINLOG ADMIN',
      adapterModule,
      url: () => databaseOn(server(), PLAIN),
      dropDatabase: (url) => dropOn(server(), url),
      groups: ['state-machine', 'race'],
      scale: 0.5,
    });
  });
});
