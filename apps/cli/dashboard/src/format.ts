// What the page derives from the API's answers: ages, rates, display text.
import type { Row, RowId, ThroughputSample } from './api.ts';

const UNITS: Array<[number, string]> = [
  [86_400_000, 'd'],
  [3_600_000, 'h'],
  [60_000, 'm'],
  [1000, 's'],
];

/** `3m 20s`, `2h 5m`, `12s`, `800ms`: the two largest units, as an operator reads an age. */
export function formatAge(ms: number): string {
  const abs = Math.abs(ms);
  const sign = ms < 0 ? '-' : '';
  if (abs < 1000) return `${sign}${Math.round(abs)}ms`;
  const index = UNITS.findIndex(([size]) => abs >= size);
  const [size, unit] = UNITS[index]!;
  const whole = Math.floor(abs / size);
  const next = UNITS[index + 1];
  const rest = next ? Math.floor((abs - whole * size) / next[0]) : 0;
  return `${sign}${whole}${unit}${next && rest > 0 ? ` ${rest}${next[1]}` : ''}`;
}

/** A count as the API sends it (a string past 2^53), with digit grouping when it is a number. */
export function formatCount(value: number | string | undefined): string {
  if (value === undefined) return '-';
  return typeof value === 'number' ? value.toLocaleString('en-US') : value;
}

/** A cell's text: times as the API sends them (ISO), null as a dash. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** Milliseconds from an ISO time (or epoch ms) to the database's clock; null when either is unknown. */
export function ageAt(value: unknown, clock: string | null): number | null {
  if (clock === null || value === null || value === undefined) return null;
  const at = typeof value === 'number' ? value : Date.parse(String(value));
  const now = Date.parse(clock);
  return Number.isFinite(at) && Number.isFinite(now) ? now - at : null;
}

/** A row's id, as the API sent it (so a big integer stays an exact string). */
export function rowId(row: Row, idColumn: string): RowId {
  const id = row[idColumn];
  return typeof id === 'number' ? id : String(id);
}

/** Settled rows (done, failed, abuse) of a sample: what jobs/s counts. */
const settled = (s: ThroughputSample) => s.done + s.failed + s.abuse;
const failures = (s: ThroughputSample) => s.failed + s.abuse;

export interface Rates {
  /** Seconds since the epoch, at the end of each interval (uPlot's x axis). */
  t: number[];
  /** Rows settled per second in each interval. */
  jobs: number[];
  /** Of those, rows that ended failed or abuse. */
  failures: number[];
}

/**
 * Jobs per second between consecutive samples. A requeue lowers the settled count, which is no negative
 * throughput: such an interval counts as 0.
 */
export function ratesOf(samples: readonly ThroughputSample[]): Rates {
  const rates: Rates = { t: [], jobs: [], failures: [] };
  for (let i = 1; i < samples.length; i++) {
    const previous = samples[i - 1]!;
    const current = samples[i]!;
    const seconds = (current.t - previous.t) / 1000;
    if (!(seconds > 0)) continue;
    rates.t.push(current.t / 1000);
    rates.jobs.push(Math.max(0, settled(current) - settled(previous)) / seconds);
    rates.failures.push(Math.max(0, failures(current) - failures(previous)) / seconds);
  }
  return rates;
}

/** `12.5` jobs/s, to a precision that stays readable from 0.01 to 100k. */
export function formatRate(perSecond: number): string {
  if (perSecond === 0) return '0';
  if (perSecond < 10) return perSecond.toFixed(2);
  if (perSecond < 100) return perSecond.toFixed(1);
  return Math.round(perSecond).toLocaleString('en-US');
}
