import { ConfigError } from './errors.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * The longest duration statusq accepts: 24 days. Node's timers cannot wait longer than 2^31-1 ms (about
 * 24.8 days); a longer delay fires after 1 ms instead, which turned `--lease 100d` into a heartbeat loop.
 */
export const MAX_DURATION_MS = 24 * 86_400_000;

/**
 * The longest delay a job may be enqueued with: 100 years. Nothing waits on a timer for it (the row's
 * next_attempt_at holds it), so Node's timer bound does not apply.
 */
export const MAX_DELAY_MS = 100 * 365 * 86_400_000;

/** What bounds a duration, and why, for the message that refuses a longer one. */
export interface DurationLimit {
  readonly ms: number;
  readonly why: string;
}

const TIMER_LIMIT: DurationLimit = { ms: MAX_DURATION_MS, why: "Node's timers cannot wait longer" };
/** The bound of a job's delay (enqueue --delay, delayMs). */
export const DELAY_LIMIT: DurationLimit = { ms: MAX_DELAY_MS, why: 'a delay is kept for at most 100 years' };

/**
 * Parses `250ms`, `30s`, `5m`, `1h` or `2d`; a number is already milliseconds. Text needs a unit: a bare
 * `30` meant 30 ms where users meant seconds. Anything above `limit` (default MAX_DURATION_MS) is refused.
 */
export function parseDuration(text: string | number, what = 'duration', limit: DurationLimit = TIMER_LIMIT): number {
  if (typeof text === 'number') {
    if (!Number.isFinite(text) || text < 0 || text > limit.ms) {
      throw new ConfigError(`${what} must be a number of milliseconds from 0 to ${limit.ms} (${formatDuration(limit.ms)}), got ${String(text)}`);
    }
    return text;
  }
  if (typeof text !== 'string') throw new ConfigError(`${what} must be a duration such as 30s or a number of milliseconds, got ${JSON.stringify(text) ?? typeof text}`);
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!match) throw new ConfigError(`invalid ${what} ${JSON.stringify(text)}: use a number with ms, s, m, h or d (e.g. 30s)`);
  const [, amount, unit] = match;
  if (unit === undefined) throw new ConfigError(`${what} ${amount} has no unit: write ${amount}s or ${amount}ms (units: ms, s, m, h, d)`);
  const ms = Math.round(Number(amount) * UNIT_MS[unit]!);
  if (ms > limit.ms) throw new ConfigError(`${what} ${text.trim()} is too long: at most ${formatDuration(limit.ms)} (${limit.why})`);
  return ms;
}

/** The largest unit that states `ms` exactly: 300000 -> `5m`, 1500 -> `1500ms`. */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    const size = UNIT_MS[unit]!;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
