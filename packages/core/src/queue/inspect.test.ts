import { describe, expect, it } from 'vitest';
import { ConfigError } from '../protocol/errors.js';
import { INSPECT_CLOCK, InspectTimes, resolveInspectOptions } from './inspect.js';
import type { SqlDialect } from '../store/store.js';
import { resolveTable, type OrderTimeEncoding, type TableConfig } from '../protocol/table.js';
import { type ColumnInfo } from '../protocol/columns.js';
import { TransitionSql } from '../sql/transition-sql.js';

const ALL_COLUMNS = ['id', 'date', 'status', 'claimed_at', 'worker_id', 'attempt_count', 'next_attempt_at', 'last_error', 'payload', 'result', 'finished_at'];

const dialect: SqlDialect = {
  name: 'test',
  quoteIdentifier: (n) => `"${n}"`,
  placeholder: (i) => `$${i}`,
  now: 'NOW_MS',
  nowPlusMs: (p) => `(NOW_MS + ${p})`,
  orderCutoff: (p) => `(NOW_MS + ${p})`,
};

function sqlFor(columns: string[] = ALL_COLUMNS, config: Partial<TableConfig> = {}, orderTime: OrderTimeEncoding = 'epochMs'): TransitionSql {
  // A text column called kind is the kind column by its name (an integer one would not be).
  const info: ColumnInfo[] = columns.map((name) => (name === 'kind' ? { name, type: 'varchar(255)', unique: false, integer: false, maxLength: { chars: 255 } } : { name, type: 'bigint', unique: name === 'id', integer: true, maxLength: null }));
  return new TransitionSql(resolveTable({ table: 'jobs', ...config }, info, () => orderTime), dialect);
}

