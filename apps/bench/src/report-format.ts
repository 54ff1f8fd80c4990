/** What every part of the bench's report shares: how a cell and a table are written, and how a run is named. */
import type { BurnDownRecord, PickupRecord } from './records.js';

export type Cell = string | number;

export function format(value: Cell | undefined): string {
  if (value === undefined) return '';
  if (typeof value === 'number') return Number.isFinite(value) ? value.toLocaleString('en-US', { maximumFractionDigits: 2 }) : 'n/a';
  return value;
}

export function markdownTable(header: readonly string[], rows: readonly Cell[][]): string {
  const lines = [`| ${header.join(' | ')} |`, `|${header.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`];
  for (const row of rows) lines.push(`| ${row.map(format).join(' | ')} |`);
  return lines.join('\n');
}

export function textTable(header: readonly string[], rows: readonly Cell[][]): string {
  const cells = [header.map(String), ...rows.map((r) => r.map(format))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n');
}

/** The record with the most jobs/s, if any. */
export function fastest(records: readonly BurnDownRecord[]): BurnDownRecord | undefined {
  return [...records].sort((a, b) => b.jobsPerSec - a.jobsPerSec)[0];
}

/** The rows measured on statusq's own dialects (labelled with the dialect), as against the peers'. */
export const OWN_SYSTEMS: ReadonlySet<BurnDownRecord['system']> = new Set(['statusq', 'raw-protocol', 'raw-statusq-sql']);

export function systemLabel(r: BurnDownRecord | PickupRecord): string {
  return OWN_SYSTEMS.has(r.system) ? `${r.system} ${r.dialect} ${r.variant}` : `${r.system} ${r.variant}`;
}

export interface Section {
  title: string;
  header: string[];
  rows: Cell[][];
}

export function percent(ours: number, theirs: number): string {
  return `${Math.round((100 * ours) / theirs)}%`;
}

export const STORE_NAMES: Record<string, string> = { postgres: 'PostgreSQL', mysql: 'MariaDB/MySQL', sqlite: 'SQLite', redis: 'Redis' };
