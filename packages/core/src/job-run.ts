import { HandlerResultError, describeError } from './errors.js';
import { SettleDirective, type Job, type JobContext } from './handler.js';
import type { Queue } from './queue.js';
import { backoffDelay } from './retry.js';
import { columnOverflow } from './table.js';
import type { WorkerOptions, WorkerSettings } from './worker-options.js';

/**
 * Where one claimed job stands, and so who decides its row's fate.
 * - `claimed`: in flight, no user code has run yet (a process that dies now never ran it: see unstartedClaims).
 * - `running`: the abuse rule or the handler has started; the heartbeat keeps the lease.
 * - `settling`: its own settle is submitted (a heartbeat that then finds the row gone is not a lost claim).
 *   It stays here when that settle fails: the row is left to the lease or the operator.
 * - `done`: its own settle came back (applied, or the claim found lost at settle).
 * The rest mean the row's fate was taken out of the job's hands, so its own settle is skipped:
 * - `lost`: a heartbeat found the claim gone (lease taken over).
 * - `handedBack`: a stop past its timeout aborted it and released the claim.
 * - `settledStuck`: it outlived its timeout's grace; the run settles it as a failed attempt before ending.
 */
export type JobState = 'claimed' | 'running' | 'settling' | 'done' | 'lost' | 'handedBack' | 'settledStuck';

export interface InFlight {
  job: Job;
  token: string | null;
  state: JobState;
  /** Made only when the handler reads ctx.signal: most never do, and an AbortController per job costs. */
  controller: AbortController | null;
  abortReason: Error | null;
  /** The job timeout's timer (then the grace timer), while one is armed. */
  timer: NodeJS.Timeout | null;
  /** The job ran past jobTimeoutMs: whatever its handler does next, the attempt failed. */
  timedOut: boolean;
  /** Still running past the timeout's grace: it no longer holds up a drain, and the run ends to recycle the process. */
  stuck: boolean;
  /** performance.now() when its user code started (0 before), and how long that code ran once it ended. */
  startedAt: number;
  ranMs: number | null;
}

/** How long the job's user code ran: to its end, or until now for one still running (settled as stuck). */
export function ranFor(flight: InFlight): number {
  return flight.ranMs ?? performance.now() - flight.startedAt;
}

/** Claimed and not yet settling: the lease is ours to renew, and a timeout or a lost lease still changes the outcome. */
export function beforeSettle(flight: InFlight): boolean {
  return flight.state === 'claimed' || flight.state === 'running';
}

/** Nobody has decided the row's fate yet, or its own settle did not get through: a stop may still hand it back. */
export function undecided(flight: InFlight): boolean {
  return beforeSettle(flight) || flight.state === 'settling';
}

export type Outcome =
  | { kind: 'complete'; result: unknown; stored: string | null }
  | { kind: 'abuse'; reason: string }
  | { kind: 'giveUp'; reason: string; cause?: unknown }
  | { kind: 'retry'; reason: string; delayMs: number; cause?: unknown };

export function abortFlight(flight: InFlight, reason: Error): void {
  flight.abortReason = reason;
  flight.controller?.abort(reason);
}

/** Runs one claimed job's user code (the abuse rule, then the handler) and turns whatever happens into one outcome. */
export class JobOutcomes {
  constructor(
    private readonly queue: Queue,
    private readonly settings: WorkerSettings,
    private readonly options: Pick<WorkerOptions, 'handler' | 'isAbuse'>,
  ) {}

  /** Runs the abuse rule and the handler and turns whatever happens into one outcome. */
  async decide(flight: InFlight): Promise<Outcome> {
    const { job } = flight;
    let directive: SettleDirective | null = null;
    const choose = (kind: SettleDirective['kind'], reason: string | undefined, fallback: string) => {
      const chosen = new SettleDirective(kind, typeof reason === 'string' && reason.length > 0 ? reason : fallback);
      directive ??= chosen;
      return chosen;
    };
    const ctx: JobContext = {
      abuse: (reason) => choose('abuse', reason, 'abuse'),
      giveUp: (reason) => choose('giveUp', reason, 'gave up'),
      get signal() {
        if (!flight.controller) {
          flight.controller = new AbortController();
          if (flight.abortReason) flight.controller.abort(flight.abortReason);
        }
        return flight.controller.signal;
      },
      workerId: this.settings.workerId,
    };
    if (flight.state === 'claimed') flight.state = 'running';
    try {
      if (this.options.isAbuse && (await this.options.isAbuse(job.row))) return { kind: 'abuse', reason: 'isAbuse rule' };
      const result = await this.options.handler(job, ctx);
      if (directive ?? result instanceof SettleDirective) return this.fromDirective(directive ?? (result as SettleDirective));
      return { kind: 'complete', result, stored: this.storedResult(result) };
    } catch (error) {
      if (directive ?? error instanceof SettleDirective) return this.fromDirective(directive ?? (error as SettleDirective));
      return this.failure(job, error);
    }
  }

  private fromDirective(directive: SettleDirective): Outcome {
    return directive.kind === 'abuse' ? { kind: 'abuse', reason: directive.reason } : { kind: 'giveUp', reason: directive.reason };
  }

  private storedResult(result: unknown): string | null {
    if (!this.queue.table.columns.result || result === undefined) return null;
    let text: string | null;
    try {
      text = JSON.stringify(result) ?? null;
    } catch (error) {
      throw new HandlerResultError(`handler result is not JSON-serialisable: ${describeError(error)}`, { cause: error });
    }
    // Checked before the UPDATE: a result the column cannot hold would fail this settle and every retry of it.
    const overflow = text === null ? null : columnOverflow(text, this.queue.table.limits.result);
    if (overflow !== null) throw new HandlerResultError(`handler result is too large to store: ${overflow}`);
    return text;
  }

  failure(job: Job, error: unknown): Extract<Outcome, { kind: 'giveUp' | 'retry' }> {
    const reason = describeError(error);
    const permanent = error instanceof HandlerResultError || (typeof error === 'object' && error !== null && (error as { retryable?: unknown }).retryable === false);
    if (permanent || !this.queue.table.features.retries || job.attempt >= this.settings.maxAttempts) return { kind: 'giveUp', reason, cause: error };
    const delayMs = this.queue.table.features.backoff
      ? backoffDelay(job.attempt - 1, { baseMs: this.settings.retryDelayMs, maxMs: this.settings.maxRetryDelayMs, random: this.settings.random })
      : 0;
    return { kind: 'retry', reason, delayMs, cause: error };
  }
}
