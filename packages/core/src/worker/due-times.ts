import type { Queue } from '../queue/queue.js';

/**
 * Past the due time of a row this worker retried, before the idle wait ends: the database set next_attempt_at
 * from its own clock as the settle committed, a moment after this process computed the same instant.
 */
const KNOWN_DUE_SLACK_MS = 5;
/** Due times of its own retries a worker keeps at most (the earliest are what matter; more waits for a poll). */
const MAX_KNOWN_DUE = 1_000;

/**
 * When the rows a worker knows of come due, on this process's clock: the ones it retried, and the earliest the
 * database named when asked (lookAhead). An idle wait ends at the earliest rather than at the next poll, which on
 * a store that wakes on inserts (`listenNotify`: notifications, a file watch) or polls up to pollMaxMs would pick a retry up to a
 * second late.
 */
export class DueTimes {
  private retries: number[] = [];
  /** When the database last said its earliest waiting row comes due. */
  private lookedAhead: number | null = null;

  retried(delayMs: number): void {
    if (this.retries.length < MAX_KNOWN_DUE) this.retries.push(Date.now() + delayMs);
  }

  /** `waitMs`, cut short to end just after the earliest row known to come due. */
  waitUntilDue(waitMs: number): number {
    const now = Date.now();
    // Due times passed: the claim just made has taken those rows, or another worker has.
    if (this.retries.length > 0) this.retries = this.retries.filter((at) => at + KNOWN_DUE_SLACK_MS > now);
    if (this.lookedAhead !== null && this.lookedAhead + KNOWN_DUE_SLACK_MS <= now) this.lookedAhead = null;
    const earliest = Math.min(...this.retries, this.lookedAhead ?? Number.POSITIVE_INFINITY);
    return earliest === Number.POSITIVE_INFINITY ? waitMs : Math.min(waitMs, earliest + KNOWN_DUE_SLACK_MS - now);
  }

  /** Asks the database when its earliest waiting row comes due (Queue.msUntilNextDue). */
  async lookAhead(queue: Queue): Promise<void> {
    try {
      const ms = await queue.msUntilNextDue();
      // Due by now (it came due since the query's clock read): the wait is the slack, then the claim takes it.
      this.lookedAhead = ms === null ? null : Date.now() + Math.max(0, ms);
    } catch {
      // The next claim meets the same trouble and reports it; meanwhile the wait is the poll's.
      this.lookedAhead = null;
    }
  }
}
