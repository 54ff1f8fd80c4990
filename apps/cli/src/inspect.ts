// `statusq inspect`: what the queue holds, row by row, without writing SQL. Core picks and orders the rows
// (Queue.inspect, Queue.inspectIds); this file only prints them, as a table or as JSON.
import { ConfigError, Queue, statusName, type Row } from '@statusq/core';
import { resolveInspectOptions, validateTableConfig, type InspectStatus, type ResolvedTable } from '@statusq/core/tools';
import { optionalInteger, optionalString, tableConfig, type Flags } from './args.js';
import { parseId, withStore, type Io } from './with-store.js';
import { toJson } from './json.js';
import { clip, wholeUnits } from './text.js';

/** Widest a listing cell gets; last_error gets more, being the column read most. */
const CELL_WIDTH = 40;
const ERROR_WIDTH = 60;

export async function inspect(flags: Flags, io: Io): Promise<number> {
  const config = tableConfig(flags, 'inspect');
  validateTableConfig(config);
  const ids = flags.id as string[] | undefined;
  const statusFlag = optionalString(flags, 'status');
  const limitFlag = optionalInteger(flags, 'limit');
  const kindFlag = optionalString(flags, 'kind');
  if (ids !== undefined) {
    if (ids.length > 1) throw new ConfigError('inspect: --id shows one row; give it once');
    if (statusFlag !== undefined || limitFlag !== undefined || kindFlag !== undefined) throw new ConfigError('inspect: --id shows one row whole; --status, --kind and --limit choose a listing; give one or the other');
  }
  // Checked before the database is opened: bad input touches nothing.
  const options = resolveInspectOptions({ status: statusFlag as InspectStatus | undefined, limit: limitFlag, kind: kindFlag });
  const json = flags.json === true;
  return withStore(flags, 'inspect', false, async (store) => {
    const queue = await Queue.open(store, config);
    if (ids !== undefined) {
      const id = parseId(ids[0]!, queue.idColumn, 'inspect');
      const report = await queue.inspectIds([id]);
      const row = report.rows[0];
      if (!row) {
        // A distinct code, as requeue's for ids it left, so a script tells "no such row" from a failure.
        io.err(`statusq: inspect: no row of ${config.table} has ${queue.table.id} ${String(id)}`);
        return 5;
      }
      if (json) io.out(toJson(row));
      else printWholeRow(io, queue.table, row, report.clock);
      return 0;
    }
    const report = await queue.inspect(options);
    if (json) {
      io.out(toJson(report.rows));
      return 0;
    }
    const ofKind = options.kind === undefined ? '' : ` of kind ${options.kind}`;
    const what = `${options.status} row${report.rows.length === 1 ? '' : 's'}${ofKind} of ${config.table}`;
    if (report.rows.length === 0) {
      io.out(`no ${options.status} rows${ofKind} in ${config.table}`);
      return 0;
    }
    const shown = report.rows.length < options.limit ? `${report.rows.length}` : `first ${report.rows.length} (--limit ${options.limit})`;
    io.out(`${shown} ${what}, ${orderOf(queue.table, options.status)}; times UTC, ages by the database's clock`);
    const header = report.columns;
    const cells = report.rows.map((row) => header.map((name) => listingCell(queue.table, name, row[name], report.clock)));
    for (const line of table(header, cells)) io.out(line);
    return 0;
  });
}

/** How the listing is ordered, as TransitionSql.inspect orders it. */
function orderOf(table: ResolvedTable, status: InspectStatus): string {
  if (status === 'pending') return `in claim order (${table.columns.priority ? `${table.columns.priority} highest first, then ` : ''}${table.order} ${table.direction} first)`;
  if (status === 'processing') return table.columns.claimedAt ? `oldest claim first (${table.columns.claimedAt})` : `by ${table.id}`;
  return table.columns.finishedAt ? `newest finished first (${table.columns.finishedAt})` : `newest ${table.id} first`;
}

function listingCell(table: ResolvedTable, name: string, value: unknown, clock: Date | null): string {
  if (name === table.status) return statusName(value === null || value === undefined ? null : Number(value), table.codes) ?? String(value);
  if (value === null || value === undefined) return '-';
  if (value instanceof Date) return `${formatTime(value, false)} (${age(value, clock)})`;
  return clip(String(value), name === table.columns.lastError ? ERROR_WIDTH : CELL_WIDTH);
}

/** One column a line, every value whole; a value of several lines goes on under its first. */
function printWholeRow(io: Io, table: ResolvedTable, row: Row, clock: Date | null): void {
  const width = Math.max(...Object.keys(row).map((name) => name.length));
  for (const [name, value] of Object.entries(row)) {
    let text: string;
    if (name === table.status && (value === null || value === undefined)) text = 'NULL (pending)';
    else if (value === null || value === undefined) text = 'NULL';
    else if (value instanceof Date) text = `${formatTime(value, true)} (${age(value, clock)})`;
    else if (name === table.status) text = `${String(value)} (${statusName(Number(value), table.codes) ?? 'not a status code'})`;
    else text = String(value);
    const [first, ...rest] = text.split(/\r?\n/);
    io.out(`${name.padEnd(width)}  ${first}`);
    for (const line of rest) io.out(`${' '.repeat(width)}  ${line}`);
  }
}

/** `2024-05-01 12:03:04Z`, with milliseconds in the whole-row view. */
function formatTime(date: Date, ms: boolean): string {
  const iso = date.toISOString().replace('T', ' ');
  return ms ? iso : `${iso.slice(0, 19)}Z`;
}

/** `3m ago` or `in 20s`, in the largest whole unit, measured by the database's clock. */
function age(date: Date, clock: Date | null): string {
  if (clock === null) return 'age unknown';
  const ms = clock.getTime() - date.getTime();
  const amount = wholeUnits(Math.abs(ms));
  return ms >= 0 ? `${amount} ago` : `in ${amount}`;
}

/** Left-aligned columns two spaces apart, a header and a rule. */
function table(header: readonly string[], rows: readonly string[][]): string[] {
  const widths = header.map((name, i) => Math.max(name.length, ...rows.map((row) => [...row[i]!].length)));
  const line = (cells: readonly string[]) => cells.map((cell, i) => (i === cells.length - 1 ? cell : cell + ' '.repeat(widths[i]! - [...cell].length))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)];
}
