import { describe, expect, it } from 'vitest';
import { ConfigError, InstanceSlot, type Store } from '@statusq/core';
import { ensureSideTable } from '@statusq/core/adapter';
import { instanceHolders } from '@statusq/core/tools';
import { withLatency, waitFor, type TestEnv } from '../harness.js';
import { createJobs } from '../tables.js';

/** Moves a slot's lease into the past by hand, as if its holder had stalled past it. */
async function expireSlot(store: Store, slot: number): Promise<void> {
  const table = await ensureSideTable(store, 'jobs', 'statusq_instances');
  const q = (n: string) => store.dialect.quoteIdentifier(n);
  const result = await store.execute({
    sql: `UPDATE ${q(table)} SET ${q('expires_at')} = ${store.dialect.nowPlusMs(store.dialect.placeholder(1))} WHERE ${q('queue_table')} = ${store.dialect.placeholder(2)} AND ${q('slot')} = ${store.dialect.placeholder(3)}`,
    params: [-60_000, 'jobs', slot],
  });
  expect(result.affected).toBe(1);
}

export function instanceCases(env: () => TestEnv): void {
  describe('instance cap (InstanceSlot, work --max-instances)', () => {
    it('twelve instances racing on their own connections for a cap of 3: exactly three get a slot, each a different one; a freed slot goes to a waiter', async () => {
      const setup = await env().store('setup store');
      await createJobs(setup);
      // Made here: the racers' latency wrappers carry no schema support.
      await ensureSideTable(setup, 'jobs', 'statusq_instances');
      const stores = await Promise.all(Array.from({ length: 12 }, async (_, i) => withLatency(await env().store(`instance ${i + 1}`))));
      const slots = await Promise.all(stores.map((store) => InstanceSlot.acquire({ store, table: 'jobs', max: 3 })));
      const held = slots.filter((slot): slot is InstanceSlot => slot !== null);
      expect(held.map((slot) => slot.slot).sort()).toEqual([1, 2, 3]);
      expect((await instanceHolders(setup, 'jobs')).map((h) => ({ slot: h.slot, expired: h.expired }))).toEqual([1, 2, 3].map((slot) => ({ slot, expired: false })));

      // Two waiters, one freed slot: one of them gets it, the other waits on until its signal ends the wait.
      const stop = new AbortController();
      const waiters = [stores[11]!, stores[10]!].map((store) => InstanceSlot.acquire({ store, table: 'jobs', max: 3, wait: true, pollMs: 20, signal: stop.signal }));
      const freed = held[1]!.slot;
      await held[1]!.release();
      const first = await Promise.race(waiters);
      expect(first?.slot).toBe(freed);
      stop.abort();
      const results = await Promise.all(waiters);
      expect(results.filter((r) => r === null)).toHaveLength(1);
      for (const slot of [held[0]!, held[2]!, first!]) await slot.release();
      expect(await instanceHolders(setup, 'jobs')).toEqual([]);
      await env().closeStores();
    });

    it('a holder that stops renewing (its process died) frees its slot when its lease runs out on the database clock; a holder that stalled past its lease learns it lost the slot', async () => {
      const store = await env().store();
      await createJobs(store);
      const dying = await env().store('dying instance');
      const crashed = await InstanceSlot.acquire({ store: dying, table: 'jobs', max: 1, leaseMs: 1_000 });
      expect(crashed?.slot).toBe(1);
      expect(await InstanceSlot.acquire({ store, table: 'jobs', max: 1 })).toBeNull();
      // Its connection gone, its renewals fail; after a whole lease it says so, and the slot is free to take.
      const lost: string[] = [];
      await dying.close();
      const next = await InstanceSlot.acquire({ store, table: 'jobs', max: 1, wait: true, pollMs: 50, leaseMs: 1_000, signal: AbortSignal.timeout(15_000), onLost: (reason) => lost.push(reason) });
      expect(next?.slot).toBe(1);
      expect(await waitFor('the dead holder to count its slot lost', () => crashed!.lost, { timeoutMs: 5_000, intervalMs: 20 })).toMatch(/succeeded for a whole lease/);
      expect(await crashed!.release()).toBe(false);

      // Stalled: its lease is moved into the past by hand, another takes the slot, its next renewal finds that.
      // (A renewal landing between the two puts the lease back; then the pair is tried again.)
      const other = await env().store('other instance');
      const taker = await waitFor('another instance to take the stalled slot', async () => {
        await expireSlot(store, 1);
        return InstanceSlot.acquire({ store: other, table: 'jobs', max: 1 });
      }, { timeoutMs: 5_000, intervalMs: 10 });
      expect(taker.slot).toBe(1);
      await waitFor('the stalled holder to learn it lost its slot', () => lost.length > 0 || null, { timeoutMs: 5_000, intervalMs: 20 });
      expect(next!.lost).toMatch(/taken by another instance/);
      expect(lost).toHaveLength(1);
      // Releasing a lost slot frees nothing of the new holder's.
      expect(await next!.release()).toBe(false);
      expect((await instanceHolders(store, 'jobs')).map((h) => h.slot)).toEqual([1]);
      expect(await taker.release()).toBe(true);
      await env().closeStores();
    });

    it('refuses a bad cap or lease with a ConfigError before touching the database', async () => {
      const store = await env().store();
      await createJobs(store);
      for (const max of [0, -1, 1.5, 1001, Number.NaN, '2' as unknown as number]) {
        await expect(InstanceSlot.acquire({ store, table: 'jobs', max }), `max ${String(max)}`).rejects.toBeInstanceOf(ConfigError);
      }
      for (const leaseMs of [0, 999, 3_600_001, 1.5]) {
        await expect(InstanceSlot.acquire({ store, table: 'jobs', max: 1, leaseMs }), `lease ${leaseMs}`).rejects.toBeInstanceOf(ConfigError);
      }
      await expect(InstanceSlot.acquire({ store, table: 'jobs; DROP TABLE jobs', max: 1 })).rejects.toBeInstanceOf(ConfigError);
      expect(await store.describeTable('statusq_instances')).toBeNull();
      await env().closeStores();
    });
  });
}