describe('inspect SQL', () => {
  it('lists id, order, status and the optional columns the table has; never payload or result', () => {
    expect(sqlFor().inspectColumns()).toEqual(['id', 'date', 'status', 'attempt_count', 'claimed_at', 'worker_id', 'next_attempt_at', 'last_error', 'finished_at']);
    expect(sqlFor(['id', 'date', 'status']).inspectColumns()).toEqual(['id', 'date', 'status']);
    // An order column that is the id is listed once.
    expect(sqlFor(['id', 'status'], { orderColumn: 'id' }).inspectColumns()).toEqual(['id', 'status']);
  });

  it('orders each status as documented, pending by the claim ORDER BY so the pending index serves it', () => {
    const cols = '"id", "date", "status", "attempt_count", "claimed_at", "worker_id", "next_attempt_at", "last_error", "finished_at", NOW_MS AS "c"';
    expect(sqlFor().inspect('pending', 20, 'c')).toEqual({ sql: `SELECT ${cols} FROM "jobs" WHERE "status" IS NULL ORDER BY "date" DESC LIMIT $1`, params: [20] });
    expect(sqlFor(ALL_COLUMNS, { order: 'oldest' }).inspect('pending', 5, 'c').sql).toMatch(/ORDER BY "date" ASC LIMIT \$1$/);
    expect(sqlFor().inspect('processing', 20, 'c').sql).toMatch(/WHERE "status" = 9 ORDER BY CASE WHEN "claimed_at" IS NULL THEN 0 ELSE 1 END, "claimed_at" ASC, "id" ASC LIMIT \$1$/);
    expect(sqlFor().inspect('failed', 20, 'c').sql).toMatch(/WHERE "status" = 0 ORDER BY CASE WHEN "finished_at" IS NULL THEN 1 ELSE 0 END, "finished_at" DESC, "id" DESC LIMIT \$1$/);
    expect(sqlFor(ALL_COLUMNS, { statusCodes: { abuse: 7 } }).inspect('abuse', 20, 'c').sql).toMatch(/WHERE "status" = 7 ORDER BY/);
    const plain = sqlFor(['id', 'date', 'status']);
    expect(plain.inspect('failed', 3, 'c').sql).toBe('SELECT "id", "date", "status", NOW_MS AS "c" FROM "jobs" WHERE "status" = 0 ORDER BY "id" DESC LIMIT $1');
    expect(plain.inspect('processing', 3, 'c').sql).toMatch(/ORDER BY "id" ASC LIMIT \$1$/);
  });

  it('lists the kind column after the status on a table with kinds, and lists one kind with the kind as a parameter', () => {
    const kinds = sqlFor([...ALL_COLUMNS, 'kind']);
    expect(kinds.inspectColumns()).toEqual(['id', 'date', 'status', 'kind', 'attempt_count', 'claimed_at', 'worker_id', 'next_attempt_at', 'last_error', 'finished_at']);
    expect(kinds.inspect('pending', 5, 'c', 'report.daily')).toMatchObject({ sql: expect.stringMatching(/ WHERE "status" IS NULL AND "kind" = \$1 ORDER BY "date" DESC LIMIT \$2$/), params: ['report.daily', 5] });
    expect(() => kinds.inspect('pending', 5, 'c', "x' OR '1'='1")).toThrow(/inspect: kind must be 1 to 100 letters/);
    expect(() => sqlFor().inspect('pending', 5, 'c', 'email')).toThrow(/table jobs has no kind column \(statusq migrate --with kinds adds it/);
  });

  it('counts live rows by kind and due pending rows by kind from the whole table', () => {
    const kinds = sqlFor([...ALL_COLUMNS, 'kind']);
    expect(kinds.countLiveByKind().sql).toBe('SELECT "kind" AS kind, "status" AS status, COUNT(*) AS n FROM "jobs" WHERE ("status" IS NULL OR "status" = 9) GROUP BY "kind", "status"');
    expect(kinds.duePendingByKind().sql).toBe(
      'SELECT "kind" AS kind, COUNT(*) AS n, MIN("date") AS oldest, NOW_MS AS clock FROM "jobs" WHERE "status" IS NULL AND ("next_attempt_at" IS NULL OR "next_attempt_at" <= NOW_MS) GROUP BY "kind"',
    );
    expect(() => sqlFor().duePendingByKind()).toThrow(/has no kind column/);
  });

  it('reads the named rows whole', () => {
    expect(sqlFor().inspectIds([3, 'x'], 'c')).toEqual({ sql: 'SELECT *, NOW_MS AS "c" FROM "jobs" WHERE "id" IN ($1, $2)', params: [3, 'x'] });
  });
});

describe('inspect options and times', () => {
  it('defaults to 20 failed rows and refuses other statuses and limits outside 1..1000', () => {
    expect(resolveInspectOptions()).toEqual({ status: 'failed', limit: 20 });
    expect(resolveInspectOptions({ status: 'pending', limit: 1000 })).toEqual({ status: 'pending', limit: 1000 });
    for (const bad of [{ limit: 0 }, { limit: 1001 }, { limit: 2.5 }, { status: 'done' as never }, { kind: '' }, { kind: 'a b' }]) expect(() => resolveInspectOptions(bad)).toThrow(ConfigError);
    expect(resolveInspectOptions({ status: 'pending', kind: 'email' })).toEqual({ status: 'pending', limit: 20, kind: 'email' });
  });

  it("turns statusq's time columns and a time-like order column into Dates, and leaves other values alone", () => {
    const table = resolveTable({ table: 'jobs' }, ALL_COLUMNS.map((name) => ({ name, type: 'bigint', unique: name === 'id', integer: true, maxLength: null })), () => 'epochMs');
    const ms = Date.UTC(2024, 0, 1);
    const { row, clock } = new InspectTimes(table).read({ id: 7, date: ms, status: 0, claimed_at: ms, next_attempt_at: null, finished_at: new Date(ms), attempt_count: 2, [INSPECT_CLOCK]: ms + 60_000 });
    expect(row).toEqual({ id: 7, date: new Date(ms), status: 0, claimed_at: new Date(ms), next_attempt_at: null, finished_at: new Date(ms), attempt_count: 2 });
    expect(clock).toEqual(new Date(ms + 60_000));
    // A small number in an epoch-ms order column is a sequence, not a time in 1970.
    expect(new InspectTimes(resolveTable({ table: 'jobs', orderColumn: 'id' }, [{ name: 'id', type: 'int', unique: true, integer: true, maxLength: null }, { name: 'status', type: 'int', unique: false, integer: true, maxLength: null }], () => 'epochMs')).read({ id: 12, status: null }).row).toEqual({ id: 12, status: null });
    // Text order values keep the application's own form: their zone is unknown.
    const text = resolveTable({ table: 'jobs' }, [{ name: 'id', type: 'int', unique: true, integer: true, maxLength: null }, { name: 'date', type: 'text', unique: false, integer: false, maxLength: null }, { name: 'status', type: 'int', unique: false, integer: true, maxLength: null }], () => 'text');
    expect(new InspectTimes(text).read({ id: 1, date: '2024-01-01 00:00:00', status: 0 }).row.date).toBe('2024-01-01 00:00:00');
  });
});
