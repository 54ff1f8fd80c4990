import { describe, expect, it } from 'vitest';
import { IllegalTransitionError } from '../protocol/errors.js';
import type { SqlDialect, Statement } from '../store/store.js';
import { resolveTable, type TableConfig } from '../protocol/table.js';
import { type ColumnInfo } from '../protocol/columns.js';
import { GIVE_UP_PAGE, MAX_ERROR_LENGTH, Params, TransitionSql, truncateError, type AttemptCharge } from './transition-sql.js';

const ALL_COLUMNS = ['id', 'date', 'status', 'claimed_at', 'worker_id', 'attempt_count', 'next_attempt_at', 'last_error', 'payload', 'result', 'finished_at'];

/** A dialect with numbered placeholders, so the text shows which parameter each one binds. */
function numbered(style: '$' | '?'): SqlDialect {
  return {
    name: 'test',
    quoteIdentifier: (n) => n.split('.').map((p) => `"${p}"`).join('.'),
    placeholder: (i) => (style === '$' ? `$${i}` : '?'),
    now: 'NOW_MS',
    nowPlusMs: (p) => `(NOW_MS + ${p})`,
    orderCutoff: (p) => `(NOW_MS + ${p})`,
  };
}

/** The claim-state columns a claims table holds (migrate --beside), after its key. */
const BESIDE = ['id', 'claimed_at', 'worker_id', 'attempt_count', 'next_attempt_at', 'last_error', 'finished_at'];

function sqlFor(columns: string[] = ALL_COLUMNS, config: Partial<TableConfig> = {}, style: '$' | '?' = '$', beside: string[] | null = null): TransitionSql {
  const info = (names: string[]): ColumnInfo[] =>
    names.map((name) => ({
      name,
      type: name === 'date' ? 'bigint' : 'text',
      unique: name === 'id',
      integer: name === 'status' || name === 'id' || name === 'priority',
      maxLength: name === 'last_error' && config.table === 'short_errors' ? { chars: 100, bytes: 150 } : null,
    }));
  const claims = beside === null ? null : { table: 'jobs_statusq', columns: info(beside) };
  return new TransitionSql(resolveTable({ table: 'jobs', ...config }, info(columns), () => 'epochMs', claims), numbered(style));
}

/** The seed's table_a shape with its claim state in a claims table. */
const besideSql = (style: '$' | '?' = '$') => sqlFor(['id', 'date', 'status', 'url'], {}, style, BESIDE);

/** A statement and the claims-table writes that go with it (Statement.first and then), each labelled. */
function withSideWrites(label: string, statement: Statement): Array<[string, Statement]> {
  return [...(statement.first ?? []).map((s, i): [string, Statement] => [`${label} first ${i}`, s]), [label, statement], ...(statement.then ?? []).map((s, i): [string, Statement] => [`${label} then ${i}`, s])];
}

/**
 * On a positional dialect (`?`, SQLite and MySQL) parameters bind in text order, so the builders must add
 * them in the order their placeholders appear. With numbered placeholders that means $1, $2, ... in order.
 */
function expectTextOrder(statement: Statement, label: string): void {
  const numbers = [...statement.sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1]));
  for (const side of [...(statement.first ?? []), ...(statement.then ?? [])]) expectTextOrder(side, `${label} (claims table)`);
  expect(numbers, `${label}: ${statement.sql}`).toEqual(numbers.map((_, i) => i + 1));
  expect(numbers.length, `${label}: placeholders vs params`).toBe(statement.params.length);
}

/** An AttemptCharge's statements, each labelled: the read of exhausted rows, one give-up, the way back. */
function chargeStatements(label: string, charge: AttemptCharge | null): Array<[string, Statement]> {
  if (!charge) return [];
  const statements: Array<[string, Statement]> = charge.back ? [[`${label} back`, charge.back]] : [];
  if (charge.remaining) statements.push([`${label} remaining`, charge.remaining]);
  if (charge.sendBack) statements.push([`${label} sendBack`, charge.sendBack(7)]);
  if (charge.exhausted) statements.push([`${label} exhausted`, charge.exhausted]);
  if (charge.giveUp) statements.push([`${label} giveUp`, charge.giveUp(7)]);
  return statements;
}

