/**
 * What only PostgreSQL has in the statements statusq sends and what comes back, beyond the shared conformance
 * suite: the claim's plan on the partial pending index, the lock order of a settle on a claims table, id lists
 * bound as one array, prepared statements (and one a pooler lost), type parsing, SQLSTATE mapping, batches and
 * ids the server fills. Each rests on pg's or the server's own behaviour, which a dialect-neutral case cannot
 * pin down. Connections and LISTEN/NOTIFY are in postgres.test.ts. Each test runs in its own database; an
 * unreachable server skips the file (fails with STATUSQ_REQUIRE_DATABASES=1).
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, StoreError, initTable, migrateTable, type Store } from '@statusq/core';
import { pendingIndexName } from '@statusq/core/adapter';
import { oneStatementClaim } from '@statusq/core/adapter';
import { deferred, waitFor } from '@statusq/conformance';
import { postgresNativeClaim, toStoreError } from './index.js';
import { postgresQueryPlans } from './testing.js';
import { databaseEachTest, whenPostgresAnswers } from './test/postgres-test-db.js';

whenPostgresAnswers('PostgreSQL-specific tests', () => {
  describe('PostgreSQL adapter', () => {
    const { url, store } = databaseEachTest();

    // The candidate SELECTs on the pending index are the conformance case `[needs queryPlans]`.
    it('EXPLAIN: with 20,000 finished rows the claim locks its candidates through the partial pending index and updates by primary key, no Sort, no Seq Scan', async () => {
      const s = await store();
      const jobs = await Queue.open(s, { table: (await initTable(s, 'jobs')).table });
      const q = (n: string) => s.dialect.quoteIdentifier(n);
      await s.execute({
        sql: `INSERT INTO ${q('jobs')} (${q('date')}, ${q('payload')}, ${q('status')}) SELECT CURRENT_TIMESTAMP - g * INTERVAL '1 second', '{}', CASE WHEN g % 1000 = 0 THEN NULL ELSE 1 END FROM generate_series(1, 20000) g`,
        params: [],
      });
      await postgresQueryPlans.analyze(s, 'jobs');
      const claimPlan = (await postgresQueryPlans.explain(s, oneStatementClaim(jobs.sql, postgresNativeClaim, { limit: 50, token: 't' }))).text;
      expect(claimPlan).toMatch(/LockRows/);
      expect(claimPlan).toMatch(new RegExp(`using ${pendingIndexName('jobs')}\\b`));
      expect(claimPlan).not.toMatch(/Seq Scan|\bSort\b/);
      expect((await jobs.claim({ limit: 50, token: 't' })).rows).toHaveLength(20);
    });

    it('with a claims table (migrate --beside), a settle that waits behind a reap and a new claim of its row sees the new token and changes nothing (its row is locked first, so the claims table is read as the new claim left it)', async () => {
      const s = await store();
      const rival = await store();
      await s.execute({ sql: 'CREATE TABLE table_a (id integer PRIMARY KEY, url text, date timestamp, status smallint)', params: [] });
      await s.execute({ sql: "INSERT INTO table_a (id, url, date) VALUES (1, 'u', '2024-01-01')", params: [] });
      await migrateTable(s, { table: 'table_a', beside: true });
      const queue = await Queue.open(s, { table: 'table_a' });
      const taker = await Queue.open(rival, { table: 'table_a' });
      expect((await queue.claim({ limit: 1, token: 'A' })).rows.map((r) => r.id)).toEqual([1]);
      const committed = deferred();
      const holding = deferred();
      // The rival reaps A's claim and claims the row as B in one open transaction, holding the row's lock.
      const takeover = rival.transaction!(async (tx) => {
        await tx.execute({ sql: "UPDATE table_a SET status = NULL WHERE id = 1", params: [] });
        await tx.execute({ sql: "UPDATE table_a SET status = 9 WHERE id = 1", params: [] });
        await tx.execute({ sql: "UPDATE table_a_statusq SET worker_id = 'B', claimed_at = now() WHERE id = 1", params: [] });
        holding.resolve();
        await committed.promise;
      });
      await holding.promise;
      // A's settle starts now, before the takeover commits, and waits for the row.
      const settle = queue.apply([queue.sql.complete(1, 'A', null)]);
      await waitFor('the settle to wait for the row lock', async () => Number((await rival.execute({ sql: "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()", params: [] })).rows[0]!.n) === 1);
      committed.resolve();
      await takeover;
      expect((await settle)[0]!.affected).toBe(0);
      expect((await taker.counts()).processing).toBe(1);
      expect((await rival.execute({ sql: 'SELECT worker_id, finished_at FROM table_a_statusq WHERE id = 1', params: [] })).rows).toEqual([{ worker_id: 'B', finished_at: null }]);
    });

    it('id lists bind as one array parameter: text ids with commas, quotes, braces, backslashes and the word NULL claim and settle, and 70,000 ids settle in one statement (past the 65,535-parameter limit of an IN list)', async () => {
      const s = await store();
      await s.execute({ sql: 'CREATE TABLE texty (id text PRIMARY KEY, date timestamptz NOT NULL DEFAULT now(), status smallint)', params: [] });
      const awkward = ['a,b', '"quoted"', "it's", '{braced}', 'back\\slash', 'NULL', ' spaced ', 'é,ü', ''];
      await s.executeBatch(awkward.map((id) => ({ sql: 'INSERT INTO texty (id) VALUES ($1)', params: [id] })));
      const texty = await Queue.open(s, { table: 'texty' });
      const claimed = (await texty.claim({ limit: 100, token: null })).rows.map((r) => r.id as string);
      expect(claimed.sort()).toEqual([...awkward].sort());
      const [settle] = await texty.apply([texty.sql.completeMany(claimed, null)]);
      expect(settle!.affected).toBe(awkward.length);
      expect((await texty.counts()).done).toBe(awkward.length);

      const MANY = 70_000;
      await s.execute({ sql: 'CREATE TABLE many (id bigint PRIMARY KEY, date timestamptz NOT NULL DEFAULT now(), status smallint)', params: [] });
      await s.execute({ sql: `INSERT INTO many (id, status) SELECT g, 9 FROM generate_series(1, ${MANY}) g`, params: [] });
      const many = await Queue.open(s, { table: 'many' });
      const ids = Array.from({ length: MANY }, (_, i) => i + 1);
      const statement = many.sql.completeMany(ids, null);
      expect(statement.params).toHaveLength(1);
      const [done] = await many.apply([statement]);
      expect(done!.affected).toBe(MANY);
      expect(await many.counts()).toMatchObject({ done: MANY, processing: 0 });
    });

    describe('prepared statements', () => {
      const prepared = async (s: Store) => (await s.execute({ sql: 'SELECT name, statement FROM pg_prepared_statements ORDER BY statement', params: [] })).rows as Array<{ name: string; statement: string }>;
      const jobsQueue = async (s: Store, rows: number) => {
        const { table } = await initTable(s, 'jobs');
        await s.execute({ sql: `INSERT INTO jobs (date, payload) SELECT now() - g * interval '1 second', '{}' FROM generate_series(1, ${rows}) g`, params: [] });
        return Queue.open(s, { table });
      };

      it('the claim and the grouped settle are prepared once per connection, under a name hashed from their text; the other statements are not', async () => {
        // One connection, so the catalog view (per session) shows what the worker's statements left there.
        const s = await store({ maxConnections: 1 });
        const jobs = await jobsQueue(s, 20);
        const claim = oneStatementClaim(jobs.sql, postgresNativeClaim, { limit: 5, token: 'w:1' });
        expect(claim.reusable).toBe(true);
        for (let round = 0; round < 3; round++) {
          const ids = (await jobs.claim({ limit: 5, token: 'w:1' }, 'native')).rows.map((r) => r.id as number);
          expect(ids).toHaveLength(5);
          const [settle] = await jobs.apply([jobs.sql.completeMany(ids, 'w:1')]);
          expect(settle!.affected).toBe(5);
        }
        const names = await prepared(s);
        expect(names.map((p) => p.statement).sort()).toEqual([claim.sql, jobs.sql.completeMany([1], 'w:1').sql].sort());
        for (const { name } of names) expect(name).toMatch(/^statusq_[0-9a-f]{32}$/);
        expect((await jobs.counts()).done).toBe(15);
      });

      it('a refused prepared statement (gone from the session, as behind a pooler) is sent again unnamed, and preparing stays off for that store', async () => {
        const s = await store({ maxConnections: 1 });
        const jobs = await jobsQueue(s, 20);
        expect((await jobs.claim({ limit: 5, token: 'w:1' }, 'native')).rows).toHaveLength(5);
        expect(await prepared(s)).toHaveLength(1);
        // pg still believes the session holds the claim: its next call binds a name the server no longer knows.
        await s.execute({ sql: 'DEALLOCATE ALL', params: [] });
        expect((await jobs.claim({ limit: 5, token: 'w:2' }, 'native')).rows).toHaveLength(5);
        expect((await jobs.claim({ limit: 5, token: 'w:3' }, 'native')).rows).toHaveLength(5);
        expect(await prepared(s)).toEqual([]);
        expect(await jobs.counts()).toMatchObject({ processing: 15, pending: 5 });
      });

      it('a table changed under a prepared RETURNING * claim: the next claim goes through with the new column', async () => {
        const s = await store({ maxConnections: 1 });
        const jobs = await jobsQueue(s, 10);
        expect((await jobs.claim({ limit: 2, token: 'w:1' }, 'native')).rows).toHaveLength(2);
        await s.execute({ sql: "ALTER TABLE jobs ADD COLUMN region text NOT NULL DEFAULT 'eu'", params: [] });
        const after = (await jobs.claim({ limit: 2, token: 'w:2' }, 'native')).rows;
        expect(after).toHaveLength(2);
        for (const row of after) expect(row.region).toBe('eu');
      });

      it('prepare: false sends every statement unnamed', async () => {
        const s = await store({ maxConnections: 1, prepare: false });
        const jobs = await jobsQueue(s, 10);
        const ids = (await jobs.claim({ limit: 5, token: 'w:1' }, 'native')).rows.map((r) => r.id as number);
        await jobs.apply([jobs.sql.completeMany(ids, 'w:1')]);
        expect(await prepared(s)).toEqual([]);
        expect((await jobs.counts()).done).toBe(5);
      });

      it('prepare and listen take true or false only: anything else is a ConfigError before any connection opens', async () => {
        for (const bad of [{ prepare: 'no' }, { listen: 0 }, { prepare: null }]) {
          await expect(store(bad as unknown as Parameters<typeof store>[0])).rejects.toThrow(/^PostgreSQL store: (prepare|listen) must be true or false, got /);
        }
      });
    });

    it('types: int8 ids and counts are numbers (bigint past 2^53) on this store only; pg\'s global parsers are untouched; timestamps are Dates', async () => {
      const s = await store();
      const { rows } = await s.execute({
        sql: `SELECT 42::int8 AS small, 9007199254740993::int8 AS big, COUNT(*) AS n, TIMESTAMP '2024-01-02 03:04:05.678' AS ts, TIMESTAMPTZ '2024-01-02 03:04:05.678Z' AS tstz FROM generate_series(1, 3)`,
        params: [],
      });
      expect(rows[0]).toEqual({ small: 42, big: 9007199254740993n, n: 3, ts: new Date('2024-01-02T03:04:05.678Z'), tstz: new Date('2024-01-02T03:04:05.678Z') });
      expect(pg.types.getTypeParser(20)('42')).toBe('42');
      const plain = new pg.Client({ connectionString: url() });
      await plain.connect();
      try {
        expect((await plain.query('SELECT 42::int8 AS n')).rows[0].n).toBe('42');
      } finally {
        await plain.end();
      }
      // A bigint id binds as a parameter too.
      await initTable(s, 'jobs');
      const q = (n: string) => s.dialect.quoteIdentifier(n);
      await s.execute({ sql: `INSERT INTO ${q('jobs')} (${q('id')}, ${q('payload')}) VALUES ($1, '{}')`, params: [9007199254740993n] });
      const queue = await Queue.open(s, { table: 'jobs' });
      const { rows: claimed } = await queue.claim({ limit: 5, token: 'b' });
      expect(claimed.map((r) => r.id)).toEqual([9007199254740993n]);
      expect((await queue.apply([queue.sql.complete(9007199254740993n, 'b', null)]))[0]!.affected).toBe(1);
      expect(await queue.counts()).toMatchObject({ done: 1 });
    });

    it('errors: SQLSTATEs map to StoreError kinds with the native code kept; a unique violation from the server is UniqueViolation', async () => {
      const cases: Array<[unknown, string, string]> = [
        [{ code: '40001', message: 'could not serialize' }, 'WriteConflict', '40001'],
        [{ code: '40P01', message: 'deadlock detected' }, 'WriteConflict', '40P01'],
        [{ code: '55P03', message: 'lock not available' }, 'WriteConflict', '55P03'],
        [{ code: '57P01', message: 'terminating connection' }, 'ConnectionLost', '57P01'],
        [{ code: '57P02', message: 'crash shutdown' }, 'ConnectionLost', '57P02'],
        [{ code: '57P03', message: 'cannot connect now' }, 'ConnectionLost', '57P03'],
        [{ code: '08006', message: 'connection failure' }, 'ConnectionLost', '08006'],
        [{ code: 'ECONNRESET', message: 'reset' }, 'ConnectionLost', 'ECONNRESET'],
        [{ code: 'ECONNREFUSED', message: 'refused' }, 'ConnectionLost', 'ECONNREFUSED'],
        [{ code: '23505', message: 'duplicate key' }, 'UniqueViolation', '23505'],
        [{ code: '25006', message: 'cannot execute UPDATE in a read-only transaction' }, 'ReadOnly', '25006'],
        [{ code: '0A000', message: 'cannot execute LOCK TABLE during recovery' }, 'ReadOnly', '0A000'],
        [{ code: '0A000', message: 'cannot use a cursor here' }, 'Unknown', '0A000'],
        [{ code: '42P01', message: 'relation does not exist' }, 'Unknown', '42P01'],
      ];
      for (const [native, kind, code] of cases) {
        const error = toStoreError(Object.assign(new Error(String((native as { message: string }).message)), native));
        expect(error, code).toBeInstanceOf(StoreError);
        expect((error as StoreError).kind, code).toBe(kind);
        expect((error as StoreError).nativeCode, code).toBe(code);
      }
      const terminated = toStoreError(new Error('Connection terminated unexpectedly'));
      expect((terminated as StoreError).kind).toBe('ConnectionLost');

      const s = await store();
      await initTable(s, 'jobs');
      const q = (n: string) => s.dialect.quoteIdentifier(n);
      const insert = { sql: `INSERT INTO ${q('jobs')} (${q('id')}, ${q('payload')}) VALUES (1, '{}')`, params: [] };
      await s.execute(insert);
      const duplicate = await s.execute(insert).catch((e: unknown) => e);
      expect(duplicate).toBeInstanceOf(StoreError);
      expect((duplicate as StoreError).kind).toBe('UniqueViolation');
      expect((duplicate as StoreError).nativeCode).toBe('23505');
      // A failed batch rolls back as a whole and leaves the connection usable.
      const batch = await s.executeBatch([{ sql: `INSERT INTO ${q('jobs')} (${q('id')}, ${q('payload')}) VALUES (2, '{}')`, params: [] }, insert]).catch((e: unknown) => e);
      expect((batch as StoreError).kind).toBe('UniqueViolation');
      expect((await s.execute({ sql: `SELECT COUNT(*) AS n FROM ${q('jobs')}`, params: [] })).rows[0]!.n).toBe(1);
    });

    it('executeBatch commits all or nothing, pipelined and (as on an older pg) one statement at a time', async () => {
      for (const pipeline of [true, false]) {
        const s = await store({ pool: { pipeline } });
        const q = (n: string) => s.dialect.quoteIdentifier(n);
        const table = pipeline ? 'batch_p' : 'batch_s';
        await s.execute({ sql: `CREATE TABLE ${q(table)} (id int PRIMARY KEY)`, params: [] });
        const insert = (id: number) => ({ sql: `INSERT INTO ${q(table)} (id) VALUES ($1)`, params: [id] });
        expect((await s.executeBatch([insert(1), insert(2), insert(3)])).map((r) => r.affected)).toEqual([1, 1, 1]);
        const failed = await s.executeBatch([insert(4), insert(2), insert(5)]).catch((e: unknown) => e);
        expect((failed as StoreError).kind, `pipeline ${pipeline}`).toBe('UniqueViolation');
        const { rows } = await s.execute({ sql: `SELECT id FROM ${q(table)} ORDER BY id`, params: [] });
        expect(rows.map((r) => r.id), `pipeline ${pipeline}`).toEqual([1, 2, 3]);
        // The connection is usable (not left inside an aborted transaction).
        expect((await s.executeBatch([insert(6), insert(7)])).map((r) => r.affected)).toEqual([1, 1]);
      }
    });

    it('an id filled by a BEFORE INSERT trigger or a domain default is not refused: the catalog says it does not know, or that the domain fills it; a bare id says it is not filled', async () => {
      const s = await store();
      const run = (sql: string) => s.execute({ sql, params: [] });
      await run('CREATE SEQUENCE numbered_ids');
      await run('CREATE TABLE numbered (id integer NOT NULL PRIMARY KEY, date timestamptz(3) NOT NULL DEFAULT now(), status smallint NULL, payload text NULL)');
      await run("CREATE FUNCTION number_it() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.id := COALESCE(NEW.id, nextval('numbered_ids')); RETURN NEW; END $$");
      await run('CREATE TRIGGER numbered_ids BEFORE INSERT ON numbered FOR EACH ROW EXECUTE FUNCTION number_it()');
      const numbered = await Queue.open(s, { table: 'numbered' });
      expect(numbered.idColumn.filledOnInsert).toBeUndefined();
      expect(await numbered.enqueue([{ n: 1 }])).toHaveLength(1);
      await run("CREATE DOMAIN ticket_id AS integer DEFAULT nextval('numbered_ids')");
      await run('CREATE TABLE ticketed (id ticket_id NOT NULL PRIMARY KEY, date timestamptz(3) NOT NULL DEFAULT now(), status smallint NULL, payload text NULL)');
      expect((await Queue.open(s, { table: 'ticketed' })).idColumn.filledOnInsert).toBe(true);
      await run('CREATE TABLE bare (id integer NOT NULL PRIMARY KEY, date timestamptz(3) NOT NULL DEFAULT now(), status smallint NULL, payload text NULL)');
      const bare = await Queue.open(s, { table: 'bare' });
      expect(bare.idColumn.filledOnInsert).toBe(false);
      await expect(bare.enqueue([{ n: 1 }])).rejects.toThrow(ConfigError);
    });
  });
});
