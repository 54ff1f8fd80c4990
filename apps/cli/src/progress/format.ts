/** jobs/s is measured over this last stretch, not the whole run. */
export const RATE_WINDOW_MS = 10_000;

/** Rate over the last RATE_WINDOW_MS from (time, running total) samples; the start (total 0) stays until then. */
export class RateWindow {
  private readonly samples: Array<{ at: number; total: number }>;

  constructor(start = Date.now(), private readonly windowMs = RATE_WINDOW_MS) {
    this.samples = [{ at: start, total: 0 }];
  }

  /** Records `total` at `now` and returns the per-second rate over the window up to it. */
  rate(total: number, now = Date.now()): number {
    this.samples.push({ at: now, total });
    while (this.samples.length > 2 && now - this.samples[1]!.at >= this.windowMs) this.samples.shift();
    const first = this.samples[0]!;
    const seconds = (now - first.at) / 1000;
    return seconds > 0 ? (total - first.total) / seconds : 0;
  }
}

/** `h:mm:ss`, or `m:ss` under an hour. */
export function clock(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = String(seconds % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

const BAR_WIDTH = 20;

/** `[######--------------]  30%` */
export function bar(fraction: number): string {
  const clamped = Math.min(1, Math.max(0, Number.isFinite(fraction) ? fraction : 0));
  const filled = Math.round(clamped * BAR_WIDTH);
  return `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${String(Math.floor(clamped * 100)).padStart(3)}%`;
}

/** Time to do `left` at `rate` per second; `?` while nothing moves. */
export function eta(left: number, rate: number): string {
  if (left <= 0) return clock(0);
  return rate > 0 ? clock((left / rate) * 1000) : '?';
}

/** part of whole, a whole of nothing being complete. */
export function fraction(part: number, whole: number): number {
  return whole <= 0 ? 1 : part / whole;
}

export function perSecond(rate: number): string {
  return rate >= 100 ? String(Math.round(rate)) : rate.toFixed(1);
}
