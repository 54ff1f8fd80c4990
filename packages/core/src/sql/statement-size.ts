import type { SqlParam, SqlValue, Statement, StatementLimit } from '../store/store.js';

const encoder = new TextEncoder();
/**
 * What a driver that sends values inside the statement text escapes with a backslash, each taking one
 * byte more: NUL, backspace, tab, newline, carriage return, Ctrl-Z, the quotes and the backslash.
 */
const ESCAPED = new Set([0, 8, 9, 10, 13, 26, 34, 39, 92]);

/**
 * The size of `statement` as a driver sends it with its values written into the SQL text (client-side
 * formatting): the SQL's UTF-8 bytes, each string quoted with its escapes counted, numbers as
 * their digits. Never below the real size for such a driver (each `?` it replaces is counted too); a driver
 * that sends values apart from the text (bound parameters) sends less.
 */
export function statementBytes({ sql, params }: Statement): number {
  let bytes = utf8Bytes(sql);
  for (const value of params) bytes += paramBytes(value);
  return bytes;
}

function paramBytes(value: SqlParam): number {
  if (value === null) return 4;
  if (typeof value === 'string') return utf8Bytes(value) + escapes(value) + 2;
  // An array parameter (an id list bound as one, SqlDialect.anyOf): its elements, a separator each, and the braces.
  if (Array.isArray(value)) return value.reduce((n: number, v: SqlValue) => n + paramBytes(v) + 1, 2);
  return String(value).length;
}

function escapes(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) if (ESCAPED.has(text.charCodeAt(i))) n++;
  return n;
}

function utf8Bytes(text: string): number {
  // ASCII takes one byte a character, and most SQL and ids are ASCII: encode only when there is more.
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return encoder.encode(text).length;
  return text.length;
}

/** Whether `statement` is within the store's statement limit (always, when the store declares none). */
export function fitsStatementLimit(statement: Statement, limit: StatementLimit | undefined): boolean {
  return limit === undefined || statementBytes(statement) <= limit.bytes;
}

/** Why `statement` is too large for `limit`, for an error message. */
export function statementTooLarge(statement: Statement, limit: StatementLimit): string {
  return `${statementBytes(statement)} bytes as one statement, more than the ${limit.bytes} the database takes (${limit.setting}; ${limit.fix})`;
}

/**
 * `items` in consecutive runs, in order, each built into one statement by `build` that is within `limit`:
 * the whole list when it fits, else halves, and halves of those, until each fits or is a single item (which
 * the store then refuses with a clear error rather than this splitting forever). A grouped UPDATE of
 * `id IN (<10,000 ids>)` is about 70 KB: within the 16-64 MB servers default to, not within a managed
 * host's 16 KB or 1 MB. At most log2(n) levels of splitting.
 */
export function splitToFit<T>(items: readonly T[], build: (items: readonly T[]) => Statement, limit: StatementLimit | undefined): Array<{ items: T[]; statement: Statement }> {
  const out: Array<{ items: T[]; statement: Statement }> = [];
  // Depth first, left half first: the runs come out in the items' order.
  const pending: T[][] = [[...items]];
  while (pending.length > 0) {
    const run = pending.pop()!;
    const statement = build(run);
    if (run.length <= 1 || fitsStatementLimit(statement, limit)) {
      out.push({ items: run, statement });
      continue;
    }
    const half = Math.ceil(run.length / 2);
    pending.push(run.slice(half), run.slice(0, half));
  }
  return out;
}
