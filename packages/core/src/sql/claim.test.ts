import { afterEach, describe, expect, it } from 'vitest';
import { sortIds } from './claim.js';
import { StoreError } from '../protocol/errors.js';
import { Queue } from '../queue/queue.js';
import { STORE_RETRY } from '../store/retry.js';
import type { ClaimStrategy, Row, Statement } from '../store/store.js';
import { JOBS_DDL, SqlJsStore, type SqlJsClaim } from '../test/sqljs-store.js';
import { Worker } from '../worker/worker.js';

// Core's claim pipeline against an in-memory SQLite (sql.js) taking each of its paths in turn.

const HOUR = 3_600_000;
const PATHS: SqlJsClaim[] = ['one-statement', 'returning', 'built', 'read-back', 'none'];

let store: SqlJsStore | null = null;

afterEach(async () => {
  await store?.close();
  store = null;
});

/** Jobs 1..count, job n dated n hours ago: job 1 is the newest. */
async function withJobs(path: SqlJsClaim, count: number): Promise<{ s: SqlJsStore; queue: Queue; statements: Statement[] }> {
  const s = (store = await SqlJsStore.open(JOBS_DDL, path));
  const now = Date.now();
  for (let n = 1; n <= count; n++) s.db.run('INSERT INTO jobs (id, date) VALUES (?, ?)', [n, now - n * HOUR]);
  const statements: Statement[] = [];
  s.beforeRun = (run) => statements.push(...run);
  return { s, queue: await Queue.open(s, { table: 'jobs' }), statements };
}

/** The claimed rows as the database holds them now. */
function stored(s: SqlJsStore, rows: readonly Row[]): Row[] {
  const ids = rows.map((r) => Number(r.id));
  const byId = new Map(s.rows(`SELECT * FROM jobs WHERE id IN (${ids.join(', ')})`).map((r) => [Number(r.id), r]));
  return ids.map((id) => byId.get(id)!);
}

