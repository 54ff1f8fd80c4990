import { describe, expect, it } from 'vitest';
import { ConfigError, SchemaError } from './errors.js';
import { resolveTable } from './table.js';
import { columnOverflow, idFitsColumn, integerRangeOfBits, type ColumnInfo } from './columns.js';

const cols = (...names: string[]): ColumnInfo[] =>
  names.map((name) => ({ name, type: 'integer', unique: name.toLowerCase() === 'id', integer: true, maxLength: null }));
const enc = () => 'epochMs' as const;

describe('resolveTable', () => {
  it('is a SchemaError when the table or a required column is missing, naming it', () => {
    expect(() => resolveTable({ table: 'jobs' }, null, enc)).toThrow(SchemaError);
    expect(() => resolveTable({ table: 'jobs' }, null, enc)).toThrow(/"jobs" does not exist/);
    expect(() => resolveTable({ table: 'jobs' }, cols('id', 'date'), enc)).toThrow(/status column "status"/);
    expect(() => resolveTable({ table: 'jobs' }, cols('id', 'status'), enc)).toThrow(/order column "date"/);
    expect(() => resolveTable({ table: 'jobs' }, cols('date', 'status'), enc)).toThrow(/id column "id"/);
    expect(() => resolveTable({ table: 'jobs', orderColumn: 'created' }, cols('id', 'date', 'status'), enc)).toThrow(SchemaError);
    expect(() => resolveTable({ table: 'jobs', columns: { claimedAt: 'lease_start' } }, cols('id', 'date', 'status'), enc)).toThrow(/lease_start/);
  });

  it('is a ConfigError, before looking at columns, for bad names and options', () => {
    const bad = [
      { table: '1jobs' },
      { table: 'jobs', idColumn: 'a-b' },
      { table: 'jobs', statusColumn: 'x'.repeat(64) },
      { table: 'jobs', orderColumn: 'date; DROP TABLE jobs' },
      { table: 'jobs', order: 'random' as never },
      { table: 'jobs', columns: { leaseStart: 'x' } as never },
      { table: 'jobs', columns: { claimedAt: 'bad name' } },
      { table: 'jobs', statusCodes: { done: 9 } },
      { table: 'jobs', select: 'url' as never },
      { table: 'jobs', select: ['url', 'a"b'] },
      { table: 'jobs', select: [7] as never },
    ];
    for (const config of bad) {
      expect(() => resolveTable(config, null, enc), JSON.stringify(config)).toThrow(ConfigError);
    }
    expect(() => resolveTable(null as never, null, enc)).toThrow(ConfigError);
  });

  it('with a claims table beside it: the claim state is that table\'s, the table keeps none of its own, and select never names the claims table\'s columns', () => {
    const claims = { table: 'table_a_statusq', columns: cols('id', 'claimed_at', 'worker_id', 'attempt_count', 'next_attempt_at', 'last_error', 'finished_at') };
    const t = resolveTable({ table: 'table_a', select: ['url'] }, cols('id', 'date', 'status', 'url'), enc, claims);
    expect(t.beside).toBe('table_a_statusq');
    expect(t.columns).toEqual({ claimedAt: 'claimed_at', workerId: 'worker_id', attemptCount: 'attempt_count', nextAttemptAt: 'next_attempt_at', lastError: 'last_error', finishedAt: 'finished_at' });
    expect(t.features).toMatchObject({ leases: true, fencing: true, retries: true, backoff: true, errorHistory: true });
    expect(t.returned).toEqual(['id', 'status', 'date', 'url']);
    // A column turned off stays off beside it too.
    expect(resolveTable({ table: 'table_a', columns: { workerId: false } }, cols('id', 'date', 'status'), enc, claims).features.fencing).toBe(false);
    // Two homes for the claim state: a SchemaError naming both, before any statement is built.
    expect(() => resolveTable({ table: 'table_a' }, cols('id', 'date', 'status', 'claimed_at'), enc, claims)).toThrow(/claim-state columns of its own \(claimed_at\) and a claims table beside it \(table_a_statusq\)/);
    // The claims table must be keyed by the table's id.
    expect(() => resolveTable({ table: 'table_a' }, cols('id', 'date', 'status'), enc, { table: 'table_a_statusq', columns: cols('job', 'claimed_at') })).toThrow(/no unique column "id"/);
  });

  it('switches features on from the columns present, case-insensitively, and off with false', () => {
    const seed = resolveTable({ table: 'table_a' }, cols('id', 'date', 'status', 'url'), enc);
    expect(seed.features).toEqual({ leases: false, fencing: false, retries: false, backoff: false, errorHistory: false, priority: false, dedupe: false, progress: false, dispatch: false, kinds: false, groups: false, tracing: false });
    expect(seed.columns).toEqual({});
    expect(seed.direction).toBe('newest');

    const all = cols('ID', 'Date', 'STATUS', 'claimed_at', 'WORKER_ID', 'attempt_count', 'next_attempt_at', 'last_error', 'payload', 'result', 'finished_at');
    const full = resolveTable({ table: 'jobs', order: 'oldest' }, all, enc);
    expect(full.features).toEqual({ leases: true, fencing: true, retries: true, backoff: true, errorHistory: true, priority: false, dedupe: false, progress: false, dispatch: false, kinds: false, groups: false, tracing: false });
    expect(full.id).toBe('ID');
    expect(full.columns.workerId).toBe('WORKER_ID');
    expect(full.direction).toBe('oldest');
    expect(full.orderTime).toBe('epochMs');

    const off = resolveTable({ table: 'jobs', columns: { workerId: false, attemptCount: false } }, all, enc);
    expect(off.features.fencing).toBe(false);
    expect(off.features.retries).toBe(false);
    expect(off.columns.workerId).toBeUndefined();

    const renamed = resolveTable({ table: 'jobs', columns: { claimedAt: 'leased_at' } }, cols('id', 'date', 'status', 'leased_at'), enc);
    expect(renamed.features.leases).toBe(true);
    expect(renamed.columns.claimedAt).toBe('leased_at');
  });

  it('refuses an id column that is not unique on its own and a status column that is not an integer, naming the type', () => {
    const shared = cols('id', 'date', 'status').map((c) => (c.name === 'id' ? { ...c, unique: false } : c));
    expect(() => resolveTable({ table: 'pairs' }, shared, enc)).toThrow(SchemaError);
    expect(() => resolveTable({ table: 'pairs' }, shared, enc)).toThrow(/id column "id" is not unique: it must be the primary key or have a unique index of its own/);
    const textStatus = cols('id', 'date', 'status').map((c) => (c.name === 'status' ? { ...c, type: 'character varying', integer: false } : c));
    expect(() => resolveTable({ table: 'jobs' }, textStatus, enc)).toThrow(/status column "status" is character varying, not an integer type.*SMALLINT/);
  });

  it('select: the claim returns the named columns and statusq\'s own (as the catalog spells them, each once); without it every column; an unknown name is a SchemaError', () => {
    const table = cols('ID', 'Date', 'status', 'url', 'kind', 'doc', 'claimed_at', 'worker_id');
    expect(resolveTable({ table: 'a' }, table, enc).returned).toBeNull();
    expect(resolveTable({ table: 'a', select: ['KIND', 'id'] }, table, enc).returned).toEqual(['ID', 'status', 'Date', 'claimed_at', 'worker_id', 'kind']);
    expect(resolveTable({ table: 'a', select: [], columns: { workerId: false } }, table, enc).returned).toEqual(['ID', 'status', 'Date', 'claimed_at']);
    expect(() => resolveTable({ table: 'a', select: ['kind', 'missing'] }, table, enc)).toThrow(SchemaError);
    expect(() => resolveTable({ table: 'a', select: ['kind', 'missing'] }, table, enc)).toThrow(/select column "missing"/);
  });

  it('exposes the bounds of the payload, result and last_error columns', () => {
    const columns = cols('id', 'date', 'status', 'payload', 'result', 'last_error', 'worker_id').map((c) =>
      c.name === 'result' ? { ...c, maxLength: { chars: 10 } } : c.name === 'worker_id' ? { ...c, maxLength: { chars: 255 } } : c,
    );
    expect(resolveTable({ table: 'jobs' }, columns, enc).limits).toEqual({ result: { chars: 10 } });
    expect(resolveTable({ table: 'jobs', columns: { result: false } }, columns, enc).limits).toEqual({});
  });
});

