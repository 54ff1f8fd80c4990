import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.js';
import { ConfigError } from './errors.js';

describe('parseDuration', () => {
  it('parses ms, s, m, h, d and bare milliseconds', () => {
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('5m')).toBe(300_000);
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('2d')).toBe(172_800_000);
    expect(parseDuration('1500')).toBe(1500);
    expect(parseDuration('0')).toBe(0);
    expect(parseDuration('1.5s')).toBe(1500);
    expect(parseDuration(' 10 s ')).toBe(10_000);
    expect(parseDuration('0.0004s')).toBe(0);
  });

  it('passes through non-negative finite numbers', () => {
    expect(parseDuration(0)).toBe(0);
    expect(parseDuration(42.5)).toBe(42.5);
  });

  it('rejects anything else with a ConfigError that names the option', () => {
    for (const text of ['', 'abc', '-1s', '1w', '1 sec', 's', '1e3', '1,5s', '10 ms ms', 'Infinity']) {
      expect(() => parseDuration(text, 'lease'), JSON.stringify(text)).toThrow(ConfigError);
    }
    for (const n of [-1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => parseDuration(n, 'lease')).toThrow(ConfigError);
    expect(() => parseDuration('soon', 'lease')).toThrow(/invalid lease "soon"/);
    expect(() => parseDuration(-5, 'heartbeat')).toThrow(/heartbeat/);
  });
});

describe('formatDuration', () => {
  it('uses the largest unit that states the duration exactly, and parses back to it', () => {
    const cases: Array<[number, string]> = [[300_000, '5m'], [30_000, '30s'], [90_000, '90s'], [1500, '1500ms'], [0, '0ms'], [86_400_000, '1d'], [3_600_000, '1h']];
    for (const [ms, text] of cases) {
      expect(formatDuration(ms)).toBe(text);
      expect(parseDuration(text)).toBe(ms);
    }
  });
});
