/**
 * Production server settings (issue 18, point 3) that a server applies to every session and statusq's sessions
 * set back for themselves, each on a private MariaDB started with that setting (never the shared server): a
 * lock wait timeout of 1 s, autocommit turned off for the application's account, and group_concat_max_len at
 * its minimum, which would cut the claim's id list short. A session left with the server's value passes a quick
 * check and fails under load (a lock wait past 1 s, a race that never commits, a large claim cut short), so
 * the cases read what statusq's sessions run with, claim there, and run the conformance race. The settings
 * statusq works within instead are in mysql.server-settings.test.ts. Within this file the servers start one
 * after another (each describe's beforeAll), since the machine has 2 cores.
 */
import { describe, expect, it } from 'vitest';
import mysql from 'mysql2/promise';
import { Queue, initTable } from '@statusq/core';
import { connect, optionsFromUrl, type MysqlStore } from './index.js';
import { mysqlSuite } from './test/mysql-test-db.js';
import { conformanceOn, dropFresh, freshDatabase, privateServer } from './test/setting-servers.js';

mysqlSuite('mysql on production server settings (private MariaDB per setting)', () => {
  describe('innodb_lock_wait_timeout = 1 on the server', () => {
    const server = privateServer({ serverArgs: ['--innodb-lock-wait-timeout=1'] });

    it("every pooled connection runs with statusq's own lock wait timeout, not the server's 1 s", async () => {
      const s = server();
      expect((await s.admin('SELECT @@global.innodb_lock_wait_timeout AS t')) as unknown[]).toEqual([{ t: 1 }]);
      const url = await freshDatabase(s);
      const store = await connect(url);
      const custom = await connect(`${url}?lockWaitTimeout=7`);
      try {
        // Several at once force several pooled connections.
        const sql = { sql: 'SELECT @@session.innodb_lock_wait_timeout AS t, CONNECTION_ID() AS cid, SLEEP(0.05) AS s', params: [] };
        for (const [st, want] of [[store, 10], [custom, 7]] as const) {
          const rows = (await Promise.all(Array.from({ length: 6 }, () => st.execute(sql)))).map((r) => r.rows[0]!);
          expect(new Set(rows.map((r) => r.cid)).size).toBeGreaterThan(1);
          for (const r of rows) expect(Number(r.t)).toBe(want);
        }
        // Connections opened after the server dropped every one get the same set-up.
        const sessions = (await s.admin('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ?', [optionsFromUrl(url).database])) as Array<{ id: number }>;
        expect(sessions.length).toBeGreaterThan(1);
        for (const { id } of sessions) await s.admin(`KILL CONNECTION ${Number(id)}`).catch(() => undefined);
        // The first call on a killed pooled connection meets ConnectionLost (the store drops it); once more takes a fresh one.
        const again = await Promise.all(Array.from({ length: 3 }, () => store.execute(sql).catch(() => store.execute(sql))));
        for (const r of again) expect(Number(r.rows[0]!.t)).toBe(10);
        expect(await store.inspection.serverChecks!()).toContainEqual({ name: 'innodb_lock_wait_timeout', status: 'pass', detail: "server default 1 s; statusq's sessions use 10 s (lockWaitTimeoutSeconds)" });
      } finally {
        await store.close();
        await custom.close();
        await dropFresh(s, url);
      }
    });

    it("a settle waiting on another session's row lock waits statusq's timeout (2 s here), not the server's 1 s, then fails as WriteConflict", async () => {
      const s = server();
      const url = await freshDatabase(s);
      const store = (await connect(`${url}?lockWaitTimeout=2`)) as MysqlStore;
      const { host, port, database } = optionsFromUrl(url);
      const holder = await mysql.createConnection({ host, port, user: 'root', database });
      try {
        await initTable(store, 'jobs');
        const queue = await Queue.open(store, { table: 'jobs' });
        const [id] = await queue.enqueue([{ a: 1 }]);
        await holder.query('START TRANSACTION');
        await holder.query('SELECT id FROM jobs WHERE id = ? FOR UPDATE', [id]);
        const started = performance.now();
        const error = await store.execute({ sql: 'UPDATE jobs SET status = 9 WHERE id = ? AND status IS NULL', params: [id as number] }).then(() => null, (e: unknown) => e);
        const waitedMs = performance.now() - started;
        console.info(`[innodb_lock_wait_timeout=1] statusq's session (2 s) waited ${Math.round(waitedMs)} ms`);
        expect(error).toMatchObject({ kind: 'WriteConflict', nativeCode: 1205 });
        expect(waitedMs).toBeGreaterThan(1900);
        expect(store.stats.lockWaitTimeouts).toBe(1);
      } finally {
        await holder.end();
        await store.close();
        await dropFresh(s, url);
      }
    });

    conformanceOn(server, 'mysql, innodb_lock_wait_timeout=1', ['race', 'state-machine']);
  });

  describe("autocommit = 0 for the application's account (init_connect)", () => {
    // init_connect runs for accounts without SUPER (or CONNECTION ADMIN) only: the app account, granted its databases only.
    const server = privateServer({
      serverArgs: ['--init-connect=SET autocommit=0'],
      setup: ["CREATE USER 'app'@'%'", "GRANT ALL ON `statusq\\_%`.* TO 'app'@'%'"],
      account: 'app',
    });

    it("statusq's sessions run with autocommit on although the server turns it off for the account", async () => {
      const s = server();
      const url = await freshDatabase(s);
      // The server really does turn it off for this account: a plain mysql2 session sees autocommit 0.
      const { host, port, user, database } = optionsFromUrl(url);
      const plain = await mysql.createConnection({ host, port, user, database });
      try {
        const [rows] = await plain.query('SELECT @@autocommit AS a');
        expect(rows).toEqual([{ a: 0 }]);
      } finally {
        await plain.end();
      }
      const store = (await connect(url)) as MysqlStore;
      try {
        expect(store.settings.autocommit).toBe(true);
        const sql = { sql: 'SELECT @@autocommit AS a, CONNECTION_ID() AS cid, SLEEP(0.05) AS s', params: [] };
        const rows = (await Promise.all(Array.from({ length: 6 }, () => store.execute(sql)))).map((r) => r.rows[0]!);
        expect(new Set(rows.map((r) => r.cid)).size).toBeGreaterThan(1);
        for (const r of rows) expect(Number(r.a)).toBe(1);
        expect(await store.inspection.serverChecks!()).toContainEqual({
          name: 'autocommit',
          status: 'pass',
          detail: 'the server turns autocommit off (init_connect = "SET autocommit=0"); statusq turns it back on in each of its own sessions',
        });
      } finally {
        await store.close();
        await dropFresh(s, url);
      }
    });

    conformanceOn(server, 'mysql, autocommit=0 by init_connect', ['race', 'state-machine']);
  });
  describe("group_concat_max_len = 4, MariaDB's minimum (it cuts JSON_ARRAYAGG short)", () => {
    const server = privateServer({ serverArgs: ['--group-concat-max-len=4'] });

    it("the one-packet claim of 1,000 rows with 16-digit ids claims exactly those rows: statusq's sessions raise the limit for themselves", async () => {
      const url = await freshDatabase(server());
      const store = (await connect(url)) as MysqlStore;
      try {
        await initTable(store, 'jobs');
        const queue = await Queue.open(store, { table: 'jobs' });
        await queue.enqueue(Array.from({ length: 1000 }, (_, i) => ({ i })));
        await store.execute({ sql: 'UPDATE jobs SET id = id + ?', params: [1e15] });
        expect(Number((await store.execute({ sql: 'SELECT @@global.group_concat_max_len AS v', params: [] })).rows[0]!.v)).toBe(4);
        const { rows } = await queue.claim({ limit: 1000, token: 'all' });
        const { rows: table } = await store.execute({ sql: 'SELECT id, status, worker_id FROM jobs ORDER BY id', params: [] });
        expect(rows).toHaveLength(1000);
        expect(new Set(rows.map((row) => String(row.id)))).toEqual(new Set(table.map((row) => String(row.id))));
        expect(table.every((row) => Number(row.status) === 9 && row.worker_id === 'all')).toBe(true);
        expect(store.pipelineRefusal).toBeNull();
      } finally {
        await store.close();
        await dropFresh(server(), url);
      }
    });
  });
});
