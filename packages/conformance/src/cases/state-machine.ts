import { describe, expect, it } from 'vitest';
import { statusCode, type Queue, type Row, type StatusName } from '@statusq/core';
import { IllegalTransitionError, isLegalTransition, type TransitionCause } from '@statusq/core/adapter';
import type { ChargeReport } from '@statusq/core/tools';
import { type Statement } from '@statusq/core/adapter';
import { readRow, statusOf, toMs, waitFor, type TestEnv } from '../harness.js';
import { createJobs, enqueueJobs, forceRowState, retoken } from '../tables.js';

const STATES: StatusName[] = ['pending', 'processing', 'done', 'abuse', 'failed'];

interface Op {
  name: string;
  cause: TransitionCause;
  to: StatusName;
  /** The op only starts from this state (e.g. requeue of failed rows), narrower than its cause. */
  from?: StatusName;
  /** attempt_count of the row before the op. */
  attempts?: number;
  run(queue: Queue, id: string): Promise<number>;
  /** Side effects of the legal transition, beyond the status. */
  check?(after: Row, before: Row): void;
}

// Through Queue.apply, as the worker runs them: a move's claims-table writes (migrate --beside) go with it.
const exec = (queue: Queue, statement: Statement) => queue.apply([statement]).then((r) => r[0]!.affected);

/** A held claim's token becomes one of worker `dead`, which then dies: its launcher recovers what it held. */
async function recoverAsDead(queue: Queue, id: string): Promise<ChargeReport> {
  // Only a held claim is re-tokened: a row in any other state must reach ownerDied exactly as it was.
  await retoken(queue, [id], 'dead:1', true);
  return queue.recoverDeadWorker({ workerId: 'dead', unstarted: [] }, 'worker process died', 3);
}

/**
 * A charge's count, after checking it names exactly the rows it gave up: this one, on its last attempt, when
 * it moved it to failed; none otherwise (a row back to pending, or a row the charge could not take).
 */
function chargedCount(report: ChargeReport, id: string, to: 'pending' | 'failed'): number {
  const givesUp = to === 'failed' && report.charged === 1;
  expect(report.givenUp.map((row) => ({ id: String(row.id), attempt: row.attempt })), 'rows given up').toEqual(givesUp ? [{ id, attempt: 3 }] : []);
  if (givesUp) expect(report.givenUp[0]!.error).toMatch(/lease expired|worker process died/);
  return report.charged;
}

