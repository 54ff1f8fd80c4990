import { describe, expect, it } from 'vitest';
import { DELAY_LIMIT, MAX_DELAY_MS, MAX_DURATION_MS, formatDuration, parseDuration } from './duration.js';
import { ConfigError } from './errors.js';

describe('parseDuration', () => {
  it('parses ms, s, m, h and d', () => {
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('5m')).toBe(300_000);
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('2d')).toBe(172_800_000);
    expect(parseDuration('0s')).toBe(0);
    expect(parseDuration('1.5s')).toBe(1500);
    expect(parseDuration(' 10 s ')).toBe(10_000);
    expect(parseDuration('0.0004s')).toBe(0);
  });

  it('refuses a bare number in text, naming the fix (it used to mean milliseconds: --lease 30 was 30 ms)', () => {
    expect(() => parseDuration('30', '--lease')).toThrow(ConfigError);
    expect(() => parseDuration('30', '--lease')).toThrow('--lease 30 has no unit: write 30s or 30ms');
    expect(() => parseDuration('0', '--stop-timeout')).toThrow('--stop-timeout 0 has no unit');
  });

  it('accepts up to 24 days and refuses longer (Node fires a longer timer after 1 ms)', () => {
    expect(MAX_DURATION_MS).toBe(2_073_600_000);
    expect(MAX_DURATION_MS).toBeLessThan(2 ** 31 - 1);
    expect(parseDuration('24d')).toBe(MAX_DURATION_MS);
    expect(parseDuration(`${MAX_DURATION_MS}ms`)).toBe(MAX_DURATION_MS);
    expect(parseDuration(MAX_DURATION_MS)).toBe(MAX_DURATION_MS);
    for (const text of ['100d', '30d', '24.001d', '577h', `${MAX_DURATION_MS + 1}ms`]) {
      expect(() => parseDuration(text, '--lease'), text).toThrow(/is too long: at most 24d/);
    }
    expect(() => parseDuration(MAX_DURATION_MS + 1, 'lease')).toThrow(/from 0 to 2073600000/);
  });

  it('a job delay is no timer: up to 100 years with DELAY_LIMIT, and the message says which bound', () => {
    expect(parseDuration('90d', '--delay', DELAY_LIMIT)).toBe(90 * 86_400_000);
    expect(parseDuration('36500d', '--delay', DELAY_LIMIT)).toBe(MAX_DELAY_MS);
    expect(() => parseDuration('36501d', '--delay', DELAY_LIMIT)).toThrow('--delay 36501d is too long: at most 36500d (a delay is kept for at most 100 years)');
    expect(() => parseDuration(-1, 'delayMs', DELAY_LIMIT)).toThrow(/delayMs must be a number of milliseconds from 0 to 3153600000000/);
  });

  it('passes through non-negative finite numbers of milliseconds', () => {
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