describe('columnOverflow', () => {
  it('counts characters as code points and bytes as UTF-8', () => {
    expect(columnOverflow('😀'.repeat(10), { chars: 10 })).toBeNull();
    expect(columnOverflow('😀'.repeat(11), { chars: 10 })).toBe('11 characters; the column holds at most 10');
    expect(columnOverflow('ü'.repeat(5), { bytes: 10 })).toBeNull();
    expect(columnOverflow('ü'.repeat(6), { bytes: 10 })).toBe('12 bytes; the column holds at most 10 bytes');
    expect(columnOverflow('x'.repeat(100_000), undefined)).toBeNull();
  });
});

describe('idFitsColumn', () => {
  const column = (integerRange?: ColumnInfo['integerRange']): ColumnInfo => ({ name: 'id', type: 'int', unique: true, integer: true, maxLength: null, integerRange });
  it('bounds an id by the integers of its column: signed, unsigned (MySQL), 24 bits (MEDIUMINT), 64 bits', () => {
    expect(integerRangeOfBits(16)).toEqual({ min: -32768n, max: 32767n });
    expect(integerRangeOfBits(8, true)).toEqual({ min: 0n, max: 255n });
    expect(integerRangeOfBits(24)).toEqual({ min: -8388608n, max: 8388607n });
    const int64 = column(integerRangeOfBits(64));
    expect(idFitsColumn(int64, 9223372036854775807n)).toBe(true);
    expect(idFitsColumn(int64, 9223372036854775808n)).toBe(false);
    expect(idFitsColumn(int64, -9223372036854775808n)).toBe(true);
    const unsigned = column(integerRangeOfBits(32, true));
    expect([idFitsColumn(unsigned, -1), idFitsColumn(unsigned, 4294967295), idFitsColumn(unsigned, 4294967296)]).toEqual([false, true, false]);
  });
  it('leaves alone what it cannot judge: text ids, fractions, a column without a known range', () => {
    const small = column(integerRangeOfBits(8));
    expect([idFitsColumn(small, 'x'), idFitsColumn(small, 1.5), idFitsColumn(column(), 10n ** 30n)]).toEqual([true, true, true]);
  });
});
