import { StoreError } from '../protocol/errors.js';
import { backoffDelay, sleep } from '../store/retry.js';
import type { RefusedWrites } from './seams.js';

/**
 * How long a worker waits, by default, for a read-only database to take writes again before its run ends.
 * Failovers that turn the old primary read-only or leave a pooled connection on a demoted node finish within
 * this in the published figures: Amazon RDS Multi-AZ "typically 60-120 seconds", Aurora "usually under 30
 * seconds" (plus a 5 s DNS TTL), Patroni's defaults (ttl 30 s, loop_wait 10 s) about 30-40 s,
 * orchestrator / MHA 10-30 s. 120 s covers the slowest of them with the worker's last check included; a
 * worker pointed at a replica by mistake still ends with a clear error within two minutes.
 */
export const DEFAULT_READ_ONLY_WAIT_MS = 120_000;
/**
 * The longest pause between two checks while waiting: a failover that has finished is noticed within this,
 * and a read-only server costs one refused claim per this at most (not a tight loop of them).
 */
export const READ_ONLY_CHECK_MAX_MS = 5_000;

/** Whether `error` is the database refusing writes for now (a replica, a standby, a failover). */
export function isReadOnlyError(error: unknown): error is StoreError {
  return error instanceof StoreError && error.kind === 'ReadOnly';
}

export interface ReadOnlyHooks {
  /** The first refusal of a wait: one event, however many claims and settles meet it. */
  started(error: StoreError, during: string, waitMs: number): void;
  /** A write went through after a wait: one event. */
  ended(durationMs: number): void;
}

/**
 * One worker's wait for a read-only database, shared by its claim loop and its settles so that a failover
 * is one wait (one line when it starts, one when it ends) and one bound, whoever met it first. The bound
 * runs from the first refusal; every check after it is spaced by capped exponential backoff from the poll
 * interval up to READ_ONLY_CHECK_MAX_MS.
 */
export class ReadOnlyWait implements RefusedWrites {
  private since: number | null = null;
  private readonly controller = new AbortController();

  constructor(
    /** The bound; 0 ends the run at the first refusal. */
    readonly boundMs: number,
    /** The worker's idle poll interval (pollMaxMs): no check comes sooner than this after the last one. */
    private readonly pollMs: number,
    private readonly random: () => number,
    private readonly hooks: ReadOnlyHooks,
  ) {}

  handles(error: unknown): error is StoreError {
    return isReadOnlyError(error);
  }

  get waiting(): boolean {
    return this.since !== null;
  }

  /** Records a refusal (starting the wait on the first one); false once the bound is spent or the wait was cancelled. */
  refused(error: StoreError, during: string): boolean {
    if (this.since === null) {
      this.since = performance.now();
      this.hooks.started(error, during, this.boundMs);
    }
    return !this.controller.signal.aborted && performance.now() - this.since < this.boundMs;
  }

  /** A write (or a claim) went through: the wait, if any, is over. */
  writable(): void {
    if (this.since === null) return;
    const durationMs = performance.now() - this.since;
    this.since = null;
    this.hooks.ended(durationMs);
  }

  /**
   * The pause before check `step` (0-based) of this wait: at least the poll interval, doubling to
   * READ_ONLY_CHECK_MAX_MS, never past the end of the bound.
   */
  delay(step: number): number {
    const floor = Math.min(this.pollMs, READ_ONLY_CHECK_MAX_MS);
    const jittered = Math.max(floor, backoffDelay(step, { baseMs: Math.max(floor, 1), maxMs: Math.max(floor, READ_ONLY_CHECK_MAX_MS), random: this.random }));
    const left = this.since === null ? jittered : this.boundMs - (performance.now() - this.since);
    // One last check right at the bound, so a server back just before it is not given up on.
    return Math.max(0, Math.min(jittered, Math.ceil(left)));
  }

  /** Sleeps `delay(step)`, cut short by cancel(). */
  pause(step: number): Promise<void> {
    return sleep(this.delay(step), this.controller.signal);
  }

  /** Ends every pause now and makes every later refusal final: the worker stopped and handed its claims back. */
  cancel(): void {
    this.controller.abort();
  }

  /** The error that ends a run whose wait ran out: names the server's state and what to check. */
  exhausted(error: StoreError): StoreError {
    const seconds = Math.round(this.boundMs / 100) / 10;
    return new StoreError(
      'ReadOnly',
      `the database is read-only and did not take writes again within ${seconds} s (readOnlyWaitMs / --read-only-wait): ` +
        // What to check on the server is the adapter's to say, in the refusal's own message.
        `it is a replica or hot standby, or a failover left this connection on a read-only node; point the URL at the primary (the writer endpoint). Last refusal: ${error.message}`,
      error.nativeCode,
      { cause: error },
    );
  }
}

/**
 * Runs `operation` again after each ReadOnly refusal, paced and bounded by `wait`; every other outcome
 * (success, another error, the bound spent) is the operation's. A success ends the wait.
 */
export async function whileReadOnly<T>(wait: RefusedWrites, during: string, operation: () => Promise<T>): Promise<T> {
  for (let step = 0; ; step++) {
    try {
      const result = await operation();
      wait.writable();
      return result;
    } catch (error) {
      if (!wait.handles(error)) throw error;
      if (!wait.refused(error, during)) throw wait.exhausted(error);
      await wait.pause(step);
    }
  }
}