/** Every guarded transition statusq issues, run against rows in every state. Token of the holder: `A`. */
const OPS: Op[] = [
  {
    name: 'claim (guarded UPDATE by id)',
    cause: 'claim',
    to: 'processing',
    run: (q, id) => exec(q, q.sql.claimByIds([id], 'B', false)),
    check: (after) => {
      expect(after.worker_id).toBe('B');
      expect(after.claimed_at).not.toBeNull();
    },
  },
  {
    name: 'claim (native strategy)',
    cause: 'claim',
    to: 'processing',
    run: (q) => q.claim({ limit: 5, token: 'B' }, 'native').then((r) => r.rows.length),
    check: (after) => expect(after.worker_id).toBe('B'),
  },
  {
    name: 'claim (conditional-update strategy)',
    cause: 'claim',
    to: 'processing',
    run: (q) => q.claim({ limit: 5, token: 'B' }, 'conditional-update').then((r) => r.rows.length),
    check: (after) => expect(after.worker_id).toBe('B'),
  },
  {
    name: 'heartbeat (lease extension)',
    cause: 'heartbeat',
    to: 'processing',
    run: (q, id) => exec(q, q.sql.heartbeat(id, 'A')),
    check: (after, before) => expect(toMs(after.claimed_at)).toBeGreaterThan(toMs(before.claimed_at)!),
  },
  {
    name: 'complete',
    cause: 'complete',
    to: 'done',
    run: (q, id) => exec(q, q.sql.complete(id, 'A', '{"ok":true}')),
    check: (after) => {
      expect(after.result).toBe('{"ok":true}');
      expect(after.finished_at).not.toBeNull();
    },
  },
  {
    name: 'giveUp',
    cause: 'giveUp',
    to: 'failed',
    run: (q, id) => exec(q, q.sql.giveUp(id, 'A', 'boom')),
    check: (after, before) => {
      expect(Number(after.attempt_count)).toBe(Number(before.attempt_count) + 1);
      expect(after.last_error).toBe('boom');
      expect(after.finished_at).not.toBeNull();
    },
  },
  {
    name: 'abuse from processing',
    cause: 'abuse',
    to: 'abuse',
    from: 'processing',
    run: (q, id) => exec(q, q.sql.abuse(id, 'A', 'spam')),
    check: (after) => expect(after.last_error).toBe('spam'),
  },
  {
    name: 'abuse from pending (Queue.markAbuse)',
    cause: 'abuse',
    to: 'abuse',
    from: 'pending',
    run: (q, id) => q.markAbuse(id, 'spam').then((changed) => (changed ? 1 : 0)),
    check: (after) => expect(after.last_error).toBe('spam'),
  },
  {
    name: 'retry (scheduled)',
    cause: 'retry',
    to: 'pending',
    attempts: 1,
    run: (q, id) => exec(q, q.sql.retry(id, 'A', 'flaky', 60_000)),
    check: (after) => {
      expect(Number(after.attempt_count)).toBe(2);
      expect(after.last_error).toBe('flaky');
      expect(toMs(after.next_attempt_at)).toBeGreaterThan(Date.now() + 30_000);
    },
  },
  {
    name: 'release',
    cause: 'release',
    to: 'pending',
    attempts: 1,
    run: (q, id) => exec(q, q.sql.release(id, 'A')),
    check: (after) => expect(Number(after.attempt_count)).toBe(1),
  },
  {
    name: 'leaseExpired -> pending (attempts left)',
    cause: 'leaseExpired',
    to: 'pending',
    attempts: 0,
    run: async (q, id) => chargedCount(await q.reapExpired(1000, 3), id, 'pending'),
    check: (after) => {
      expect(Number(after.attempt_count)).toBe(1);
      expect(String(after.last_error)).toMatch(/lease expired/);
    },
  },
  {
    name: 'ownerDied -> pending (attempts left)',
    cause: 'ownerDied',
    to: 'pending',
    attempts: 0,
    run: async (q, id) => chargedCount(await recoverAsDead(q, id), id, 'pending'),
    check: (after) => {
      expect(Number(after.attempt_count)).toBe(1);
      expect(String(after.last_error)).toBe('worker process died');
    },
  },
  {
    name: 'ownerDied -> failed (attempts used up)',
    cause: 'ownerDied',
    to: 'failed',
    attempts: 2,
    run: async (q, id) => chargedCount(await recoverAsDead(q, id), id, 'failed'),
    check: (after) => expect(Number(after.attempt_count)).toBe(3),
  },
  {
    name: 'leaseExpired -> failed (attempts used up)',
    cause: 'leaseExpired',
    to: 'failed',
    attempts: 2,
    run: async (q, id) => chargedCount(await q.reapExpired(1000, 3), id, 'failed'),
    check: (after) => {
      expect(Number(after.attempt_count)).toBe(3);
      expect(String(after.last_error)).toMatch(/lease expired/);
    },
  },
  {
    name: 'requeue of failed',
    cause: 'requeue',
    to: 'pending',
    from: 'failed',
    attempts: 3,
    run: (q, id) => q.requeue('failed', [id]),
    check: (after) => {
      expect(Number(after.attempt_count)).toBe(0);
      expect(after.next_attempt_at).toBeNull();
    },
  },
  {
    name: 'requeue of abuse',
    cause: 'requeue',
    to: 'pending',
    from: 'abuse',
    run: (q, id) => q.requeue('abuse', [id]),
  },
  {
    name: 'requeue of processing (--force)',
    cause: 'requeueProcessing',
    to: 'pending',
    attempts: 1,
    run: (q, id) => q.requeue('processing', [id], { force: true }),
    check: (after) => {
      expect(Number(after.attempt_count)).toBe(2);
      expect(after.last_error).toBe('requeued by an operator while processing');
    },
  },
  {
    name: 'requeue of processing with an expired lease',
    cause: 'requeueProcessing',
    to: 'pending',
    run: (q, id) => q.requeue('processing', [id], { leaseMs: 1000 }),
    check: (after) => {
      expect(Number(after.attempt_count)).toBe(1);
      expect(String(after.last_error)).toMatch(/lease expired after 1000 ms \(requeued by an operator\)/);
    },
  },
];

