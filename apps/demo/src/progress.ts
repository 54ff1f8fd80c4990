import type { Queue, StatusCounts } from '@statusq/core';

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

export function formatCounts(c: StatusCounts): string {
  return `pending ${fmt(c.pending)}  processing ${fmt(c.processing)}  done ${fmt(c.done)}  abuse ${fmt(c.abuse)}  failed ${fmt(c.failed)}${c.other > 0 ? `  other ${fmt(c.other)}` : ''}`;
}

/** Rows that reached a final state. Retries go back to pending, so this is what "jobs done" means here. */
export function finished(c: StatusCounts): number {
  return c.done + c.abuse + c.failed;
}

/**
 * The live status line. On a terminal it redraws one line five times a second; piped into a file or CI
 * log it prints a plain line each second instead, since carriage returns there pile up into one
 * unreadable line. It reads counts through its own queue handle so it never borrows a worker's connection.
 */
export class ProgressLine {
  private readonly tty: boolean;
  private timer: NodeJS.Timeout | null = null;
  private sampling: Promise<void> | null = null;
  private readonly startedAt = performance.now();
  private last = { at: this.startedAt, finished: 0 };

  constructor(
    private readonly queue: Queue,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.tty = stream.isTTY === true;
  }

  start(): void {
    this.timer = setInterval(() => {
      this.sampling ??= this.sample().finally(() => (this.sampling = null));
    }, this.tty ? 200 : 1000);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.sampling;
    if (this.tty) this.stream.write('\n');
  }

  private async sample(): Promise<void> {
    let counts: StatusCounts;
    try {
      counts = await this.queue.counts();
    } catch {
      return; // A missed sample only makes the line skip a beat.
    }
    const now = performance.now();
    const done = finished(counts);
    const rate = ((done - this.last.finished) * 1000) / Math.max(1, now - this.last.at);
    this.last = { at: now, finished: done };
    const elapsed = ((now - this.startedAt) / 1000).toFixed(1).padStart(5);
    const line = `${elapsed} s  ${formatCounts(counts)}  ${fmt(rate)} jobs/s`;
    this.stream.write(this.tty ? `\r${line}\x1b[K` : `${line}\n`);
  }
}