function allStatements(sql: TransitionSql): Array<[string, Statement]> {
  const candidates = (agedMs?: number): Statement => {
    const p = new Params(sql.dialect);
    return { sql: sql.candidates(p, { limit: 10, columns: 'id', agedMs }), params: p.values };
  };
  return [
    ['candidates', candidates()],
    ['candidates aged', candidates(60_000)],
    ['claimByIds', sql.claimByIds([3, 4], 'tok', !sql.q.beside)],
    ['selectByIds', sql.selectByIds([3, 4])],
    ['complete', sql.complete(7, 'tok', '{"r":1}')],
    ['complete without token', sql.complete(7, null, null)],
    ['completeMany', sql.completeMany([7, 8, 9], 'tok')],
    ['giveUp', sql.giveUp(7, 'tok', 'boom')],
    ['abuse from processing', sql.abuse(7, 'tok', 'spam')],
    ['abuse from pending', sql.abuse(7, null, 'spam', 'pending')],
    ...(sql.q.attemptCount ? ([['retry', sql.retry(7, 'tok', 'flaky', 1500)]] as Array<[string, Statement]>) : []),
    ['release', sql.release(7, 'tok')],
    ...(sql.q.claimedAt ? ([['heartbeat', sql.heartbeat(7, 'tok')]] as Array<[string, Statement]>) : []),
    ...chargeStatements('reapExpired', sql.reapExpired(30_000, 3)),
    ...chargeStatements('ownerDied', sql.ownerDied('w1', 'died', 3)),
    ['requeue failed', sql.requeue('failed', [1, 2])],
    ['requeue abuse (all)', sql.requeue('abuse', undefined)],
    ['requeueProcessing', sql.requeueProcessing([1])],
    ['requeueProcessing of expired leases', sql.requeueProcessing([1, 2], 30_000)],
    ['statusOfIds', sql.statusOfIds([1, 2], 30_000)],
    ['insert', sql.insert({ payload: '{}', date: 5 })],
  ];
}

describe('TransitionSql parameter order', () => {
  it('adds parameters in the order their placeholders appear, for every statement, with every optional column', () => {
    for (const [label, statement] of allStatements(sqlFor())) expectTextOrder(statement, label);
  });

  it('does so on a status-only table and on tables with some optional columns', () => {
    const shapes = [
      ['id', 'date', 'status'],
      ['id', 'date', 'status', 'claimed_at'],
      ['id', 'date', 'status', 'worker_id', 'last_error'],
      ['id', 'date', 'status', 'attempt_count', 'next_attempt_at'],
      ['id', 'date', 'status', 'claimed_at', 'attempt_count', 'last_error', 'finished_at'],
    ];
    for (const columns of shapes) {
      const sql = sqlFor(columns);
      for (const [label, statement] of allStatements(sql)) expectTextOrder(statement, `${columns.join(',')}: ${label}`);
    }
  });

  it('does so with the claim state in a claims table, for statements on the table and on the claims table alike', () => {
    for (const [label, statement] of allStatements(besideSql())) expectTextOrder(statement, `beside: ${label}`);
    const sql = besideSql('?');
    for (const [label, statement] of allStatements(sql).flatMap(([l, s]) => withSideWrites(l, s))) expect(statement.sql.split('?').length - 1, label).toBe(statement.params.length);
  });

  it('binds the right values in the right places on a positional (?) dialect', () => {
    const sql = sqlFor(ALL_COLUMNS, {}, '?');
    const count = (s: Statement) => s.sql.split('?').length - 1;
    const complete = sql.complete(7, 'tok', 'R');
    expect(complete.params).toEqual(['R', 7, 'tok']);
    expect(count(complete)).toBe(3);
    expect(sql.retry(7, 'tok', 'flaky', 1500.4).params).toEqual([1500, 'flaky', 7, 'tok']);
    expect(sql.giveUp(7, 'tok', 'boom').params).toEqual(['boom', 7, 'tok']);
    expect(sql.abuse(7, null, 'spam', 'pending').params).toEqual(['spam', 7]);
    expect(sql.heartbeat(7, 'tok').params).toEqual([7, 'tok']);
    expect(sql.claimByIds([3, 4], 'tok', false).params).toEqual(['tok', 3, 4]);
    const reap = sql.reapExpired(30_000, 3)!;
    expect(reap.exhausted!.params).toEqual([-30_000, 3, GIVE_UP_PAGE]);
    expect(reap.giveUp!(7).params).toEqual([expect.stringMatching(/lease expired/), 7, -30_000, 3]);
    expect(reap.back!.params).toEqual([expect.stringMatching(/lease expired/), -30_000, 3]);
    const p = new Params(sql.dialect);
    sql.candidates(p, { limit: 10, columns: 'id', agedMs: 60_000 });
    expect(p.values).toEqual([-60_000, 10]);
    for (const [label, statement] of allStatements(sql)) expect(count(statement), label).toBe(statement.params.length);
  });
});

