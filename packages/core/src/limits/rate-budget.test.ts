import { describe, expect, it } from 'vitest';
import { ConfigError } from '../protocol/errors.js';
import { parseRateLimit, validateRateLimit } from './rate-budget.js';

describe('parseRateLimit', () => {
  it('reads jobs per second, minute or hour', () => {
    expect(parseRateLimit('50/s')).toEqual({ count: 50, periodMs: 1_000 });
    expect(parseRateLimit(' 300 / m ')).toEqual({ count: 300, periodMs: 60_000 });
    expect(parseRateLimit('1000/h')).toEqual({ count: 1000, periodMs: 3_600_000 });
  });

  it('refuses anything else with a ConfigError naming the flag', () => {
    for (const text of ['50', '50/d', '0/s', '-1/s', '1.5/s', '1000001/s', 's/50', '', '50/S']) {
      expect(() => parseRateLimit(text, '--rate'), text).toThrow(ConfigError);
    }
    expect(() => parseRateLimit('5/d', '--rate')).toThrow(/^--rate must be a number of jobs from 1 to 1000000 per s, m or h/);
  });

  it('checks a limit given as an object', () => {
    expect(validateRateLimit({ count: 5, periodMs: 250 })).toEqual({ count: 5, periodMs: 250 });
    for (const bad of [null, {}, { count: 5 }, { count: 0, periodMs: 1000 }, { count: 1, periodMs: 0 }, { count: 1.5, periodMs: 1000 }, '50/s']) {
      expect(() => validateRateLimit(bad), JSON.stringify(bad)).toThrow(ConfigError);
    }
  });
});
