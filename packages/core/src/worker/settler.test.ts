import { describe, expect, it } from 'vitest';
import { Queue } from '../queue/queue.js';
import { OPTIONAL_COLUMNS } from '../protocol/table.js';
import { ReadOnlyWait } from './read-only-wait.js';
import { Settler } from './settler.js';
import type { Statement } from '../store/store.js';
import { jobsStoreEachTest, type SqlJsStore } from '../test/sqljs-store.js';

const withJobs = jobsStoreEachTest();

function statuses(s: SqlJsStore): Array<number | null> {
  return s.rows('SELECT status FROM jobs ORDER BY id').map((r) => r.status as number | null);
}

/** Submits one settle and resolves (or rejects) as the settler answers it. */
function submit(settler: Settler, statement: () => Statement, completion: { id: number; token: string | null } | null): Promise<boolean> {
  return new Promise((settled, failed) => settler.submit({ completes: completion === null ? undefined : null, id: completion?.id ?? 0, token: completion?.token ?? null, statement, settled, failed }));
}

async function settlerOn(s: SqlJsStore): Promise<{ queue: Queue; settler: Settler }> {
  const queue = await Queue.open(s, { table: 'jobs' });
  const noHooks = { started: () => undefined, ended: () => undefined };
  return { queue, settler: new Settler(queue, 200, () => undefined, new ReadOnlyWait(0, 5, Math.random, noHooks)) };
}

describe('Settler', () => {
  it('groups plain completions on a table without a token column too (one UPDATE), and tells a row an operator requeued meanwhile from the rest', async () => {
    const s = await withJobs(4);
    const statusOnly = Object.fromEntries(OPTIONAL_COLUMNS.map((c) => [c, false]));
    const queue = await Queue.open(s, { table: 'jobs', columns: statusOnly });
    expect(queue.table.features.fencing).toBe(false);
    const noHooks = { started: () => undefined, ended: () => undefined };
    const settler = new Settler(queue, 200, () => undefined, new ReadOnlyWait(0, 5, Math.random, noHooks));
    const { rows } = await queue.claim({ limit: 4, token: null });
    const ids = rows.map((r) => r.id as number);
    const built: number[] = [];
    const complete = (id: number) =>
      submit(settler, () => {
        built.push(id);
        return queue.sql.complete(id, null, null);
      }, { id, token: null });
    expect(await Promise.all(ids.slice(0, 2).map(complete))).toEqual([true, true]);
    expect(built).toEqual([]);
    // An operator puts one claimed row back to pending: its completion changes nothing and says so.
    await s.execute({ sql: 'UPDATE jobs SET status = NULL WHERE id = ?', params: [ids[2]!] });
    expect(await Promise.all(ids.slice(2).map(complete))).toEqual([false, true]);
    expect(built).toEqual([]);
    const statusOf = new Map(s.rows('SELECT id, status FROM jobs').map((r) => [r.id, r.status]));
    expect(ids.map((id) => statusOf.get(id))).toEqual([1, 1, null, 1]);
  });

  it('builds no statement of its own for a completion that joins a group, and one for a settle that does not', async () => {
    const s = await withJobs(3);
    const { queue, settler } = await settlerOn(s);
    const { rows } = await queue.claim({ limit: 3, token: 'w:1' });
    const ids = rows.map((r) => r.id as number);
    const built: number[] = [];
    const build = (id: number) => () => {
      built.push(id);
      return queue.sql.complete(id, 'w:1', null);
    };
    const settled = await Promise.all([
      submit(settler, build(ids[0]!), { id: ids[0]!, token: 'w:1' }),
      submit(settler, build(ids[1]!), { id: ids[1]!, token: 'w:1' }),
      submit(settler, build(ids[2]!), null),
    ]);
    expect(settled).toEqual([true, true, true]);
    expect(built).toEqual([ids[2]]);
    expect(statuses(s)).toEqual([1, 1, 1]);
  });

  it('rejects only the settle whose statement cannot be built; the rest of the commit goes through', async () => {
    const s = await withJobs(3);
    const { queue, settler } = await settlerOn(s);
    const { rows } = await queue.claim({ limit: 3, token: 'w:1' });
    const [a, b, c] = rows.map((r) => r.id as number);
    const broken = new Error('cannot build this settle');
    const outcomes = await Promise.allSettled([
      submit(settler, () => queue.sql.complete(a!, 'w:1', null), null),
      submit(settler, () => {
        throw broken;
      }, null),
      submit(settler, () => queue.sql.giveUp(c!, 'w:1', 'gave up'), null),
    ]);
    expect(outcomes).toEqual([
      { status: 'fulfilled', value: true },
      { status: 'rejected', reason: broken },
      { status: 'fulfilled', value: true },
    ]);
    const statusOf = new Map(s.rows('SELECT id, status FROM jobs').map((r) => [r.id, r.status]));
    expect([statusOf.get(a), statusOf.get(b), statusOf.get(c)]).toEqual([1, 9, 0]);
    await settler.whenIdle();
    expect(settler.idle).toBe(true);
  });
});
