import { backoffDelay } from '../store/retry.js';

/**
 * The idle wait of a worker whose claim came back empty because a fleet-wide limit held rows back (a kind or a
 * group at its limit, a group's pace), not because nothing was due. The loop's usual idle wait ends as soon as a
 * row is due (a look-ahead, a store's idle probe), and the rows held back are due: it would claim again at once,
 * over and over. This wait backs off from pollMin to pollMax instead, shorter when a pace says when a group may
 * start again; a job of this worker ending cuts it short as it cuts every idle wait.
 */
export class HeldBackWait {
  private step = 0;
  private waitMs: number | null = null;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly poll: { pollMinMs: number; pollMaxMs: number; random: () => number }) {}

  /** After each claim: what it took, whether a limit held rows back, and when a pace frees one (null: not known). */
  claimed(rows: number, heldBack: boolean, freedInMs: number | null): void {
    if (rows > 0 || !heldBack) {
      this.step = 0;
      this.waitMs = null;
      return;
    }
    const backoff = backoffDelay(this.step++, { baseMs: this.poll.pollMinMs, maxMs: this.poll.pollMaxMs, random: this.poll.random });
    this.waitMs = freedInMs === null ? backoff : Math.min(backoff, Math.max(1, freedInMs));
  }

  /** The idle wait's end after a held-back claim (ClaimSource.arrival); null after any other. */
  arrival(): Promise<void> | null {
    if (this.waitMs === null) return null;
    this.stop();
    const ms = this.waitMs;
    return new Promise((resolve) => {
      this.timer = setTimeout(resolve, ms);
      // The loop's own bound ends the wait too; this timer must not keep a stopped process alive.
      this.timer.unref();
    });
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
