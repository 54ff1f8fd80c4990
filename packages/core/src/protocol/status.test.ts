import { describe, expect, it } from 'vitest';
import { ConfigError, IllegalTransitionError } from './errors.js';
import {
  DEFAULT_STATUS_CODES,
  REQUEUE_SOURCES,
  STATUS_NAMES,
  TRANSITIONS,
  assertTransition,
  isLegalTransition,
  isStatusName,
  requeueCause,
  resolveStatusCodes,
  sourcesOf,
  statusCode,
  statusName,
  type StatusName,
  type TransitionCause,
} from './status.js';

const STATES: StatusName[] = ['pending', 'processing', 'done', 'abuse', 'failed'];

/** The design's legal moves, written out independently of TRANSITIONS. */
const LEGAL = new Set([
  'claim:pending>processing',
  'heartbeat:processing>processing',
  'progress:processing>processing',
  'complete:processing>done',
  'giveUp:processing>failed',
  'abuse:pending>abuse',
  'abuse:processing>abuse',
  'retry:processing>pending',
  'release:processing>pending',
  'leaseExpired:processing>pending',
  'leaseExpired:processing>failed',
  'ownerDied:processing>pending',
  'ownerDied:processing>failed',
  'requeue:failed>pending',
  'requeue:abuse>pending',
  'requeueProcessing:processing>pending',
  'cancel:pending>failed',
  'cancel:processing>failed',
]);

describe('status transition table', () => {
  const causes = Object.keys(TRANSITIONS) as TransitionCause[];

  it('has exactly the legal moves of the design, and no others', () => {
    const actual = new Set(causes.flatMap((cause) => TRANSITIONS[cause].map(([from, to]) => `${cause}:${from}>${to}`)));
    expect(actual).toEqual(LEGAL);
    expect([...causes].sort()).toEqual(['abuse', 'cancel', 'claim', 'complete', 'giveUp', 'heartbeat', 'leaseExpired', 'ownerDied', 'progress', 'release', 'requeue', 'requeueProcessing', 'retry']);
    expect(STATUS_NAMES).toEqual(STATES);
  });

  it('isLegalTransition and assertTransition agree with it for every (cause, from, to)', () => {
    for (const cause of causes) {
      for (const from of STATES) {
        for (const to of STATES) {
          const legal = LEGAL.has(`${cause}:${from}>${to}`);
          expect(isLegalTransition(from, to, cause), `${cause}:${from}>${to}`).toBe(legal);
          if (legal) {
            expect(() => assertTransition(from, to, cause)).not.toThrow();
          } else {
            let thrown: unknown;
            try {
              assertTransition(from, to, cause);
            } catch (error) {
              thrown = error;
            }
            expect(thrown).toBeInstanceOf(IllegalTransitionError);
            expect(thrown).toMatchObject({ from, to, code: 'ILLEGAL_TRANSITION' });
            expect((thrown as Error).message).toContain(cause);
          }
        }
      }
    }
    // claim, heartbeat, progress, complete, giveUp, 2x abuse, retry, release, 2x ownerDied, 2x leaseExpired, 2x requeue, requeueProcessing, 2x cancel
    expect(causes.reduce((n, cause) => n + TRANSITIONS[cause].length, 0)).toBe(18);
    for (const [from, to, cause] of [
      ['done', 'failed', 'cancel'],
      ['failed', 'failed', 'cancel'],
      ['done', 'pending', 'requeue'],
      ['done', 'pending', 'requeueProcessing'],
      ['pending', 'done', 'complete'],
      ['pending', 'pending', 'retry'],
      ['processing', 'processing', 'claim'],
      ['pending', 'processing', 'heartbeat'],
      ['failed', 'processing', 'claim'],
    ] as const) {
      expect(() => assertTransition(from, to, cause)).toThrow(IllegalTransitionError);
    }
  });

  it('never lets a row leave done, and never moves a row into processing except by a claim of a pending row (a heartbeat or a progress report keeps it there)', () => {
    for (const cause of causes) {
      for (const to of STATES) expect(isLegalTransition('done', to, cause)).toBe(false);
      for (const from of STATES) {
        const legal = (cause === 'claim' && from === 'pending') || ((cause === 'heartbeat' || cause === 'progress') && from === 'processing');
        expect(isLegalTransition(from, 'processing', cause), `${cause}:${from}>processing`).toBe(legal);
      }
    }
  });

  it('requeueCause names the requeue of failed, abuse and processing rows and refuses every other state', () => {
    expect(REQUEUE_SOURCES).toEqual(['failed', 'abuse', 'processing']);
    expect(requeueCause('failed')).toBe('requeue');
    expect(requeueCause('abuse')).toBe('requeue');
    expect(requeueCause('processing')).toBe('requeueProcessing');
    for (const from of ['done', 'pending'] as const) {
      let thrown: unknown;
      try {
        requeueCause(from);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(IllegalTransitionError);
      expect(thrown).toMatchObject({ from, to: 'pending', code: 'ILLEGAL_TRANSITION' });
      expect((thrown as Error).message).toBe(`illegal status transition ${from} -> pending (requeue): only failed, abuse or processing rows can be requeued`);
    }
    expect(isStatusName('done')).toBe(true);
    expect(isStatusName('stuck')).toBe(false);
  });

  it('sourcesOf gives the guard states of each cause, optionally narrowed by target', () => {
    expect(sourcesOf('claim')).toEqual(['pending']);
    expect(sourcesOf('abuse')).toEqual(['pending', 'processing']);
    expect(sourcesOf('requeue')).toEqual(['failed', 'abuse']);
    expect(sourcesOf('requeueProcessing')).toEqual(['processing']);
    expect(sourcesOf('heartbeat')).toEqual(['processing']);
    expect(sourcesOf('leaseExpired')).toEqual(['processing']);
    expect(sourcesOf('leaseExpired', 'failed')).toEqual(['processing']);
    expect(sourcesOf('complete', 'failed')).toEqual([]);
  });
});

describe('status codes', () => {
  it("default to the seed's NULL/9/1/2/0 and map both ways", () => {
    expect(DEFAULT_STATUS_CODES).toEqual({ processing: 9, done: 1, abuse: 2, failed: 0 });
    for (const name of STATES) expect(statusName(statusCode(name, DEFAULT_STATUS_CODES), DEFAULT_STATUS_CODES)).toBe(name);
    expect(statusCode('pending', DEFAULT_STATUS_CODES)).toBeNull();
    expect(statusName(7, DEFAULT_STATUS_CODES)).toBeUndefined();
  });

  it('can be remapped for a legacy table, but each state needs its own integer code', () => {
    const codes = resolveStatusCodes({ processing: 5, done: 6 });
    expect(codes).toEqual({ processing: 5, done: 6, abuse: 2, failed: 0 });
    expect(statusName(5, codes)).toBe('processing');
    expect(() => resolveStatusCodes({ done: 9 })).toThrow(ConfigError);
    expect(() => resolveStatusCodes({ failed: 1.5 })).toThrow(ConfigError);
    expect(() => resolveStatusCodes({ abuse: Number.NaN })).toThrow(ConfigError);
    expect(resolveStatusCodes(undefined)).toEqual(DEFAULT_STATUS_CODES);
  });
});