describe('the claim pipeline', () => {
  for (const path of PATHS) {
    for (const strategy of ['native', 'conditional-update'] as ClaimStrategy[]) {
      it(`${path} store, ${strategy}: newest first, aged rows first (oldest first) with aging, and the rows returned are the rows as claimed`, async () => {
        const { s, queue } = await withJobs(path, 10);
        const newest = await queue.claim({ limit: 3, token: 'a' }, strategy);
        expect(newest.rows.map((r) => r.id)).toEqual([1, 2, 3]);
        expect(newest.rows).toEqual(stored(s, newest.rows));
        // Jobs 9 and 10 are older than 8.5 hours: they come first, oldest first, then the newest pending.
        const aged = await queue.claim({ limit: 4, token: 'b', agingMs: 8.5 * HOUR }, strategy);
        expect(aged.rows.map((r) => r.id)).toEqual([10, 9, 4, 5]);
        expect(aged.rows).toEqual(stored(s, aged.rows));
        for (const row of aged.rows) expect(row).toMatchObject({ status: 9, worker_id: 'b' });
        expect(typeof aged.rows[0]!.claimed_at).toBe('number');
        expect(aged.candidatesLost).toBe(0);
        // Fewer pending rows than the limit: the aged selection and the newest one overlap and are merged once.
        const rest = await queue.claim({ limit: 10, token: 'c', agingMs: 5.5 * HOUR }, strategy);
        expect(rest.rows.map((r) => r.id)).toEqual([8, 7, 6]);
        expect(s.rows('SELECT COUNT(*) AS n FROM jobs WHERE status IS NULL')).toEqual([{ n: 0 }]);
      });
    }
  }

  it('takes one statement without aging and a transaction with it; builds rows from the candidates or reads them back as the store declares', async () => {
    const shapes: Record<string, string[]> = {};
    for (const path of PATHS) {
      const { queue, statements } = await withJobs(path, 4);
      await queue.claim({ limit: 2, token: 't' });
      await queue.claim({ limit: 2, token: 'u', agingMs: HOUR });
      shapes[path] = statements.map((st) => st.sql.split(' ')[0]! + (st.sql.includes('RETURNING') ? '+RETURNING' : '') + (st.sql.includes('statusq_claim_clock') ? '+clock' : ''));
      await store!.close();
      store = null;
    }
    expect(shapes['one-statement']).toEqual(['UPDATE+RETURNING', 'SELECT', 'UPDATE+RETURNING']);
    expect(shapes['returning']).toEqual(['SELECT', 'UPDATE+RETURNING', 'SELECT', 'UPDATE+RETURNING']);
    expect(shapes['built']).toEqual(['SELECT+clock', 'UPDATE', 'SELECT+clock', 'UPDATE']);
    expect(shapes['read-back']).toEqual(['SELECT', 'UPDATE', 'SELECT', 'SELECT', 'UPDATE', 'SELECT']);
    // The portable claim: candidates, one guarded UPDATE per candidate, then a read-back of the lease start.
    expect(shapes['none']).toEqual(['SELECT', 'UPDATE', 'UPDATE', 'SELECT', 'SELECT', 'UPDATE', 'UPDATE', 'SELECT']);
  });

  it('sorts ids by value, numbers and numeric strings alike', () => {
    expect(sortIds([10, 9, 100, 1])).toEqual([1, 9, 10, 100]);
    expect(sortIds(['18446744073709551615', 3, '9007199254740993'])).toEqual([3, '9007199254740993', '18446744073709551615']);
  });

  it('claims by ids in ascending order', async () => {
    const { queue, statements } = await withJobs('read-back', 5);
    await queue.claim({ limit: 5, token: 't', agingMs: 2.5 * HOUR });
    const update = statements.find((st) => st.sql.startsWith('UPDATE'))!;
    expect(update.params.slice(-5)).toEqual([1, 2, 3, 4, 5]);
  });

  it('rolls the whole claim transaction back when a statement in it fails, and a retried claim takes the rows', async () => {
    const { s, queue } = await withJobs('read-back', 3);
    let failures = 1;
    s.beforeRun = (run) => {
      if (failures > 0 && run[0]!.sql.startsWith('SELECT * FROM "jobs" WHERE "id" IN')) {
        failures--;
        throw new StoreError('WriteConflict', 'deadlock (simulated)');
      }
    };
    await expect(queue.claim({ limit: 3, token: 't' })).rejects.toMatchObject({ kind: 'WriteConflict' });
    expect(s.rows('SELECT COUNT(*) AS n FROM jobs WHERE status IS NULL')).toEqual([{ n: 3 }]);
    expect((await queue.claim({ limit: 3, token: 't' })).rows.map((r) => r.id)).toEqual([1, 2, 3]);
  });

  it('a worker retries a claim that met a write conflict under the claim policy, reporting each retry', async () => {
    const { s } = await withJobs('built', 2);
    let conflicts = 2;
    s.beforeRun = (run) => {
      if (conflicts > 0 && run[0]!.sql.startsWith('UPDATE') && run[0]!.sql.includes('SET "status" = 9')) {
        conflicts--;
        throw new StoreError('WriteConflict', 'deadlock (simulated)');
      }
    };
    const w = await Worker.create({ store: s, table: { table: 'jobs' }, handler: () => undefined, pollMinMs: 1, pollMaxMs: 5, exitWhenEmpty: true });
    const errors: string[] = [];
    w.on('error', (e) => errors.push(e.during));
    expect(await w.run()).toMatchObject({ claimed: 2, completed: 2, candidatesLost: 0 });
    expect(errors).toEqual(['claim (retrying)', 'claim (retrying)']);
    expect(STORE_RETRY.claim.attempts).toBeGreaterThan(2);
  });

  it('refuses the old worker option name "strategy", naming the new one', async () => {
    const { s } = await withJobs('none', 0);
    await expect(Worker.create({ store: s, table: { table: 'jobs' }, handler: () => undefined, ...({ strategy: 'native' } as object) })).rejects.toThrow(/"strategy" was renamed "claimStrategy"/);
  });
});
