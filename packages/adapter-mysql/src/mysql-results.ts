import type { ExecResult, JobId, Row, SqlParam } from '@statusq/core/adapter';

/** mysql2's own formatting of a toISOString() value would be refused by DATETIME; see bindValue. */
const ISO_UTC = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d(?:\.\d{1,6})?)Z$/;

/**
 * Core turns a Date into `toISOString()` text (Queue.enqueue); DATETIME rejects the `T` and the `Z`
 * (MariaDB: error 1292). The session zone is UTC, so the same instant is `YYYY-MM-DD HH:MM:SS.sss`. Only a
 * string of exactly that shape is rewritten.
 */
export function bindValue(value: SqlParam): SqlParam {
  if (typeof value === 'string') {
    const m = ISO_UTC.exec(value);
    if (m) return `${m[1]} ${m[2]}`;
  }
  return value;
}

/** mysql2's result of one statement: the rows of a SELECT, or the OK packet of a write. */
export function mysqlExecResult(result: unknown): ExecResult {
  if (Array.isArray(result)) return { rows: result as Row[], affected: 0 };
  const header = (result ?? {}) as { affectedRows?: unknown; insertId?: unknown };
  // With mysql2's default FOUND_ROWS flag, affectedRows counts matched rows: an UPDATE whose guard
  // matched reports 1 even when it wrote the same values (a heartbeat in the same millisecond).
  return { rows: [], affected: Number(header.affectedRows ?? 0), insertId: insertIdOf(header.insertId) };
}

/**
 * The auto-increment value an INSERT generated, typed as the store reads ids: a number, or past 2^53 a decimal
 * string (supportBigNumbers). 0 means none was generated.
 */
function insertIdOf(value: unknown): JobId | undefined {
  const text = typeof value === 'number' || typeof value === 'bigint' || typeof value === 'string' ? String(value) : '';
  if (!/^\d+$/.test(text) || /^0+$/.test(text)) return undefined;
  return Number.isSafeInteger(Number(text)) ? Number(text) : text;
}