describe('TransitionSql id lists', () => {
  const ID_LIST_STATEMENTS = ['claimByIds', 'selectByIds', 'completeMany', 'requeue failed', 'requeueProcessing', 'requeueProcessing of expired leases', 'statusOfIds'];

  it('binds an id list as one array parameter on a dialect with anyOf, keeping parameter order', () => {
    const anyOf = (column: string, placeholder: string) => `${column} = ANY(${placeholder})`;
    const dialect: SqlDialect = { ...numbered('$'), anyOf };
    const sql = new TransitionSql(sqlFor().table, dialect);
    const statements = new Map(allStatements(sql));
    for (const label of ID_LIST_STATEMENTS) {
      const statement = statements.get(label)!;
      expect(statement.sql, label).toMatch(/"id" = ANY\(\$\d+\)/);
      expect(statement.sql, label).not.toMatch(/ IN \(/);
      expect(statement.params.filter(Array.isArray), label).toHaveLength(1);
    }
    expect(statements.get('completeMany')!.params).toEqual([[7, 8, 9], 'tok']);
    for (const [label, statement] of statements) expectTextOrder(statement, label);
  });

  it('writes an IN list with a placeholder per id on a dialect without anyOf', () => {
    const statements = new Map(allStatements(sqlFor()));
    for (const label of ID_LIST_STATEMENTS) {
      expect(statements.get(label)!.sql, label).toMatch(/"id" IN \(\$\d+(, \$\d+)*\)/);
      expect(statements.get(label)!.params.some(Array.isArray), label).toBe(false);
    }
    expect(statements.get('completeMany')!.params).toEqual([7, 8, 9, 'tok']);
  });
});

describe('TransitionSql guards', () => {
  const sql = sqlFor();
  it('guards each transition by the states it may start from, and by the token when there is one', () => {
    expect(sql.complete(1, 'tok', null).sql).toMatch(/WHERE "id" = \$\d+ AND "status" = 9 AND "worker_id" = \$\d+$/);
    expect(sql.complete(1, null, null).sql).toMatch(/WHERE "id" = \$\d+ AND "status" = 9$/);
    expect(sql.claimByIds([1], 'tok', false).sql).toMatch(/AND "status" IS NULL AND \("next_attempt_at" IS NULL OR "next_attempt_at" <= NOW_MS\)$/);
    expect(sql.abuse(1, null, 'x', 'pending').sql).toMatch(/AND "status" IS NULL$/);
    expect(sql.abuse(1, 'tok', 'x').sql).toMatch(/AND "status" = 9 AND "worker_id"/);
    expect(sql.requeue('failed', undefined).sql).toMatch(/WHERE "status" = 0$/);
    expect(sql.requeue('abuse', undefined).sql).toMatch(/WHERE "status" = 2$/);
    expect(sql.retry(1, 'tok', 'x', 0).sql).toMatch(/^UPDATE "jobs" SET "status" = NULL, "attempt_count" = COALESCE\("attempt_count", 0\) \+ 1/);
    expect(sql.release(1, 'tok').sql).not.toMatch(/attempt_count/);
    expect(sql.heartbeat(1, 'tok').sql).toMatch(/^UPDATE "jobs" SET "claimed_at" = NOW_MS WHERE "id" = \$1 AND "status" = 9 AND "worker_id" = \$2$/);
    // A caller's own condition is ANDed after the due condition, before the order (MySQL's idle probe).
    expect(sql.candidates(new Params(sql.dialect), { limit: 1, columns: 'id', alsoWhere: 'steps.n > 0' })).toMatch(
      /WHERE "status" IS NULL AND \("next_attempt_at" IS NULL OR "next_attempt_at" <= NOW_MS\) AND steps\.n > 0 ORDER BY /,
    );
    expect(sql.requeueProcessing(undefined).sql).toMatch(/WHERE "status" = 9$/);
    expect(sql.requeueProcessing(undefined, 1000).sql).toMatch(/WHERE "status" = 9 AND \("claimed_at" IS NULL OR "claimed_at" < \(NOW_MS \+ \$2\)\)$/);
  });

  it('refuses to build a named move the state machine does not allow, rather than a guard that matches nothing', () => {
    expect(() => sql.requeue('done', undefined)).toThrow(IllegalTransitionError);
    expect(() => sql.requeue('processing', undefined)).toThrow(/illegal status transition processing -> pending \(requeue\)/);
    expect(() => sql.abuse(1, null, 'x', 'failed' as 'pending')).toThrow(IllegalTransitionError);
  });

  it('uses remapped status codes', () => {
    const legacy = sqlFor(ALL_COLUMNS, { statusCodes: { processing: 5, done: 6, failed: 7, abuse: 8 } });
    expect(legacy.complete(1, null, null).sql).toMatch(/SET "status" = 6.* AND "status" = 5$/);
    expect(legacy.requeue('failed', undefined).sql).toMatch(/WHERE "status" = 7$/);
  });

  it('keeps last_error short', () => {
    expect(truncateError('x'.repeat(5000))).toHaveLength(MAX_ERROR_LENGTH);
    expect(truncateError('short')).toBe('short');
    expect(sql.giveUp(1, null, 'y'.repeat(5000)).params[0]).toHaveLength(MAX_ERROR_LENGTH);
  });

  it('keeps last_error within a smaller column bound, cutting whole characters', () => {
    expect(truncateError('x'.repeat(300), { chars: 100 })).toBe(`${'x'.repeat(99)}…`);
    // 4-byte characters: 150 bytes leave room for 36 of them and the 3-byte ellipsis, none split in half.
    const emoji = truncateError('😀'.repeat(300), { chars: 100, bytes: 150 });
    expect(emoji).toBe(`${'😀'.repeat(36)}…`);
    expect(truncateError('fits', { chars: 4 })).toBe('fits');
    const bounded = sqlFor(ALL_COLUMNS, { table: 'short_errors' });
    expect(bounded.table.limits).toEqual({ lastError: { chars: 100, bytes: 150 } });
    expect(bounded.giveUp(1, null, 'z'.repeat(5000)).params[0]).toBe(`${'z'.repeat(99)}…`);
  });
});

describe('TransitionSql claim order', () => {
  const candidates = (sql: TransitionSql, agedMs?: number) => sql.candidates(new Params(sql.dialect), { limit: 10, columns: 'id', agedMs });

  it('orders by priority, highest first, then the order column, where the table has a priority column; aged rows by age alone', () => {
    const ranked = sqlFor([...ALL_COLUMNS, 'priority']);
    expect(candidates(ranked)).toMatch(/ORDER BY "priority" DESC, "date" DESC LIMIT \$\d+$/);
    expect(candidates(sqlFor([...ALL_COLUMNS, 'priority'], { order: 'oldest' }))).toMatch(/ORDER BY "priority" DESC, "date" ASC LIMIT/);
    expect(candidates(ranked, 60_000)).toMatch(/AND "date" <= \(NOW_MS \+ \$\d+\) ORDER BY "date" ASC LIMIT/);
    expect(candidates(sqlFor())).toMatch(/ORDER BY "date" DESC LIMIT/);
    expect(ranked.inspect('pending', 5, 'clock').sql).toMatch(/ORDER BY "priority" DESC, "date" DESC LIMIT/);
    expect(ranked.inspectColumns()).toContain('priority');
  });

  it('a priority column that is not an integer is not statusq\'s unless named, and then a SchemaError', () => {
    const info = ['id', 'date', 'status', 'priority'].map((name) => ({ name, type: name === 'priority' ? 'varchar(10)' : 'integer', unique: name === 'id', integer: name !== 'priority', maxLength: null }));
    expect(resolveTable({ table: 'jobs' }, info, () => 'epochMs').features.priority).toBe(false);
    expect(() => resolveTable({ table: 'jobs', columns: { priority: 'priority' } }, info, () => 'epochMs')).toThrow(/priority column "priority" is varchar\(10\), not an integer type/);
  });
});

describe('monitoring count statements', () => {
  it('spells the statuses that are none of the codes as the ranges between them, skipping empty ones', () => {
    expect(sqlFor().rowsWithOtherStatus().sql).toBe('SELECT 1 AS one FROM "jobs" WHERE "status" < 0 OR ("status" > 2 AND "status" < 9) OR "status" > 9');
    const custom = sqlFor(ALL_COLUMNS, { statusCodes: { processing: 10, done: 20, abuse: 21, failed: 30 } });
    expect(custom.rowsWithOtherStatus().sql).toBe(
      'SELECT 1 AS one FROM "jobs" WHERE "status" < 10 OR ("status" > 10 AND "status" < 20) OR ("status" > 21 AND "status" < 30) OR "status" > 30',
    );
  });

  it('caps a count with LIMIT and refuses a cap that is not a positive integer', () => {
    const sql = sqlFor();
    expect(sql.countUpTo(sql.rowsWithStatus(null), 50).sql).toBe('SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM "jobs" WHERE "status" IS NULL LIMIT 50) capped');
    expect(() => sql.countUpTo(sql.allRows(), 0)).toThrow(/positive integer/);
    expect(() => sql.countUpTo(sql.allRows(), 1.5)).toThrow(/positive integer/);
  });
});

describe('deduplication key statements', () => {
  it('reads the live holder of a key through the key column and the live statuses, or through the dialect\'s own condition', () => {
    const keyed = sqlFor([...ALL_COLUMNS, 'dedupe_key']);
    expect(keyed.liveKeyHolder('k1')).toEqual({ sql: 'SELECT "id" AS id FROM "jobs" WHERE "dedupe_key" = $1 AND ("status" IS NULL OR "status" = 9) LIMIT 1', params: ['k1'] });
    const custom = sqlFor([...ALL_COLUMNS, 'dedupe_key'], { statusCodes: { processing: 5 } });
    expect(custom.liveKeyHolder('k1').sql).toContain('("status" IS NULL OR "status" = 5)');
    const info: ColumnInfo[] = [...ALL_COLUMNS, 'dedupe_key'].map((name) => ({ name, type: 'text', unique: name === 'id', integer: name === 'status' || name === 'id', maxLength: null }));
    const generated = new TransitionSql(resolveTable({ table: 'jobs' }, info, () => 'epochMs'), { ...numbered('?'), liveKey: ({ placeholder }) => `"live_key" = ${placeholder}` });
    expect(generated.liveKeyHolder('k1').sql).toBe('SELECT "id" AS id FROM "jobs" WHERE "live_key" = ? LIMIT 1');
    expect(() => sqlFor().liveKeyHolder('k1')).toThrow(/no dedupe_key column, which a deduplication key needs \(statusq migrate --with dedupe adds it\)/);
  });

  it('skips conflicting rows only when asked, before RETURNING', () => {
    const sql = sqlFor([...ALL_COLUMNS, 'dedupe_key']);
    expect(sql.insert({ payload: '{}', dedupe_key: 'k' }, { returningId: true, skipConflicts: true }).sql).toBe('INSERT INTO "jobs" ("payload", "dedupe_key") VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING "id" AS id');
    expect(sql.insert({ payload: '{}' }).sql).not.toContain('ON CONFLICT');
  });
});

describe('progress statement', () => {
  it('writes the value under the processing guard and the claim token, and needs the column', () => {
    const sql = sqlFor([...ALL_COLUMNS, 'progress']);
    expect(sql.progress(7, 'tok', '42')).toEqual({ sql: 'UPDATE "jobs" SET "progress" = $1 WHERE "id" = $2 AND "status" = 9 AND "worker_id" = $3', params: ['42', 7, 'tok'] });
    expect(() => sqlFor().progress(7, 'tok', '42')).toThrow(/no progress column, which ctx.progress needs \(statusq migrate --with progress adds it\)/);
  });
});
