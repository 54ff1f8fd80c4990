/**
 * The store behind a real PgBouncer in transaction mode (a private one per file, in front of the shared
 * server, see pgbouncer-spec.ts): a LISTEN through it is lost, which the store's probe finds (a warning, then
 * polling; the doctor's check says the same), while a listenUrl straight to the server brings wake-ups
 * back; claims through it stay exactly-once. Each test runs in its own database; a missing server or
 * PgBouncer skips the file (fails with STATUSQ_REQUIRE_DATABASES=1).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, Queue, Worker, initTable, type Store } from '@statusq/core';
import type { ServerCheck, StoreWarning } from '@statusq/core/adapter';
import { Ledger, PrivateServer, deferred, waitFor, withDeadline } from '@statusq/conformance';
import { connect, type PostgresStore, type PostgresStoreOptions } from './index.js';
import { NOTIFY_PROBE_TIMEOUT_MS } from './postgres-listener.js';
import { adminUrl, createTestDatabase, databasesRequired, dropTestDatabase, pgBouncerBackend, pgBouncerSpec, pgBouncerUnavailable, postgresUnavailable, throughPgBouncer } from './testing.js';

const unavailable = (await postgresUnavailable()) ?? pgBouncerUnavailable();

let bouncer: PrivateServer | null = null;
/** The test's database, straight to the server and through PgBouncer. */
let direct: string;
let pooled: string;
const opened: Store[] = [];
const running: Worker[] = [];

async function store(url: string, options: Omit<PostgresStoreOptions, 'connectionString'> = {}): Promise<PostgresStore> {
  const s = await connect(url, options);
  opened.push(s);
  return s;
}

/** A store whose warnings are collected instead of going to process.emitWarning. */
async function watchedStore(url: string, options: Omit<PostgresStoreOptions, 'connectionString'> = {}): Promise<{ store: PostgresStore; warnings: StoreWarning[] }> {
  const warnings: StoreWarning[] = [];
  return { store: await store(url, { ...options, onWarning: (w) => warnings.push(w) }), warnings };
}

const notifyCheck = async (s: Store): Promise<ServerCheck | undefined> => (await s.inspection!.serverChecks!()).find((c) => c.name === 'notify');

it('listenUrl is checked as the URL is, before any connection opens; with listen: false it is refused', async () => {
  await expect(connect('postgres://u@127.0.0.1:1/db', { listenUrl: 'mysql://u@h/db' })).rejects.toThrow(/^listenUrl \(--listen-db\): not a PostgreSQL URL: "mysql:\/\/u@h\/db"/);
  await expect(connect('postgres://u@127.0.0.1:1/db', { listenUrl: 'postgres://u@h:99999/db' })).rejects.toThrow(/^listenUrl \(--listen-db\): invalid port "99999"/);
  await expect(connect('postgres://u@127.0.0.1:1/db', { listenUrl: 'postgres://u@127.0.0.1:1/db', listen: false })).rejects.toBeInstanceOf(ConfigError);
  await expect(connect('postgres://u@127.0.0.1:1/db', { listenUrl: '' })).rejects.toThrow(/listenUrl/);
});

