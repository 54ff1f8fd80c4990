import { describe, expect, it } from 'vitest';
import { splitToFit, statementBytes, fitsStatementLimit } from './statement-size.js';
import type { Statement } from '../store/store.js';

const limit = (bytes: number) => ({ bytes, setting: 'max_allowed_packet = test', fix: 'raise it' });
const inList = (ids: readonly number[]): Statement => ({ sql: `UPDATE t SET s = 1 WHERE id IN (${ids.map(() => '?').join(', ')})`, params: [...ids] });

describe('statementBytes', () => {
  it('counts the SQL, quoted strings with their escapes, numbers as digits, NULL, and UTF-8', () => {
    expect(statementBytes({ sql: 'SELECT ?', params: [null] })).toBe(8 + 4);
    expect(statementBytes({ sql: 'SELECT ?', params: [12345] })).toBe(8 + 5);
    expect(statementBytes({ sql: 'SELECT ?', params: [12345678901234567890n] })).toBe(8 + 20);
    // It's -> 'It\\'s': 4 bytes, one escape, two quotes.
    expect(statementBytes({ sql: 'SELECT ?', params: ["It's"] })).toBe(8 + 4 + 1 + 2);
    expect(statementBytes({ sql: 'SELECT ?', params: ['a\\b\n"\0'] })).toBe(8 + 6 + 4 + 2);
    // é is 2 bytes in UTF-8, 😀 4.
    expect(statementBytes({ sql: "SELECT 'é', ?", params: ['😀'] })).toBe(14 + 4 + 2);
  });

  it('is within the limit or not', () => {
    expect(fitsStatementLimit(inList([1, 2, 3]), undefined)).toBe(true);
    expect(fitsStatementLimit(inList([1, 2, 3]), limit(10))).toBe(false);
  });
});

describe('splitToFit', () => {
  it('keeps a list that fits whole, and splits one that does not into ordered runs that each fit', () => {
    const ids = Array.from({ length: 1000 }, (_, i) => 1_000_000_000 + i);
    expect(splitToFit(ids, inList, undefined)).toHaveLength(1);
    expect(splitToFit(ids, inList, limit(1_000_000))).toHaveLength(1);
    const runs = splitToFit(ids, inList, limit(2_000));
    expect(runs.length).toBeGreaterThan(6);
    expect(runs.flatMap((r) => r.items)).toEqual(ids);
    for (const run of runs) {
      expect(statementBytes(run.statement)).toBeLessThanOrEqual(2_000);
      expect(run.statement).toEqual(inList(run.items));
    }
  });

  it('stops at single items: one that cannot fit comes back alone, for the store to refuse', () => {
    const runs = splitToFit([1, 2, 3], inList, limit(5));
    expect(runs.map((r) => r.items)).toEqual([[1], [2], [3]]);
    expect(splitToFit([], inList, limit(5))).toEqual([{ items: [], statement: inList([]) }]);
  });
});
