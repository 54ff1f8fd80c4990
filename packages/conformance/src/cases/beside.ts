import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, migrateTable, pruneRows, type JobId, type Row, type Store, type WorkerCounters } from '@statusq/core';
import { besideTableName, type ClaimStrategy, type SqlValue } from '@statusq/core/adapter';
import { generateTableARows, type TableARow } from '@statusq/test-fixtures';
import { FAST, countsOf, deferred, idKey, statusOf, toMs, withDeadline, withLatency, type StartedWorker, type TestEnv } from '../harness.js';
import { createTableA } from '../tables.js';
import { checkTableARun, expectedAttempts, readLedgerFile, startTableARun, tally, MAX_ATTEMPTS } from '../supervised-run.js';
import type { ConformanceOptions } from '../options.js';

/**
 * The seed's table_a with its claim state beside it (migrate --beside): the table keeps exactly its columns and a
 * claims table keyed by its id holds the lease, token, attempts, next attempt, failure reason and end time. The
 * claim and every settle are the table's guarded status UPDATE with their claims-table writes in one transaction;
 * these cases race real workers and processes over it, take leases over, and write the status behind statusq's back.
 */
export function besideCases(env: () => TestEnv, options: ConformanceOptions): void {
  const scale = options.scale ?? 1;

  /** The claims table's row of `id`, or undefined. */
  async function claimsRow(store: Store, id: unknown): Promise<Row | undefined> {
    const q = (name: string) => store.dialect.quoteIdentifier(name);
    const { rows } = await store.execute({ sql: `SELECT * FROM ${q(besideTableName('table_a'))} WHERE ${q('id')} = ${store.dialect.placeholder(1)}`, params: [id as SqlValue] });
    return rows[0];
  }

  /** The claim of `id` started `agoMs` ago by the database's clock: its lease runs out without a wait. */
  async function claimedAgo(store: Store, id: unknown, agoMs: number): Promise<void> {
    const d = store.dialect;
    const sql = `UPDATE ${d.quoteIdentifier(besideTableName('table_a'))} SET ${d.quoteIdentifier('claimed_at')} = ${d.nowPlusMs(d.placeholder(1))} WHERE ${d.quoteIdentifier('id')} = ${d.placeholder(2)}`;
    expect((await store.execute({ sql, params: [-agoMs, id as SqlValue] })).affected).toBe(1);
  }

  /** Every row of table_a with its claims-table columns, as a claim reads them. */
  async function rowsWithClaims(queue: Queue): Promise<Map<string, Row>> {
    const { rows } = await queue.store.execute({ sql: `SELECT ${queue.sql.rowColumns} FROM ${queue.sql.q.table}`, params: [] });
    return new Map(rows.map((row) => [idKey(row.id), row]));
  }

  const names = async (store: Store, table: string) => ((await store.describeTable(table)) ?? []).map((c) => `${c.name} ${c.type}`);

  describe('claim state beside the table (migrate --beside)', () => {
    it('migrate --beside: table_a keeps its columns (it gains the pending index only), the claims table holds the claim state, a second run changes nothing; claim-state columns of its own are refused, and so is adding them beside a claims table', async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, generateTableARows(3), { ownIndex: false });
      const before = await names(store, 'table_a');
      const report = await migrateTable(store, { table: 'table_a', beside: true, with: ['leases', 'retries', 'results'] });
      expect(report.beside).toEqual({ table: besideTableName('table_a'), created: true, addedColumns: [] });
      // results' result column is the table's own, asked for: everything else went beside it.
      expect(report.addedColumns).toEqual(['result']);
      expect(report.createdIndex).not.toBeNull();
      const after = await names(store, 'table_a');
      expect(after.filter((c) => !c.startsWith('result '))).toEqual(before);
      expect(after).toHaveLength(before.length + 1);
      const queue = await Queue.open(store, { table: 'table_a' });
      expect(queue.table.beside).toBe(besideTableName('table_a'));
      expect(queue.table.features).toMatchObject({ leases: true, fencing: true, retries: true, backoff: true, errorHistory: true });
      const again = await migrateTable(store, { table: 'table_a', beside: true });
      expect(again.beside).toEqual({ table: besideTableName('table_a'), created: false, addedColumns: [] });
      expect([again.addedColumns, again.createdIndex]).toEqual([[], null]);
      await expect(migrateTable(store, { table: 'table_a', with: ['leases'] })).rejects.toThrow(/keeps its claim state in .*statusq/);

      await createTableA(env().fixtures, store, generateTableARows(3), { table: 'table_b', migrate: ['leases'] });
      const refusal = await migrateTable(store, { table: 'table_b', beside: true }).catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(ConfigError);
      expect(String(refusal)).toMatch(/claimed_at, worker_id.*one or the other/);
      expect(await store.describeTable(besideTableName('table_b'))).toBeNull();
      await env().closeStores();
    });

    for (const strategy of ['native', 'conditional-update'] as ClaimStrategy[]) {
      // The conditional update loses most candidates to the other claimers, so it races fewer rows in as many rounds.
      const count = Math.max(300, Math.round((strategy === 'native' ? 1000 : 400) * scale));
      it(`${strategy}: 4 workers, each on its own connection, over ${count} table_a rows with the claim state beside it: each row runs exactly its expected attempts, ends in its kind's status, and the claims table counts them`, async () => {
        const setup = await env().store('setup store');
        const rows = generateTableARows(count, { poisonEvery: 50, abuseEvery: 40, flakyEvery: 30 });
        await createTableA(env().fixtures, setup, rows);
        const before = await names(setup, 'table_a');
        await migrateTable(setup, { table: 'table_a', beside: true });
        const kinds = new Map(rows.map((row) => [String(row.id), row.kind]));
        const ran = new Map<string, number[]>();
        const go = deferred();
        const workers: StartedWorker[] = [];
        for (let i = 0; i < 4; i++) {
          const store = withLatency(await env().store(`worker store ${i + 1}`));
          workers.push(
            await env().startWorker(
              {
                store,
                table: { table: 'table_a' },
                claimStrategy: strategy,
                concurrency: 4,
                maxAttempts: MAX_ATTEMPTS,
                retryDelayMs: 20,
                maxRetryDelayMs: 100,
                leaseMs: 60_000,
                exitWhenEmpty: true,
                ...FAST,
                handler: async (job, ctx) => {
                  const id = idKey(job.id);
                  ran.set(id, [...(ran.get(id) ?? []), job.attempt]);
                  await new Promise((resolve) => setImmediate(resolve));
                  const kind = kinds.get(id);
                  if (kind === 'abuse') return ctx.abuse('flagged by the abuse rule');
                  if (kind === 'poison') throw new Error(`unreachable host for ${String(job.row.url)}`);
                  if (kind === 'flaky' && job.attempt === 1) throw new Error('temporary failure');
                  return undefined;
                },
              },
              undefined,
              undefined,
              go.promise,
            ),
          );
        }
        go.resolve();
        const results: WorkerCounters[] = await withDeadline(Promise.all(workers.map((w) => w.done)), 120_000, `4 workers to drain ${count} rows`);

        const problems: string[] = [];
        const queue = await Queue.open(setup, { table: 'table_a' });
        const read = await rowsWithClaims(queue);
        const codes = { ok: 1, flaky: 1, abuse: 2, poison: 0 } as const;
        for (const row of rows) {
          const id = String(row.id);
          const want = expectedAttempts(row.kind, true, MAX_ATTEMPTS);
          if (JSON.stringify(ran.get(id)) !== JSON.stringify(want)) problems.push(`${row.kind} row ${id} ran attempts ${JSON.stringify(ran.get(id))}, expected ${JSON.stringify(want)}`);
          const db = read.get(id);
          if (statusOf(db) !== codes[row.kind]) problems.push(`${row.kind} row ${id} ended in status ${statusOf(db)}`);
          const attempts = Number(db?.attempt_count ?? 0);
          const wantCount = row.kind === 'poison' ? MAX_ATTEMPTS : row.kind === 'flaky' ? 1 : 0;
          if (attempts !== wantCount) problems.push(`${row.kind} row ${id} has attempt_count ${attempts}, expected ${wantCount}`);
          if (row.kind === 'poison' && !/unreachable host/.test(String(db?.last_error))) problems.push(`poison row ${id} last_error ${String(db?.last_error)}`);
          if (toMs(db?.finished_at) === null) problems.push(`${row.kind} row ${id} has no finished_at`);
        }
        expect(problems.slice(0, 20)).toEqual([]);
        const t = tally(rows);
        expect(await countsOf(setup, 'table_a')).toEqual({ pending: 0, processing: 0, done: t.ok + t.flaky, abuse: t.abuse, failed: t.poison, other: 0 });
        const sum = (key: keyof WorkerCounters) => results.reduce((n, r) => n + r[key], 0);
        expect([sum('claimLost'), sum('retried'), sum('completed'), sum('abused'), sum('failed')]).toEqual([0, t.poison * (MAX_ATTEMPTS - 1) + t.flaky, t.ok + t.flaky, t.abuse, t.poison]);
        if (strategy === 'native' && setup.capabilities.skipLocked) expect(sum('candidatesLost')).toBe(0);
        // Nothing of the race reached the table's own columns.
        expect(await names(setup, 'table_a')).toEqual(before);
        await env().closeStores();
      });
    }

    it('chaos: supervised worker processes over table_a with the claim state beside it are SIGKILLed at random moments; every row ends right, nothing is left processing, re-runs only after a kill', async () => {
      const setup = await env().store('setup store');
      const run = await startTableARun(env(), setup, env().url, Math.max(600, Math.round(1200 * scale)), 3000, { beside: true });
      let seed = 11;
      const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
      const killed = new Set<number>();
      while (!run.ended() && killed.size < 3) {
        const live = run.supervisor.pids.filter((pid) => Date.now() - (run.startedAt.get(pid) ?? 0) > 500);
        if (live.length > 0 && (await countsOf(setup, 'table_a')).done >= 30) {
          const victim = live[Math.floor(random() * live.length)]!;
          process.kill(victim, 'SIGKILL');
          killed.add(victim);
        }
        await Promise.race([run.finished, new Promise((resolve) => setTimeout(resolve, 150 + random() * 300))]);
      }
      expect(await withDeadline(run.finished, 120_000, 'the supervised workers to empty the queue')).toBe(0);
      expect(killed.size).toBeGreaterThanOrEqual(1);
      const { problems, unconfirmed } = await checkTableARun(run, setup);
      expect(problems).toEqual([]);
      expect(unconfirmed.filter((u) => !killed.has(u.pid))).toEqual([]);
      // Every run is counted in the claims table, a killed one too (its launcher or its lease charged it): the
      // attempts counted plus the last run, which a success or an abuse does not count, cover the runs. A claim
      // killed before its handler started may be counted without a run (its launcher could not know it).
      const queue = await Queue.open(setup, { table: 'table_a' });
      const read = await rowsWithClaims(queue);
      const ledger = readLedgerFile(run.ledgerPath);
      const uncounted: string[] = [];
      let overcounted = 0;
      for (const row of run.rows) {
        const runs = ledger.get(String(row.id))?.attempts.length ?? 0;
        const db = read.get(String(row.id));
        const counted = Number(db?.attempt_count ?? 0) + (statusOf(db) === 1 || statusOf(db) === 2 ? 1 : 0);
        if (counted < runs) uncounted.push(`${row.kind} row ${row.id}: ${runs} runs, attempt_count ${String(db?.attempt_count)}`);
        overcounted += Math.max(0, counted - runs);
      }
      expect(uncounted.slice(0, 10)).toEqual([]);
      console.info(`[${options.name}] beside chaos: ${run.rows.length} rows, ${killed.size} processes killed, ${overcounted} claims counted that never ran`);
      await env().closeStores();
    });

    it('fencing: after its lease is taken over, every settle under the old token changes nothing in the table or the claims table; the application setting the status back to NULL fences the holder out the same way', async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, generateTableARows(2, { poisonEvery: 0, abuseEvery: 0 }), { beside: true });
      const queue = await Queue.open(store, { table: 'table_a' });
      const [first] = (await queue.claim({ limit: 1, token: 'A' })).rows;
      const id = first!.id as JobId;
      expect(first!.worker_id).toBe('A');
      await claimedAgo(store, id, 3_600_000);
      expect((await queue.reapExpired(60_000, 3)).charged).toBe(1);
      expect(await claimsRow(store, id)).toMatchObject({ worker_id: 'A' });
      expect(Number((await claimsRow(store, id))!.attempt_count)).toBe(1);
      const retaken = (await queue.claim({ limit: 2, token: 'B' })).rows.map((row) => idKey(row.id));
      expect(retaken).toContain(idKey(id));
      const held = await claimsRow(store, id);
      expect(held).toMatchObject({ worker_id: 'B' });

      const stale = [queue.sql.complete(id, 'A', null), queue.sql.giveUp(id, 'A', 'from A'), queue.sql.abuse(id, 'A', 'from A'), queue.sql.retry(id, 'A', 'from A', 0), queue.sql.release(id, 'A'), queue.sql.heartbeat(id, 'A')];
      for (const statement of stale) expect((await queue.apply([statement]))[0]!.affected, statement.sql).toBe(0);
      expect(statusOf((await rowsWithClaims(queue)).get(idKey(id)))).toBe(queue.table.codes.processing);
      expect(await claimsRow(store, id)).toEqual(held);
      expect((await queue.apply([queue.sql.heartbeat(id, 'B'), queue.sql.complete(id, 'B', null)])).map((r) => r.affected)).toEqual([1, 1]);
      expect(toMs((await claimsRow(store, id))!.finished_at)).not.toBeNull();

      // The application writes the status behind statusq's back: the other row is pending again while its
      // claims-table row still names B. B's settle is refused and writes nothing beside; the next claim is C's.
      const other = retaken.find((key) => key !== idKey(id))!;
      const d = store.dialect;
      await store.execute({ sql: `UPDATE ${d.quoteIdentifier('table_a')} SET ${d.quoteIdentifier('status')} = NULL WHERE ${d.quoteIdentifier('id')} = ${d.placeholder(1)}`, params: [Number(other)] });
      const untouched = await claimsRow(store, other);
      for (const statement of [queue.sql.complete(Number(other), 'B', null), queue.sql.giveUp(Number(other), 'B', 'late'), queue.sql.retry(Number(other), 'B', 'late', 0), queue.sql.heartbeat(Number(other), 'B')]) {
        expect((await queue.apply([statement]))[0]!.affected, statement.sql).toBe(0);
      }
      expect(await claimsRow(store, other)).toEqual(untouched);
      expect((await queue.claim({ limit: 1, token: 'C' })).rows.map((row) => [idKey(row.id), row.worker_id])).toEqual([[other, 'C']]);
      expect((await queue.apply([queue.sql.release(Number(other), 'B')]))[0]!.affected).toBe(0);
      await env().closeStores();
    });

    it("leases, poison and requeue: a dead claim is reaped with its attempt counted beside the table; one that used its attempts fails; a dead process's claims are charged; requeue starts failed rows over and returns processing rows whose lease ran out", async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, generateTableARows(4, { poisonEvery: 0, abuseEvery: 0 }), { beside: true });
      const queue = await Queue.open(store, { table: 'table_a' });
      const claimed = (await queue.claim({ limit: 2, token: 'dead:1' })).rows.map((row) => row.id as JobId);
      const [spent, fresh] = claimed as [JobId, JobId];
      for (const id of claimed) await claimedAgo(store, id, 3_600_000);
      const d = store.dialect;
      await store.execute({ sql: `UPDATE ${d.quoteIdentifier(besideTableName('table_a'))} SET ${d.quoteIdentifier('attempt_count')} = 2 WHERE ${d.quoteIdentifier('id')} = ${d.placeholder(1)}`, params: [spent as SqlValue] });
      const reaped = await queue.reapExpired(60_000, 3);
      expect(reaped.charged).toBe(2);
      expect(reaped.givenUp.map((row) => [idKey(row.id), row.attempt])).toEqual([[idKey(spent), 3]]);
      const after = await rowsWithClaims(queue);
      expect(statusOf(after.get(idKey(spent)))).toBe(queue.table.codes.failed);
      expect([Number(after.get(idKey(spent))!.attempt_count), toMs(after.get(idKey(spent))!.finished_at) !== null]).toEqual([3, true]);
      expect(String(after.get(idKey(spent))!.last_error)).toMatch(/lease expired/);
      expect([statusOf(after.get(idKey(fresh))), Number(after.get(idKey(fresh))!.attempt_count)]).toEqual([null, 1]);

      // A worker process that died: its claims (tokens `<workerId>:<n>`) cost one attempt each, at once.
      const byDead = (await queue.claim({ limit: 3, token: 'w9:1' })).rows.map((row) => idKey(row.id));
      expect(byDead).toHaveLength(3);
      const recovered = await queue.recoverDeadWorker({ workerId: 'w9', unstarted: [] }, 'worker process died', 3);
      expect([recovered.charged, recovered.givenUp]).toEqual([3, []]);
      expect((await countsOf(store, 'table_a')).pending).toBe(3);
      expect(Number((await rowsWithClaims(queue)).get(idKey(fresh))!.attempt_count)).toBe(2);

      expect(await queue.requeue('failed')).toBe(1);
      const requeued = (await rowsWithClaims(queue)).get(idKey(spent))!;
      expect([statusOf(requeued), Number(requeued.attempt_count), requeued.next_attempt_at ?? null]).toEqual([null, 0, null]);

      const live = (await queue.claim({ limit: 4, token: 'x' })).rows.map((row) => row.id as JobId);
      expect(live).toHaveLength(4);
      await claimedAgo(store, live[0], 3_600_000);
      const report = await queue.requeueReport('processing', { leaseMs: 60_000 });
      expect([report.requeued, report.live]).toEqual([1, 3]);
      const back = (await rowsWithClaims(queue)).get(idKey(live[0]))!;
      expect(statusOf(back)).toBeNull();
      expect(String(back.last_error)).toMatch(/requeued by an operator/);
      await env().closeStores();
    });

    it('delays, orphans and prune: a delayed row waits in the claims table; rows the application deleted leave claims-table rows that no claim reads, doctor counts and prune removes with the rows it deletes', async () => {
      const store = await env().store();
      const rows: TableARow[] = generateTableARows(3, { poisonEvery: 0, abuseEvery: 0 });
      await createTableA(env().fixtures, store, rows, { beside: true });
      const queue = await Queue.open(store, { table: 'table_a' });
      const d = store.dialect;
      const later = { id: 1000, date: rows[0]!.date, url: 'https://example.com/later', kind: 'ok' };
      expect(await queue.enqueue([later], { delayMs: 3_600_000 })).toEqual([1000]);
      expect(toMs((await claimsRow(store, 1000))!.next_attempt_at)! - Date.now()).toBeGreaterThan(3_500_000);
      const all = (await queue.claim({ limit: 10, token: 't' })).rows.map((row) => idKey(row.id));
      expect(all.sort()).toEqual(rows.map((row) => String(row.id)).sort());
      for (const id of all) expect((await queue.apply([queue.sql.complete(Number(id), 't', null)]))[0]!.affected).toBe(1);
      // Finished a minute ago by the database's clock, so an age of a second takes them without a wait.
      await store.execute({ sql: `UPDATE ${d.quoteIdentifier(besideTableName('table_a'))} SET ${d.quoteIdentifier('finished_at')} = ${d.nowPlusMs(d.placeholder(1))} WHERE ${d.quoteIdentifier('finished_at')} IS NOT NULL`, params: [-60_000] });
      // The application deletes a finished row: its claims-table row stays, and is an orphan.
      await store.execute({ sql: `DELETE FROM ${d.quoteIdentifier('table_a')} WHERE ${d.quoteIdentifier('id')} = ${d.placeholder(1)}`, params: [Number(all[0])] });
      expect(Number((await store.execute(queue.sql.countOrphanedClaims())).rows[0]!.n)).toBe(1);
      const dry = await pruneRows(queue, { statuses: ['done'], olderThanMs: 1000, dryRun: true });
      expect([dry.removed, dry.orphansRemoved]).toEqual([2, 1]);
      const pruned = await pruneRows(queue, { statuses: ['done'], olderThanMs: 1000, pauseMs: 0 });
      expect([pruned.removed, pruned.orphansRemoved]).toEqual([2, 1]);
      expect(await countsOf(store, 'table_a')).toMatchObject({ pending: 1, done: 0 });
      const { rows: left } = await store.execute({ sql: `SELECT ${d.quoteIdentifier('id')} AS id FROM ${d.quoteIdentifier(besideTableName('table_a'))}`, params: [] });
      expect(left.map((row) => idKey(row.id))).toEqual(['1000']);
      await env().closeStores();
    });
  });
}