if (unavailable !== null) {
  if (databasesRequired()) {
    it('PostgreSQL and PgBouncer are there (STATUSQ_REQUIRE_DATABASES=1)', () => {
      throw new Error(unavailable);
    });
  } else {
    it.skip(`[needs pgbouncer] PostgreSQL behind PgBouncer: ${unavailable}`, () => undefined);
  }
} else {
  describe('PostgreSQL behind PgBouncer (pool_mode = transaction)', () => {
    beforeAll(async () => {
      bouncer = await PrivateServer.start(pgBouncerSpec(pgBouncerBackend(adminUrl())));
    });
    afterAll(async () => {
      await bouncer?.stop();
    });
    beforeEach(async () => {
      direct = await createTestDatabase();
      pooled = throughPgBouncer(direct, bouncer!.port);
    });
    afterEach(async () => {
      for (const w of running.splice(0)) await w.stop(100).catch(() => undefined);
      for (const s of opened.splice(0)) await s.close().catch(() => undefined);
      await dropTestDatabase(direct);
    });

    it('through PgBouncer the probe NOTIFY never reaches the listening connection: one warning naming the fix, then plain polling; straight to the server it arrives', async () => {
      await initTable(await store(direct), 'jobs');
      const behind = await watchedStore(pooled);
      // listenUrl through the pooler as well: the same loss, blamed on listenUrl.
      const misdirected = await watchedStore(pooled, { listenUrl: pooled });
      const straight = await watchedStore(direct);
      for (const { store: s } of [behind, misdirected, straight]) await Queue.open(s, { table: 'jobs' });
      const started = Date.now();
      await withDeadline(Promise.all([behind.store.listen(), misdirected.store.listen(), straight.store.listen()]), 3 * NOTIFY_PROBE_TIMEOUT_MS, 'the probes to end');
      // Bounded by the probe's own timeout: detection never hangs a store.
      expect(Date.now() - started).toBeLessThan(2 * NOTIFY_PROBE_TIMEOUT_MS);

      expect(straight.store.notifications).toBe('delivered');
      expect(straight.store.listeningChannels).toEqual(['statusq_jobs']);
      expect(straight.warnings).toEqual([]);

      expect(behind.store.notifications).toBe('lost');
      expect(behind.store.listeningChannels).toEqual([]);
      expect(behind.warnings).toHaveLength(1);
      expect(behind.warnings[0]).toMatchObject({ code: 'notifications-lost', message: expect.stringMatching(/^LISTEN\/NOTIFY does not work through this URL: .*transaction-mode pooler.*polling/) });
      expect(behind.warnings[0]!.fix).toMatch(/listenUrl; statusq --listen-db URL or STATUSQ_LISTEN_DATABASE_URL/);
      expect(misdirected.store.notifications).toBe('lost');
      expect(misdirected.warnings.map((w) => w.message)).toEqual([expect.stringMatching(/^LISTEN\/NOTIFY does not work through listenUrl: /)]);

      // From here a wait is a timer: it neither returns at once (a spin) nor outlives its timeout, and no
      // second probe or warning follows.
      const never = new AbortController();
      for (let round = 0; round < 3; round++) {
        const waited = Date.now();
        await withDeadline(behind.store.waitForWork(300, never.signal), 5000, 'a polling wait to end');
        expect(Date.now() - waited).toBeGreaterThanOrEqual(290);
      }
      await behind.store.listen();
      expect(behind.warnings).toHaveLength(1);

      // The doctor's check probes afresh, on a connection of its own, and says the same.
      expect(await notifyCheck(behind.store)).toMatchObject({ status: 'warn', detail: behind.warnings[0]!.message, fix: behind.warnings[0]!.fix });
      expect(await notifyCheck(straight.store)).toMatchObject({ status: 'pass', detail: expect.stringMatching(/^a NOTIFY sent through this URL reached a LISTENing connection on this URL in \d+ ms/) });
      const withListenUrl = await store(pooled, { listenUrl: direct });
      expect(await notifyCheck(withListenUrl)).toMatchObject({ status: 'pass', detail: expect.stringMatching(/reached a connection to listenUrl \(--listen-db\) in \d+ ms/) });
    });

    it('claims and settles through PgBouncer, LISTEN straight to the server (listenUrl): a worker polling every 30 s picks up a row enqueued through PgBouncer at once', async () => {
      await initTable(await store(direct), 'jobs');
      const writer = await Queue.open(await store(pooled), { table: 'jobs' });
      const { store: workerStore, warnings } = await watchedStore(pooled, { listenUrl: direct });
      const handled: number[] = [];
      const first = deferred();
      const w = await Worker.create({
        store: workerStore,
        table: { table: 'jobs' },
        concurrency: 1,
        // Its first claim finds nothing; the next would come 30 s later, so only a NOTIFY can bring the row sooner.
        pollMinMs: 30_000,
        pollMaxMs: 30_000,
        handler: async (job) => {
          handled.push((job.payload as { n: number }).n);
          first.resolve();
        },
      });
      running.push(w);
      const done = w.run();
      await waitFor('the worker to listen on the server', () => workerStore.listeningChannels.length > 0, { timeoutMs: 2 * NOTIFY_PROBE_TIMEOUT_MS });
      expect(workerStore.notifications).toBe('delivered');
      await writer.enqueue([{ n: 7 }]);
      await withDeadline(first.promise, 10_000, 'the worker to be woken by NOTIFY (its poll would come 30 s later)');
      expect(handled).toEqual([7]);
      expect(warnings).toEqual([]);
      await w.stop(5000);
      await done;
      expect(await writer.counts()).toMatchObject({ done: 1, pending: 0 });
    });

    it('exactly once through PgBouncer: 2 workers, each on its own store through the pooler, drain 1,000 rows; every row ran once and ended done', async () => {
      const JOBS = 1000;
      const admin = await store(direct);
      await initTable(admin, 'jobs');
      await admin.execute({ sql: `INSERT INTO jobs (payload) SELECT json_build_object('n', g)::text FROM generate_series(1, ${JOBS}) g`, params: [] });
      const ids = (await admin.execute({ sql: 'SELECT id FROM jobs', params: [] })).rows.map((r) => r.id);
      const ledger = new Ledger();
      const errors: unknown[] = [];
      const workers = await Promise.all(
        [0, 1].map(async () =>
          Worker.create({
            store: await store(pooled, { maxConnections: 4, onWarning: () => undefined }),
            table: { table: 'jobs' },
            concurrency: 8,
            exitWhenEmpty: true,
            pollMinMs: 2,
            pollMaxMs: 50,
            handler: async (job) => void ledger.record(job),
          }),
        ),
      );
      running.push(...workers);
      for (const w of workers) w.on('error', ({ error }) => errors.push(error));
      const counters = await withDeadline(Promise.all(workers.map((w) => w.run())), 90_000, 'the workers to drain the table through PgBouncer');
      expect(errors).toEqual([]);
      expect(ledger.notExactlyOnce(ids)).toEqual([]);
      expect(counters.reduce((sum, c) => sum + c.completed, 0)).toBe(JOBS);
      expect(counters.reduce((sum, c) => sum + c.claimLost, 0)).toBe(0);
      expect(await (await Queue.open(admin, { table: 'jobs' })).counts()).toEqual({ pending: 0, processing: 0, done: JOBS, abuse: 0, failed: 0, other: 0 });
    });
  });
}
