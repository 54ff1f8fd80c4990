/**
 * The hand-written timestamptz reader against what it replaces (pg's postgres-date), over the shapes a UTC
 * session prints and the ones it hands back to postgres-date.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { parseTimestamptz } from './postgres-types.js';

const anyShape = pg.types.getTypeParser(1184, 'text') as (text: string) => unknown;

/** A UTC session's text for `ms`, with `digits` fraction digits (PostgreSQL drops trailing zeros; any count parses). */
function printed(ms: number, digits: number, micros = 0): string {
  const iso = new Date(ms).toISOString();
  const fraction = `${iso.slice(20, 23)}${String(micros).padStart(3, '0')}`.slice(0, digits);
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${digits > 0 ? `.${fraction}` : ''}+00`;
}

describe('parseTimestamptz', () => {
  it('reads every UTC shape to the millisecond postgres-date means, across years 100 to 9999', () => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const from = Date.UTC(100, 0, 1);
    const to = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
    for (let i = 0; i < 20_000; i++) {
      const ms = Math.floor(from + random() * (to - from));
      const digits = i % 7;
      const text = printed(ms, digits, Math.floor(random() * 1000));
      const unit = 10 ** (3 - Math.min(digits, 3));
      const expected = Math.floor(ms / unit) * unit;
      const parsed = parseTimestamptz(text);
      expect(parsed, text).toBeInstanceOf(Date);
      expect((parsed as Date).getTime(), text).toBe(expected);
      // postgres-date agrees except where its float arithmetic lands just under a whole millisecond.
      const theirs = (anyShape(text) as Date).getTime();
      expect(Math.abs(theirs - expected), text).toBeLessThanOrEqual(1);
    }
  });

  it('hands every other shape to postgres-date unchanged', () => {
    for (const text of [
      '2026-12-02 10:00:00+05:30',
      '2026-12-02 10:00:00.5-08',
      '2026-12-02 10:00:00+01',
      '0050-06-01 00:00:00+00',
      '0001-01-01 00:00:00+00 BC',
      '12026-01-01 00:00:00+00',
      'infinity',
      '-infinity',
      '2026-12-02T10:00:00+00',
      '2026-12-02 10:00:00.+00',
      '2026-12-02 1O:00:00+00',
      '2026-12-02 10:00:00.1234567+00',
    ]) {
      const ours = parseTimestamptz(text);
      const theirs = anyShape(text);
      if (theirs instanceof Date) expect((ours as Date).getTime(), text).toBe(theirs.getTime());
      else expect(ours, text).toEqual(theirs);
    }
  });
});
