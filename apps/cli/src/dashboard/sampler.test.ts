// The throughput sampler on its own, with short intervals: one count at a time, an interval that follows
// what a count costs, a bounded window, and no timer left once nobody asks. The clock is vitest's fake one:
// what is asserted is the sampler's schedule, which a loaded machine must not change (it did: a count that
// took longer under load made the interval longer than asserted).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { StatusCounts } from '@statusq/core';
import { ThroughputSampler } from './sampler.js';

/** Moves the fake clock on a millisecond at a time until `condition` holds, for at most a minute of it. */
async function advanceUntil(what: string, condition: () => boolean): Promise<void> {
  for (let ms = 0; !condition(); ms++) {
    if (ms >= 60_000) throw new Error(`${what}: not within 60 s of fake time`);
    await vi.advanceTimersByTimeAsync(1);
  }
}

/** Counts that take `ms` each; `done` goes up by one per count, so samples are told apart. */
function slowCounts(ms: () => number) {
  const state = { calls: 0, running: 0, maxRunning: 0, fail: false };
  const count = async (): Promise<StatusCounts> => {
    state.calls++;
    state.running++;
    state.maxRunning = Math.max(state.maxRunning, state.running);
    try {
      await new Promise((resolve) => setTimeout(resolve, ms()));
      if (state.fail) throw new Error('database down');
      return { pending: 1, processing: 2, done: state.calls, abuse: 3, failed: 4, other: 5 };
    } finally {
      state.running--;
    }
  };
  return { state, count };
}

describe('ThroughputSampler', () => {
  const open: ThroughputSampler[] = [];
  const sampler = (...args: ConstructorParameters<typeof ThroughputSampler>) => {
    const made = new ThroughputSampler(...args);
    open.push(made);
    return made;
  };
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
  });
  afterEach(async () => {
    let closed = false;
    void Promise.all(open.splice(0).map((s) => s.close())).then(() => (closed = true));
    await advanceUntil('the samplers to close', () => closed);
    vi.useRealTimers();
  });

  it('samples on its own once asked, one count at a time, each sample the counts without other', async () => {
    const { state, count } = slowCounts(() => 5);
    const s = sampler(count, { minIntervalMs: 1, costFactor: 1 });
    expect(s.active).toBe(false);
    expect(s.read().samples).toEqual([]);
    expect(s.active).toBe(true);
    // Reads while a count runs start no second one.
    for (let i = 0; i < 20; i++) s.read();
    await advanceUntil('five samples', () => s.read().samples.length >= 5);
    expect(state.maxRunning).toBe(1);
    const { samples } = s.read();
    expect(samples[0]).toEqual({ t: expect.any(Number), done: 1, failed: 4, abuse: 3, pending: 1, processing: 2 });
    expect(samples.map((x) => x.done)).toEqual(samples.map((_, i) => i + 1));
  });

  it('waits at least costFactor times what the last count took, and never less than minIntervalMs', async () => {
    const { count } = slowCounts(() => 30);
    const s = sampler(count, { minIntervalMs: 5, costFactor: 3 });
    s.read();
    await advanceUntil('three samples', () => s.read().samples.length >= 3);
    const { intervalMs, samples } = s.read();
    expect(intervalMs).toBe(90);
    // Each sample is stamped when its count ends; the next count starts an interval later and takes 30 ms more.
    for (let i = 1; i < samples.length; i++) expect(samples[i]!.t - samples[i - 1]!.t).toBe(90 + 30);

    const fast = sampler(slowCounts(() => 0).count, { minIntervalMs: 40, costFactor: 1 });
    fast.read();
    await advanceUntil('a sample', () => fast.read().samples.length >= 1);
    expect(fast.read().intervalMs).toBe(40);
  });

  it('keeps only the window: old samples go, and never more than window / minIntervalMs + 1', async () => {
    const { count } = slowCounts(() => 1);
    const s = sampler(count, { minIntervalMs: 10, costFactor: 1, windowMs: 60 });
    s.read();
    await advanceUntil('more counts than the window holds', () => (s.read().samples.at(-1)?.done ?? 0) >= 20);
    const { samples } = s.read();
    expect(samples.length).toBeLessThanOrEqual(7);
    expect(samples.at(-1)!.t - samples[0]!.t).toBeLessThanOrEqual(60);
    expect(samples[0]!.done).toBeGreaterThan(1);
  });

  it('stops when nobody asked for idleMs, and starts again on the next read', async () => {
    const { state, count } = slowCounts(() => 1);
    const s = sampler(count, { minIntervalMs: 5, costFactor: 1, idleMs: 50 });
    s.read();
    await advanceUntil('sampling to stop once idle', () => !s.active);
    const calls = state.calls;
    expect(calls).toBeGreaterThan(1);
    // Stopped for good until asked: nothing scheduled, so the count stays.
    expect(s.active).toBe(false);
    expect(state.calls).toBe(calls);
    s.read();
    expect(s.active).toBe(true);
    await advanceUntil('a count after the restart', () => state.calls > calls);
  });

  it('a failed count is no sample and is reported; sampling goes on and recovers', async () => {
    const { state, count } = slowCounts(() => 1);
    const errors: unknown[] = [];
    state.fail = true;
    const s = sampler(count, { minIntervalMs: 5, costFactor: 1, onError: (error) => errors.push(error) });
    s.read();
    await advanceUntil('two failed counts', () => errors.length >= 2);
    expect(s.read().samples).toEqual([]);
    expect(String(errors[0])).toBe('Error: database down');
    state.fail = false;
    await advanceUntil('a sample after the recovery', () => s.read().samples.length > 0);
  });

  it('close waits for the count in flight and schedules nothing after it', async () => {
    const { state, count } = slowCounts(() => 30);
    const s = sampler(count, { minIntervalMs: 1, costFactor: 1 });
    s.read();
    expect(state.running).toBe(1);
    let closed = false;
    void s.close().then(() => (closed = true));
    await advanceUntil('the count in flight to end', () => closed);
    expect(state.running).toBe(0);
    expect(s.active).toBe(false);
    s.read();
    expect(s.active).toBe(false);
    expect(state.calls).toBe(1);
  });
});
