import { describe, expect, it } from 'vitest';
import { raceDeadline, settlesWithin } from './deadline.js';

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
