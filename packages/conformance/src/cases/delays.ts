import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, SchemaError, migrateTable, type Store } from '@statusq/core';
import { generateTableARows } from '@statusq/test-fixtures';
import { countsOf, idKey, readRows, toMs, type TestEnv } from '../harness.js';
import { raceToEmpty } from '../racing-workers.js';
import { createJobs, createTableA, enqueueJobs } from '../tables.js';

/** Long enough that every due row of the race is claimed well before a delayed one may be. */
const DELAY_MS = 1500;
/** A DATETIME(3) or epoch-ms value and this process's clock, read on the same machine, agree to the millisecond; room for rounding. */
const CLOCK_SLACK_MS = 5;

/** The database's clock, as epoch milliseconds. */
async function databaseNow(store: Store): Promise<number> {
  const { rows } = await store.execute({ sql: `SELECT ${store.dialect.now} AS now`, params: [] });
  return toMs(rows[0]!.now)!;
}

export function delayCases(env: () => TestEnv): void {
  describe('delayed jobs (enqueue delayMs / runAt)', () => {
    it('racing workers claim no delayed row before its time (the database computes it), run every row exactly once, and a run time already past is due at once', { timeout: 60_000 }, async () => {
      const setup = await env().store('setup store');
      const queue = await createJobs(setup);
      const due = await enqueueJobs(queue, Array.from({ length: 60 }, (_, n) => ({ n, kind: 'due' })));
      const before = await databaseNow(setup);
      const delayed = (await queue.enqueue(Array.from({ length: 40 }, (_, n) => ({ n, kind: 'delayed' })), { delayMs: DELAY_MS })).map(String);
      const after = await databaseNow(setup);
      const atMs = Date.now() + DELAY_MS;
      const scheduled = (await queue.enqueue(Array.from({ length: 20 }, (_, n) => ({ n, kind: 'run-at' })), { runAt: new Date(atMs) })).map(String);
      // Enqueued last: the race's queue order is newest first, so its first claims reach this row if it is due at once.
      const past = (await queue.enqueue([{ kind: 'past' }], { runAt: '2020-01-01T00:00:00Z' })).map(String);

      // next_attempt_at is the database's now plus the delay, read as the INSERT ran.
      const rows = new Map((await readRows(setup, 'jobs')).map((row) => [idKey(row.id), row]));
      for (const id of delayed) {
        const at = toMs(rows.get(id)!.next_attempt_at)!;
        expect(at).toBeGreaterThanOrEqual(before + DELAY_MS - CLOCK_SLACK_MS);
        expect(at).toBeLessThanOrEqual(after + DELAY_MS + CLOCK_SLACK_MS);
      }
      for (const id of scheduled) expect(Math.abs(toMs(rows.get(id)!.next_attempt_at)! - atMs)).toBeLessThanOrEqual(1);
      for (const id of due) expect(rows.get(id)!.next_attempt_at).toBeNull();
      expect(toMs(rows.get(past[0]!)!.next_attempt_at)).toBe(Date.parse('2020-01-01T00:00:00Z'));

      const early: string[] = [];
      const ranAt = new Map<string, number>();
      const { ledger, workers } = await raceToEmpty(env(), {
        workers: 4,
        concurrency: 4,
        deadlineMs: 45_000,
        what: 'the workers to run every row, delayed ones included',
        handler: (job) => {
          ranAt.set(idKey(job.id), Date.now());
          const notBefore = toMs(job.row.next_attempt_at);
          if (notBefore !== null && Date.now() < notBefore - CLOCK_SLACK_MS) early.push(`${idKey(job.id)} ran ${notBefore - Date.now()} ms early`);
        },
      });
      expect(early).toEqual([]);
      const all = [...due, ...delayed, ...scheduled, ...past];
      expect(ledger.notExactlyOnce(all)).toEqual([]);
      expect(await countsOf(setup, 'jobs')).toEqual({ pending: 0, processing: 0, done: all.length, abuse: 0, failed: 0, other: 0 });
      // The row whose run time had passed ran before any delayed row, when the race had a second before the first
      // of them was due (on a loaded machine the set-up and the workers' start can outlast DELAY_MS: the delayed
      // rows are then due as the race begins and may rightly run first; `early` above still holds).
      const position = (id: string) => ledger.order.findIndex((entry) => entry.id === id);
      const firstRunMs = Math.min(...ranAt.values());
      const firstDelayedDueMs = Math.min(...[...delayed, ...scheduled].map((id) => toMs(rows.get(id)!.next_attempt_at)!));
      if (firstDelayedDueMs - firstRunMs >= 1000) {
        expect(position(past[0]!)).toBeLessThan(Math.min(...[...delayed, ...scheduled].map(position)));
      }
      for (const w of workers) expect(w.errors).toEqual([]);
      await env().closeStores();
    });

    it('an application table needs next_attempt_at: without it a delayed enqueue is a SchemaError that writes nothing; migrate --with delays adds that column alone', async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, generateTableARows(3));
      const plain = await Queue.open(store, { table: 'table_a' });
      const row = { id: 1001, date: '2026-01-01 00:00:00.000', url: 'https://example.com/delayed', kind: 'x' };
      await expect(plain.enqueue([row], { delayMs: 1000 })).rejects.toThrow(SchemaError);
      await expect(plain.enqueue([row], { delayMs: 1000 })).rejects.toThrow(/no next_attempt_at column.*migrate --with delays/);
      expect((await readRows(store, 'table_a')).map((r) => Number(r.id)).sort()).toEqual([1, 2, 3]);

      const report = await migrateTable(store, { table: 'table_a', with: ['delays'] });
      expect(report.addedColumns).toEqual(['next_attempt_at']);
      const migrated = await Queue.open(store, { table: 'table_a' });
      expect(migrated.table.features).toMatchObject({ backoff: true, retries: false, leases: false });
      const before = await databaseNow(store);
      expect((await migrated.enqueue([row], { delayMs: 60_000 })).map(String)).toEqual(['1001']);
      const stored = (await readRows(store, 'table_a')).find((r) => Number(r.id) === 1001)!;
      expect(toMs(stored.next_attempt_at)!).toBeGreaterThanOrEqual(before + 60_000 - CLOCK_SLACK_MS);
      // Pending, and not claimable for a minute.
      expect(stored.status).toBeNull();
      expect((await migrated.claim({ limit: 10, token: null })).rows.map((r) => Number(r.id)).sort()).toEqual([1, 2, 3]);
      // A row that sets next_attempt_at itself and asks for a delay too is refused: which one wins would be a guess.
      await expect(migrated.enqueue([{ ...row, id: 1002, next_attempt_at: null }], { delayMs: 5 })).rejects.toThrow(/sets next_attempt_at itself/);
      await env().closeStores();
    });

    it('bad delays and run times are ConfigErrors that write nothing', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const bad: Array<[Parameters<Queue['enqueue']>[1], RegExp]> = [
        [{ delayMs: -1 }, /delayMs must be a number of milliseconds/],
        [{ delayMs: Number.NaN }, /delayMs must be a number of milliseconds/],
        [{ runAt: 'tomorrow' }, /runAt must be a date and time with a zone/],
        [{ runAt: '2026-12-01T10:00:00' }, /runAt must be a date and time with a zone/],
        [{ runAt: new Date(Number.NaN) }, /an invalid Date/],
        [{ runAt: '10000-01-01T00:00:00Z' }, /runAt must be a date and time with a zone/],
        [{ runAt: new Date(Date.UTC(10000, 0, 1)) }, /between 1970 and the year 9999/],
        [{ delayMs: 10, runAt: new Date() }, /delayMs or runAt, not both/],
      ];
      for (const [options, message] of bad) {
        const attempt = queue.enqueue([{ n: 1 }], options);
        await expect(attempt, JSON.stringify(options)).rejects.toThrow(ConfigError);
        await expect(queue.enqueue([{ n: 1 }], options)).rejects.toThrow(message);
      }
      expect(await countsOf(store, 'jobs')).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
      await env().closeStores();
    });
  });
}
