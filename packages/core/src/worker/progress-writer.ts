import { ConfigError, describeError } from '../protocol/errors.js';
import { beforeSettle, type InFlight } from './job-run.js';
import type { Queue } from '../queue/queue.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import { missingColumnError } from '../sql/schema.js';
import { columnOverflow } from '../protocol/columns.js';

/** The shortest time between two progress writes of one job: a handler calling ctx.progress in a loop writes 4 times a second at most. */
export const PROGRESS_INTERVAL_MS = 250;
/** The longest progress value, as JSON text: it is a status line, not a result. */
export const MAX_PROGRESS_LENGTH = 1_000;

/** A job's progress between writes: the latest value not yet written, and when the last write started. */
interface ProgressState {
  lastWriteAt: number;
  pending: string | null;
  timer: NodeJS.Timeout | null;
  writing: boolean;
}

/**
 * ctx.progress for every job of a worker: checks the value, keeps only the latest, and writes it with a fenced
 * UPDATE at most every PROGRESS_INTERVAL_MS per job, one write at a time. A write that fails is reported and
 * dropped (the next value tries again); it never fails the job. Nothing is written once the job's outcome is
 * being settled.
 */
export class ProgressWriter {
  private readonly states = new WeakMap<InFlight, ProgressState>();

  constructor(
    private readonly queue: Queue,
    private readonly failed: (error: unknown) => void,
  ) {}

  report(flight: InFlight, value: unknown): void {
    const text = this.textOf(value);
    if (!beforeSettle(flight)) return;
    let state = this.states.get(flight);
    if (!state) this.states.set(flight, (state = { lastWriteAt: -Infinity, pending: null, timer: null, writing: false }));
    state.pending = text;
    this.schedule(flight, state);
  }

  private schedule(flight: InFlight, state: ProgressState): void {
    if (state.writing || state.timer || state.pending === null) return;
    const wait = state.lastWriteAt + PROGRESS_INTERVAL_MS - performance.now();
    if (wait <= 0) {
      void this.write(flight, state);
      return;
    }
    state.timer = setTimeout(() => {
      state.timer = null;
      void this.write(flight, state);
    }, wait);
    // A value still waiting must not keep a finished process alive.
    state.timer.unref();
  }

  private async write(flight: InFlight, state: ProgressState): Promise<void> {
    const text = state.pending;
    state.pending = null;
    if (text === null || !beforeSettle(flight)) return;
    state.writing = true;
    state.lastWriteAt = performance.now();
    try {
      await withStoreRetry(() => this.queue.apply([this.queue.sql.progress(flight.id, flight.token, text)]), STORE_RETRY.release);
    } catch (error) {
      this.failed(error);
    } finally {
      state.writing = false;
    }
    this.schedule(flight, state);
  }

  /** The value as the column keeps it: JSON text of a number from 0 to 100 or of a small JSON value. */
  private textOf(value: unknown): string {
    const column = this.queue.table.columns.progress;
    if (column === undefined) throw missingColumnError(this.queue.table.table, 'progress', 'ctx.progress');
    if (typeof value === 'number' && !(Number.isFinite(value) && value >= 0 && value <= 100)) {
      throw new ConfigError(`ctx.progress: a number must be from 0 to 100, got ${String(value)}`);
    }
    let text: string | undefined;
    try {
      text = JSON.stringify(value);
    } catch (error) {
      throw new ConfigError(`ctx.progress: the value is not JSON-serialisable: ${describeError(error)}`);
    }
    if (text === undefined || value === null) throw new ConfigError(`ctx.progress: give a number from 0 to 100 or a JSON value, got ${value === null ? 'null' : typeof value}`);
    if (text.length > MAX_PROGRESS_LENGTH) throw new ConfigError(`ctx.progress: the value is ${text.length} characters as JSON; at most ${MAX_PROGRESS_LENGTH}`);
    const overflow = columnOverflow(text, this.queue.table.limits.progress);
    if (overflow !== null) throw new ConfigError(`ctx.progress: the value does not fit column ${column}: ${overflow}`);
    return text;
  }
}
