/**
 * What the conformance suite's outbox cases cannot reach on PostgreSQL: a pg client that does not report its
 * transaction status (pg before 8.21, the native client), and an application that parses int8 as a bigint.
 * Each test runs in its own database; an unreachable server skips the file (fails with STATUSQ_REQUIRE_DATABASES=1).
 */
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, Queue, initTable, type Store } from '@statusq/core';
import { connect } from './index.js';
import { createTestDatabase, databasesRequired, dropTestDatabase, postgresUnavailable } from './testing.js';

const unavailable = await postgresUnavailable();

if (unavailable !== null) {
  if (databasesRequired()) {
    it('PostgreSQL server is reachable (STATUSQ_REQUIRE_DATABASES=1)', () => {
      throw new Error(unavailable);
    });
  } else {
    it.skip(`[needs postgres] enqueue in the caller's pg transaction: ${unavailable}`, () => undefined);
  }
} else {
  describe("enqueue in the caller's pg transaction", () => {
    let url: string;
    let store: Store;
    let client: pg.Client;
    beforeEach(async () => {
      url = await createTestDatabase();
      store = await connect(url);
    });
    afterEach(async () => {
      await client?.end().catch(() => undefined);
      await store.close();
      await dropTestDatabase(url);
    });

    async function jobIds(): Promise<string[]> {
      return (await store.execute({ sql: 'SELECT id FROM jobs ORDER BY id', params: [] })).rows.map((row) => String(row.id));
    }

    for (const [label, status] of [
      ['pg before 8.21 (no getTransactionStatus)', undefined],
      ['the native client (getTransactionStatus() is null)', () => null],
    ] as const) {
      it(`${label}: a SAVEPOINT tells a connection outside a transaction (refused, nothing written) from one inside`, async () => {
        const queue = await Queue.open(store, { table: (await initTable(store, 'jobs')).table });
        client = new pg.Client({ connectionString: url });
        await client.connect();
        Object.defineProperty(client, 'getTransactionStatus', { value: status });
        const error = await queue.enqueue([{ n: 1 }], { transaction: client }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as Error).message).toMatch(/^enqueue: the pg client has no open transaction/);
        expect(await jobIds()).toEqual([]);

        await client.query('BEGIN');
        const ids = await queue.enqueue([{ n: 1 }, { n: 2 }], { transaction: client });
        // The probe's savepoint is released: a ROLLBACK TO it now fails, and the rows commit with the transaction.
        await expect(client.query('ROLLBACK TO SAVEPOINT statusq_in_transaction')).rejects.toThrow(/does not exist/);
        await client.query('ROLLBACK');
        expect(await jobIds()).toEqual([]);
        await client.query('BEGIN');
        const committed = await queue.enqueue([{ n: 3 }], { transaction: client });
        await client.query('COMMIT');
        expect(ids).toHaveLength(2);
        expect(await jobIds()).toEqual(committed.map(String));
      });
    }

    it('an application that parses int8 as a bigint gets ids typed as claims read them: numbers', async () => {
      const queue = await Queue.open(store, { table: (await initTable(store, 'jobs')).table });
      const INT8 = 20;
      client = new pg.Client({
        connectionString: url,
        types: { getTypeParser: ((oid: number, format?: string) => (oid === INT8 ? (text: string) => BigInt(text) : pg.types.getTypeParser(oid, format as 'text'))) as pg.CustomTypesConfig['getTypeParser'] },
      });
      await client.connect();
      expect((await client.query<{ n: unknown }>('SELECT 7::int8 AS n')).rows[0]!.n).toBe(7n);
      await client.query('BEGIN');
      const ids = await queue.enqueue([{ n: 1 }, { n: 2 }], { transaction: client });
      await client.query('COMMIT');
      const { rows } = await queue.claim({ limit: 2, token: 't' });
      expect(ids.map((id) => typeof id)).toEqual(['number', 'number']);
      expect([...ids].sort()).toEqual(rows.map((row) => row.id).sort());
    });
  });
}
