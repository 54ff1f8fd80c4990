// /api/throughput: the row counts sampled over time, so the page can draw jobs per second without every
// open page (or every poll) running its own GROUP BY over the whole table.
import type { StatusCounts } from '@statusq/core';
import type { ThroughputSample } from './api-types.js';

export interface SamplerOptions {
  /** Never sample more often than this (default 2 s). */
  minIntervalMs?: number;
  /** Nor more often than this many times the last count took: a slow count on a big table is not run back to back. */
  costFactor?: number;
  /** Stop sampling when no client asked for this long (default 60 s); the next read starts it again. */
  idleMs?: number;
  /** Samples older than this are dropped (default 10 min). */
  windowMs?: number;
  /** A count that failed (the database is down): no sample, and the next one is tried on schedule. */
  onError?: (error: unknown) => void;
}

/**
 * One timer, never two counts at once: the next count is scheduled when the previous one ends, after an
 * interval that adapts to what the count costs. Timers are unref'd, so sampling never keeps a process alive.
 */
export class ThroughputSampler {
  private readonly minIntervalMs: number;
  private readonly costFactor: number;
  private readonly idleMs: number;
  private readonly windowMs: number;
  /** At most one sample per minIntervalMs fits in the window. */
  private readonly capacity: number;
  private samples: ThroughputSample[] = [];
  private timer: NodeJS.Timeout | null = null;
  private counting: Promise<void> | null = null;
  private lastAskedAt = 0;
  private closed = false;
  private interval: number;

  constructor(
    private readonly count: () => Promise<StatusCounts>,
    private readonly options: SamplerOptions = {},
  ) {
    this.minIntervalMs = options.minIntervalMs ?? 2_000;
    this.costFactor = options.costFactor ?? 20;
    this.idleMs = options.idleMs ?? 60_000;
    this.windowMs = options.windowMs ?? 600_000;
    this.capacity = Math.ceil(this.windowMs / this.minIntervalMs) + 1;
    this.interval = this.minIntervalMs;
  }

  /** The samples of the window, oldest first; asking keeps sampling going (or starts it again). */
  read(): { intervalMs: number; samples: ThroughputSample[] } {
    this.lastAskedAt = Date.now();
    if (!this.closed && this.timer === null && this.counting === null) this.sample();
    const since = Date.now() - this.windowMs;
    return { intervalMs: this.interval, samples: this.samples.filter((s) => s.t >= since) };
  }

  /** Whether a count is running or scheduled. */
  get active(): boolean {
    return this.timer !== null || this.counting !== null;
  }

  /** Stops sampling; resolves once a count in flight has ended, so the store can be closed after it. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.counting;
  }

  private sample(): void {
    this.timer = null;
    const started = performance.now();
    this.counting = this.count()
      .then((counts) => {
        this.interval = Math.max(this.minIntervalMs, Math.ceil((performance.now() - started) * this.costFactor));
        this.push({ t: Date.now(), done: counts.done, failed: counts.failed, abuse: counts.abuse, pending: counts.pending, processing: counts.processing });
      })
      .catch((error: unknown) => this.options.onError?.(error))
      .finally(() => {
        this.counting = null;
        if (this.closed || Date.now() - this.lastAskedAt > this.idleMs) return;
        this.timer = setTimeout(() => this.sample(), this.interval);
        this.timer.unref();
      });
  }

  private push(sample: ThroughputSample): void {
    const since = sample.t - this.windowMs;
    let drop = 0;
    while (drop < this.samples.length && this.samples[drop]!.t < since) drop++;
    if (this.samples.length - drop + 1 > this.capacity) drop = this.samples.length + 1 - this.capacity;
    if (drop > 0) this.samples = this.samples.slice(drop);
    this.samples.push(sample);
  }
}
