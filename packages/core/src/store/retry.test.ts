import { describe, expect, it } from 'vitest';
import { StoreError } from '../protocol/errors.js';
import { STORE_RETRY, backoffDelay, sleep, withStoreRetry } from './retry.js';

describe('backoffDelay', () => {
  it('stays within [half, all] of base * 2^step, capped at maxMs', () => {
    for (let step = 0; step < 12; step++) {
      const full = Math.min(10_000, 100 * 2 ** step);
      expect(backoffDelay(step, { baseMs: 100, maxMs: 10_000, random: () => 0 })).toBe(Math.round(full / 2));
      expect(backoffDelay(step, { baseMs: 100, maxMs: 10_000, random: () => 0.999999 })).toBeLessThanOrEqual(full);
      expect(backoffDelay(step, { baseMs: 100, maxMs: 10_000, random: () => 0.999999 })).toBeGreaterThanOrEqual(Math.round(full * 0.99));
      for (let i = 0; i < 50; i++) {
        const d = backoffDelay(step, { baseMs: 100, maxMs: 10_000 });
        expect(d).toBeGreaterThanOrEqual(Math.floor(full / 2));
        expect(d).toBeLessThanOrEqual(full);
      }
    }
  });

  it('doubles per step until the cap, and a huge step neither overflows nor passes the cap', () => {
    const mid = (step: number) => backoffDelay(step, { baseMs: 10, maxMs: 1000, random: () => 0.5 });
    expect([0, 1, 2, 3].map(mid)).toEqual([8, 15, 30, 60]);
    expect(mid(10)).toBe(750);
    expect(backoffDelay(1e9, { baseMs: 10, maxMs: 1000, random: () => 1 })).toBe(1000);
    expect(Number.isFinite(backoffDelay(5000, { baseMs: 1, maxMs: Number.MAX_SAFE_INTEGER, random: () => 1 }))).toBe(true);
    expect(backoffDelay(3, { baseMs: 0, maxMs: 1000 })).toBe(0);
  });
});

describe('withStoreRetry', () => {
  it('retries Busy, WriteConflict and ConnectionLost up to the attempt limit, then throws the last error', async () => {
    for (const kind of ['Busy', 'WriteConflict', 'ConnectionLost'] as const) {
      let calls = 0;
      const retried: unknown[] = [];
      const result = await withStoreRetry(
        async () => {
          if (++calls < 3) throw new StoreError(kind, 'try again');
          return 'ok';
        },
        { attempts: 5, baseMs: 1, maxMs: 2, onRetry: (e) => retried.push(e) },
      );
      expect(result).toBe('ok');
      expect(calls).toBe(3);
      expect(retried).toHaveLength(2);
    }
    let calls = 0;
    await expect(
      withStoreRetry(
        async () => {
          calls++;
          throw new StoreError('Busy', 'locked');
        },
        { attempts: 4, baseMs: 1, maxMs: 2 },
      ),
    ).rejects.toMatchObject({ kind: 'Busy' });
    expect(calls).toBe(4);
  });

  it('does not retry other errors', async () => {
    for (const error of [new StoreError('Unknown', 'syntax'), new StoreError('UniqueViolation', 'dup'), new Error('plain')]) {
      let calls = 0;
      await expect(
        withStoreRetry(
          async () => {
            calls++;
            throw error;
          },
          { attempts: 5, baseMs: 1 },
        ),
      ).rejects.toBe(error);
      expect(calls).toBe(1);
    }
  });
});

describe('STORE_RETRY.write', () => {
  it('runs an application write again after a conflict that rolled it back, never after a lost connection (its commit may have happened)', async () => {
    const policy = { ...STORE_RETRY.write, baseMs: 1, maxMs: 1 };
    let calls = 0;
    const conflictOnce = () => (calls++ === 0 ? Promise.reject(new StoreError('WriteConflict', 'deadlock', '1213')) : Promise.resolve('ok'));
    expect(await withStoreRetry(conflictOnce, policy)).toBe('ok');
    expect(calls).toBe(2);
    let lostCalls = 0;
    const lost = new StoreError('ConnectionLost', 'gone during COMMIT', 'ECONNRESET');
    await expect(withStoreRetry(() => (lostCalls++, Promise.reject(lost)), policy)).rejects.toBe(lost);
    expect(lostCalls).toBe(1);
  });
});

describe('sleep', () => {
  it('resolves at once when its signal aborts, or is already aborted', async () => {
    const controller = new AbortController();
    const waiting = sleep(60_000, controller.signal);
    controller.abort();
    await waiting;
    await sleep(60_000, controller.signal);
  });
});
