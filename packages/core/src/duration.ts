import { ConfigError } from './errors.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses `250ms`, `30s`, `5m`, `1h`, `2d` or a bare number of milliseconds. */
export function parseDuration(text: string | number, what = 'duration'): number {
  if (typeof text === 'number') {
    if (!Number.isFinite(text) || text < 0) throw new ConfigError(`${what} must be a non-negative number of milliseconds`);
    return text;
  }
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!match) throw new ConfigError(`invalid ${what} ${JSON.stringify(text)}: use a number with ms, s, m, h or d (e.g. 30s)`);
  return Math.round(Number(match[1]) * UNIT_MS[match[2] ?? 'ms']!);
}

/** The largest unit that states `ms` exactly: 300000 -> `5m`, 1500 -> `1500ms`. */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    const size = UNIT_MS[unit]!;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
