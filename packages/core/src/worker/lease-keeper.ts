import { StoreError } from '../protocol/errors.js';
import type { Job } from './handler.js';
import type { GivenUpRow, Queue } from '../queue/queue.js';

export interface LeaseSettings {
  leaseMs: number;
  heartbeatMs: number;
  reapIntervalMs: number;
  maxAttempts: number;
}

export interface LeaseHooks<C> {
  /** The claims whose leases to renew now. */
  held(): C[];
  /**
   * A renewal changed nothing: the row is no longer ours unless the worker settled or released it meanwhile.
   * `cancelled`: the row's last_error when an operator cancelled it (Queue.cancel), rather than a lease taken over.
   */
  lost(claim: C, cancelled?: string): void;
  /** Expired claims this worker charged an attempt: `count` in all, `givenUp` of them failed for good. */
  reaped(count: number, givenUp: GivenUpRow[]): void;
  error(error: unknown, during: 'heartbeat' | 'reap'): void;
}

/**
 * The two timers of a table with leases: the heartbeat renews the claims this worker holds, so a slow job
 * keeps its row, and the reaper returns rows whose lease expired (their worker died) to the queue. A tick
 * that finds the previous one still waiting on the database is skipped rather than stacked.
 */
export class LeaseKeeper<C extends { job: Job; token: string | null }> {
  private timers: NodeJS.Timeout[] = [];
  /** Ticks still waiting on the database (at most one heartbeat and one reap). */
  private readonly ticks = new Set<Promise<void>>();

  constructor(
    private readonly queue: Queue,
    private readonly settings: LeaseSettings,
    private readonly hooks: LeaseHooks<C>,
  ) {}

  /** Reaps once before the first claim, so rows a crashed predecessor left behind are not waited for. */
  async start(): Promise<void> {
    await this.reap();
    this.every(this.settings.reapIntervalMs, () => this.reap());
    this.every(this.settings.heartbeatMs, () => this.heartbeat());
  }

  /**
   * No more ticks; resolves once a tick already under way is done, so a reap that gave rows up has told
   * `reaped` (their dead letters) before the worker closes its broker.
   */
  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    await Promise.allSettled([...this.ticks]);
  }

  private async heartbeat(): Promise<void> {
    const live = this.hooks.held();
    if (live.length === 0) return;
    try {
      const results = await this.queue.apply(live.map((c) => this.queue.sql.heartbeat(c.job.id, c.token)));
      const lost = live.filter((_, i) => results[i]!.affected === 0);
      if (lost.length === 0) return;
      // Only a claim found gone costs this read: its handler is told why (a cancel or a lease taken over).
      const cancelled = await this.queue.cancelledAmong(lost.map((c) => c.job.id)).catch(() => new Map<string, string>());
      for (const claim of lost) this.hooks.lost(claim, cancelled.get(String(claim.job.id)));
    } catch (error) {
      this.hooks.error(error, 'heartbeat');
    }
  }

  private async reap(): Promise<void> {
    try {
      const { charged, givenUp } = await this.queue.reapExpired(this.settings.leaseMs, this.settings.maxAttempts);
      if (charged > 0) this.hooks.reaped(charged, givenUp);
    } catch (error) {
      // Every worker reaps, so after a crash several reach the same expired rows at once and all but one meet
      // a write conflict (a deadlock, on a server that detects them): the rows are being reaped, and the next tick takes any left.
      if (error instanceof StoreError && error.kind === 'WriteConflict') return;
      this.hooks.error(error, 'reap');
    }
  }

  private every(ms: number, task: () => Promise<void>): void {
    let busy = false;
    const timer = setInterval(() => {
      if (busy) return;
      busy = true;
      const tick: Promise<void> = task().finally(() => {
        busy = false;
        this.ticks.delete(tick);
      });
      this.ticks.add(tick);
    }, ms);
    timer.unref?.();
    this.timers.push(timer);
  }
}
