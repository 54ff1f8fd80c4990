import { describe, expect, it } from 'vitest';
import { raceDeadline, settlesWithin, untilAborted } from './deadline.js';

describe('raceDeadline', () => {
  it('rejects with the error of expire() once the deadline passes, even when the call never settles', async () => {
    let expired = 0;
    const never = new Promise<string>(() => undefined);
    const started = Date.now();
    await expect(
      raceDeadline(never, 20, () => {
        expired++;
        return new Error('too slow');
      }),
    ).rejects.toThrow('too slow');
    expect(expired).toBe(1);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('settles like the call when it is in time, and never runs expire() then', async () => {
    let expired = 0;
    const expire = () => {
      expired++;
      return new Error('expired');
    };
    await expect(raceDeadline(Promise.resolve('ok'), 50, expire)).resolves.toBe('ok');
    await expect(raceDeadline(Promise.reject(new Error('own failure')), 50, expire)).rejects.toThrow('own failure');
    // Past the deadline the timer is gone: nothing fires late.
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(expired).toBe(0);
  });

  it('ignores what the call does after the deadline', async () => {
    let settle!: (value: string) => void;
    const late = new Promise<string>((resolve) => (settle = resolve));
    const raced = raceDeadline(late, 10, () => new Error('deadline'));
    await expect(raced).rejects.toThrow('deadline');
    settle('too late');
    await expect(raced).rejects.toThrow('deadline');
  });
});

describe('settlesWithin', () => {
  it('says whether a promise settled (resolved or rejected) in time', async () => {
    expect(await settlesWithin(Promise.resolve(1), 50)).toBe(true);
    expect(await settlesWithin(Promise.reject(new Error('no')), 50)).toBe(true);
    expect(await settlesWithin(new Promise(() => undefined), 10)).toBe(false);
  });
});

describe('untilAborted', () => {
  it("settles like the promise until the signal aborts, then with 'aborted' at once, leaving no listener behind", async () => {
    const quiet = new AbortController();
    await expect(untilAborted(Promise.resolve('value'), quiet.signal)).resolves.toBe('value');
    await expect(untilAborted(Promise.reject(new Error('own failure')), quiet.signal)).rejects.toThrow('own failure');

    const stopping = new AbortController();
    let removed = 0;
    const remove = stopping.signal.removeEventListener.bind(stopping.signal);
    stopping.signal.removeEventListener = (...args: Parameters<AbortSignal['removeEventListener']>) => {
      removed++;
      remove(...args);
    };
    await untilAborted(Promise.resolve(1), stopping.signal);
    expect(removed).toBe(1);

    let fail!: (error: Error) => void;
    const pending = new Promise<string>((_resolve, reject) => (fail = reject));
    const raced = untilAborted(pending, stopping.signal);
    stopping.abort();
    await expect(raced).resolves.toBe('aborted');
    // The call's later failure is observed by untilAborted: no unhandled rejection reaches the process.
    fail(new Error('socket cut by shutdown'));
    await expect(untilAborted(new Promise(() => undefined), stopping.signal)).resolves.toBe('aborted');
  });
});