export function stateMachineCases(env: () => TestEnv): void {
  describe('state machine', () => {
    it('every guarded UPDATE moves a row only from its legal states, and changes nothing (affected 0) from any other', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const failures: string[] = [];
      let legalRuns = 0;
      for (const op of OPS) {
        for (const state of STATES) {
          await store.execute({ sql: `DELETE FROM ${store.dialect.quoteIdentifier('jobs')}`, params: [] });
          const [id] = await enqueueJobs(queue, [{ op: op.name, state }]);
          await forceRowState(queue, id, {
            status: statusCode(state, queue.table.codes),
            workerId: state === 'pending' ? null : 'A',
            claimedAgoMs: state === 'pending' ? null : 60_000,
            attemptCount: op.attempts ?? 0,
          });
          const before = await readRow(store, 'jobs', id);
          const legal = isLegalTransition(state, op.to, op.cause) && (op.from === undefined || op.from === state);
          const label = `${op.name} on a ${state} row`;
          let affected: number;
          try {
            affected = await op.run(queue, id!);
          } catch (error) {
            failures.push(`${label}: threw ${String(error)}`);
            continue;
          }
          const after = await readRow(store, 'jobs', id);
          if (legal) {
            legalRuns++;
            const expected = statusCode(op.to, queue.table.codes);
            if (affected !== 1) failures.push(`${label}: legal, expected affected 1, got ${affected}`);
            if (statusOf(after) !== expected) failures.push(`${label}: expected status ${expected}, got ${statusOf(after)}`);
            try {
              op.check?.(after, before);
            } catch (error) {
              failures.push(`${label}: ${error instanceof Error ? error.message : String(error)}`);
            }
          } else {
            if (affected !== 0) failures.push(`${label}: illegal, expected affected 0, got ${affected}`);
            if (JSON.stringify(after) !== JSON.stringify(before)) failures.push(`${label}: illegal, but the row changed: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`);
          }
        }
      }
      expect(failures).toEqual([]);
      // One legal source state per op: claim x3 from pending, abuse x2 each from its own state, ...
      expect(legalRuns).toBe(OPS.length);
      await env().closeStores();
    });

    it('named illegal moves are no-ops: complete on pending, complete on done, claim of processing, requeue of done', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const [pending, done, processing] = await enqueueJobs(queue, ['p', 'd', 'x']);
      await forceRowState(queue, done, { status: queue.table.codes.done, workerId: 'A' });
      await forceRowState(queue, processing, { status: queue.table.codes.processing, workerId: 'A', claimedAgoMs: 0 });
      const affected = (statement: Statement) => exec(queue, statement);
      expect(await affected(queue.sql.complete(pending!, null, null))).toBe(0);
      expect(await affected(queue.sql.complete(pending!, 'A', null))).toBe(0);
      expect(await affected(queue.sql.complete(done!, 'A', null))).toBe(0);
      expect(await affected(queue.sql.claimByIds([processing!], 'B', false))).toBe(0);
      expect(await queue.requeue('failed', [done!])).toBe(0);
      expect(await queue.requeue('abuse', [done!])).toBe(0);
      expect(await affected(queue.sql.release(done!, 'A'))).toBe(0);
      expect(await affected(queue.sql.retry(pending!, null, 'x', 0))).toBe(0);
      expect(statusOf(await readRow(store, 'jobs', pending))).toBeNull();
      expect(statusOf(await readRow(store, 'jobs', done))).toBe(queue.table.codes.done);
      const stillProcessing = await readRow(store, 'jobs', processing);
      expect(statusOf(stillProcessing)).toBe(queue.table.codes.processing);
      expect(stillProcessing.worker_id).toBe('A');
      await env().closeStores();
    });

    it('a requeue of done or pending rows is an IllegalTransitionError and changes nothing', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const [pending, done] = await enqueueJobs(queue, ['p', 'd']);
      await forceRowState(queue, done, { status: queue.table.codes.done, workerId: 'A', attemptCount: 1 });
      const before = [await readRow(store, 'jobs', pending), await readRow(store, 'jobs', done)];
      // A JavaScript caller (or a cast) can name any state; the state machine, not the type, refuses it.
      for (const from of ['done', 'pending'] as StatusName[]) {
        for (const ids of [[pending!, done!], undefined]) {
          const outcome = await queue.requeue(from, ids).then(
            (n) => `requeued ${n}`,
            (error: unknown) => error,
          );
          expect(outcome, `requeue ${from} ${ids ? 'by id' : 'all'}`).toBeInstanceOf(IllegalTransitionError);
          expect(outcome).toMatchObject({ from, to: 'pending', code: 'ILLEGAL_TRANSITION' });
        }
      }
      expect([await readRow(store, 'jobs', pending), await readRow(store, 'jobs', done)]).toEqual(before);
      await env().closeStores();
    });

    it('a settled row is final for its holder: a second complete, giveUp, abuse or release of the same claim affects 0', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const [id] = await enqueueJobs(queue, ['once']);
      const { rows } = await queue.claim({ limit: 1, token: 'A' });
      expect(rows.map((r) => String(r.id))).toEqual([id]);
      expect(statusOf(rows[0])).toBe(queue.table.codes.processing);
      const results = await queue.apply([
        queue.sql.complete(id!, 'A', null),
        queue.sql.complete(id!, 'A', null),
        queue.sql.giveUp(id!, 'A', 'late'),
        queue.sql.abuse(id!, 'A', 'late'),
        queue.sql.release(id!, 'A'),
        queue.sql.heartbeat(id!, 'A'),
      ]);
      expect(results.map((r) => r.affected)).toEqual([1, 0, 0, 0, 0, 0]);
      const row = await readRow(store, 'jobs', id);
      expect(statusOf(row)).toBe(queue.table.codes.done);
      expect(row.last_error).toBeNull();
      await env().closeStores();
    });
  });
}

/** Claims with token A, then makes the lease look expired and reaps it (bounded wait). */
export async function claimAndReap(queue: Queue, token: string): Promise<string> {
  const { rows } = await queue.claim({ limit: 1, token });
  if (rows.length !== 1) throw new Error(`expected to claim one row, got ${rows.length}`);
  const id = String(rows[0]!.id);
  // A lease of 0 ms expires as soon as the database clock has moved past claimed_at.
  await waitFor('the reaper to take back the expired claim', async () => (await queue.reapExpired(0, 1000)).charged === 1);
  return id;
}
