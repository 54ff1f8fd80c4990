import type { ExecResult, Row, SqlValue } from '@statusq/core/adapter';

/** The part of a better-sqlite3 statement runPrepared uses (the application's own copy of the driver may differ). */
export interface PreparedSqlite {
  readonly reader: boolean;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number };
}

/** Runs a prepared statement; RETURNING statements report their rows as affected. */
export function runPrepared(prepared: PreparedSqlite, params: readonly SqlValue[]): ExecResult {
  if (prepared.reader) {
    const rows = prepared.all(...params) as Row[];
    return { rows, affected: rows.length };
  }
  return { rows: [], affected: prepared.run(...params).changes };
}
