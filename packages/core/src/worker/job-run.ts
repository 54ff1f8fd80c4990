import { HandlerResultError, describeError } from '../protocol/errors.js';
import { SettleDirective, type Job, type JobContext } from './handler.js';
import type { Queue } from '../queue/queue.js';
import { backoffDelay } from '../store/retry.js';
import type { SettleRequest } from './settler.js';
import type { JobId, Row, Statement } from '../store/store.js';
import type { ResolvedTable } from '../protocol/table.js';
import type { TransitionSql } from '../sql/transition-sql.js';
import { columnOverflow } from '../protocol/columns.js';
import type { WorkerOptions, WorkerSettings } from './worker-options.js';
import type { HandlerRoutes } from './handler-routes.js';

/**
 * Where one claimed job stands, and so who decides its row's fate.
 * - `claimed`: in flight, no user code has run yet (a process that dies now never ran it: see unstartedClaims).
 * - `running`: the abuse rule or the handler has started; the heartbeat keeps the lease.
 * - `settling`: its own settle is submitted (a heartbeat that then finds the row gone is not a lost claim).
 *   It stays here when that settle fails: the row is left to the lease or the operator.
 * - `done`: its own settle came back (applied, or the claim found lost at settle).
 * - `committing`: ctx.transaction has sent its settle and awaits COMMIT: that transaction decides the row, so a
 *   heartbeat that finds the row gone meanwhile (it may be finding this very settle) changes nothing.
 * - `committed`: ctx.transaction committed the row done; when the handler returns, nothing is left to settle.
 * The rest mean the row's fate was taken out of the job's hands, so its own settle is skipped:
 * - `lost`: a heartbeat found the claim gone (lease taken over).
 * - `handedBack`: a stop past its timeout aborted it and released the claim.
 * - `settledStuck`: it outlived its timeout's grace; the run settles it as a failed attempt before ending.
 */
export type JobState = 'claimed' | 'running' | 'settling' | 'done' | 'committing' | 'committed' | 'lost' | 'handedBack' | 'settledStuck';

/** Where a job in flight reports its settle: the worker that claimed it. */
export interface FlightOwner {
  /** The guarded UPDATE that writes the flight's outcome. */
  settleStatement(flight: InFlight): Statement;
  settled(flight: InFlight, applied: boolean): void;
  settleFailed(flight: InFlight, error: unknown): void;
}

/**
 * One claimed job from its claim to its settle. It is its own settle request: one object per job instead of
 * a promise, its callbacks and a request object per settle. Fewer allocations on the hot path; an A/B on the
 * no-op burn-down on one adapter's store (1 x 256, 2026-12-03) found no throughput change beyond this VM's noise.
 */
export class InFlight implements SettleRequest {
  state: JobState = 'claimed';
  /** Made only when the handler reads ctx.signal: most never do, and an AbortController per job costs. */
  controller: AbortController | null = null;
  abortReason: Error | null = null;
  /** The job timeout's timer (then the grace timer), while one is armed. */
  timer: NodeJS.Timeout | null = null;
  /** The job ran past jobTimeoutMs: whatever its handler does next, the attempt failed. */
  timedOut = false;
  /** Still running past the timeout's grace: it no longer holds up a drain, and the run ends to recycle the process. */
  stuck = false;
  /** performance.now() when its user code started (0 before), and how long that code ran once it ended. */
  startedAt = 0;
  ranMs: number | null = null;
  /** What its settle writes, once its user code has ended (or what its ctx.transaction committed). */
  outcome: Outcome | null = null;
  /** How often the handler called ctx.transaction (once is allowed), and, while one is open, when it ends. */
  lendings = 0;
  lent: Promise<void> | null = null;

  constructor(
    readonly job: Job,
    readonly token: string | null,
    private readonly owner: FlightOwner,
  ) {}

  get id(): JobId {
    return this.job.id;
  }

  get completes(): string | null | undefined {
    const { outcome } = this;
    return outcome !== null && outcome.kind === 'complete' ? outcome.stored : undefined;
  }

  statement(): Statement {
    return this.owner.settleStatement(this);
  }

  settled(applied: boolean): void {
    this.owner.settled(this, applied);
  }

  failed(error: unknown): void {
    this.owner.settleFailed(this, error);
  }
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

/** The outcome of every handler that returned nothing and chose nothing: one object, not one per job. */
const COMPLETED_WITHOUT_RESULT: Outcome = Object.freeze({ kind: 'complete', result: undefined, stored: null });

/** The job a claimed row is: its payload parsed when it is JSON text, its attempt counted from one. */
export function jobFromRow(table: ResolvedTable, row: Row): Job {
  const { columns, id } = table;
  const attempts = columns.attemptCount ? Number(row[columns.attemptCount] ?? 0) : 0;
  let payload: unknown;
  if (columns.payload) {
    const raw = row[columns.payload];
    payload = raw;
    if (typeof raw === 'string') {
      try {
        payload = JSON.parse(raw);
      } catch {
        payload = raw;
      }
    }
  }
  const kind = columns.kind === undefined ? null : ((row[columns.kind] as string | null | undefined) ?? null);
  return { id: row[id] as JobId, row, attempt: attempts + 1, payload, kind };
}

/** The guarded UPDATE that settles `flight` with `outcome`. */
export function settleStatementFor(sql: TransitionSql, flight: InFlight, outcome: Outcome): Statement {
  const { job, token } = flight;
  return outcome.kind === 'complete'
    ? sql.complete(job.id, token, outcome.stored)
    : outcome.kind === 'abuse'
      ? sql.abuse(job.id, token, outcome.reason)
      : outcome.kind === 'giveUp'
        ? sql.giveUp(job.id, token, outcome.reason)
        : sql.retry(job.id, token, outcome.reason, outcome.delayMs);
}

export function abortFlight(flight: InFlight, reason: Error): void {
  flight.abortReason = reason;
  flight.controller?.abort(reason);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * A job's `ctx`. Its functions are made when read, so a handler that never calls them costs no closure, and
 * each one read is bound to this job: `const { giveUp } = ctx` works as well as `ctx.giveUp()`.
 */
/** Where a handler's ctx.progress values go (the worker's ProgressWriter, which paces the writes). */
export interface ProgressSink {
  report(flight: InFlight, value: unknown): void;
}

class FlightContext implements JobContext {
  /** The first settle directive the handler chose through this context, if any. */
  directive: SettleDirective | null = null;

  constructor(
    private readonly flight: InFlight,
    readonly workerId: string,
    private readonly progressWriter: ProgressSink,
    private readonly transactions: TransactionLender,
  ) {}

  get transaction(): JobContext['transaction'] {
    return (body, options) => this.transactions.run(this.flight, body, options);
  }

  get progress(): JobContext['progress'] {
    return (value) => this.progressWriter.report(this.flight, value);
  }

  get abuse(): JobContext['abuse'] {
    return (reason) => this.choose('abuse', reason, 'abuse');
  }

  get giveUp(): JobContext['giveUp'] {
    return (reason) => this.choose('giveUp', reason, 'gave up');
  }

  get signal(): AbortSignal {
    const { flight } = this;
    if (!flight.controller) {
      flight.controller = new AbortController();
      if (flight.abortReason) flight.controller.abort(flight.abortReason);
    }
    return flight.controller.signal;
  }

  private choose(kind: SettleDirective['kind'], reason: string | undefined, fallback: string): SettleDirective {
    const chosen = new SettleDirective(kind, typeof reason === 'string' && reason.length > 0 ? reason : fallback);
    this.directive ??= chosen;
    return chosen;
  }
}

/** Runs one claimed job's user code (the abuse rule, then the handler) and turns whatever happens into one outcome. */
/** Where a handler's ctx.transaction goes (JobTransactions). */
export interface TransactionLender {
  run<T>(flight: InFlight, body: (tx: never) => T | Promise<T>, options: { readonly knex?: unknown } | undefined): Promise<Awaited<T>>;
}

/**
 * A handler's result as the result column keeps it: JSON text, or null where the table has no such column or the
 * handler returned nothing. A HandlerResultError for a result that is not JSON or that the column cannot hold.
 */
export function storedResult(table: ResolvedTable, result: unknown): string | null {
  if (!table.columns.result || result === undefined) return null;
  let text: string | null;
  try {
    text = JSON.stringify(result) ?? null;
  } catch (error) {
    throw new HandlerResultError(`handler result is not JSON-serialisable: ${describeError(error)}`, { cause: error });
  }
  // Checked before the UPDATE: a result the column cannot hold would fail this settle and every retry of it.
  const overflow = text === null ? null : columnOverflow(text, table.limits.result);
  if (overflow !== null) throw new HandlerResultError(`handler result is too large to store: ${overflow}`);
  return text;
}

export class JobOutcomes {
  constructor(
    private readonly queue: Queue,
    private readonly settings: WorkerSettings,
    private readonly options: Pick<WorkerOptions, 'isAbuse'>,
    private readonly handlers: HandlerRoutes,
    private readonly progressWriter: ProgressSink,
    private readonly transactions: TransactionLender,
  ) {}

  /**
   * Runs the abuse rule and the handler and turns whatever happens into one outcome. A handler that returns
   * without a promise (and no abuse rule) is decided at once, with no promise of this method's own.
   */
  decide(flight: InFlight): Outcome | Promise<Outcome> {
    const ctx = new FlightContext(flight, this.settings.workerId, this.progressWriter, this.transactions);
    if (flight.state === 'claimed') flight.state = 'running';
    if (this.options.isAbuse) return this.decideAfterAbuseRule(flight, ctx);
    let result: unknown;
    try {
      result = this.handlers.handlerFor(flight.job)(flight.job, ctx);
    } catch (error) {
      return this.fromThrown(flight.job, ctx, error);
    }
    if (isThenable(result)) {
      return Promise.resolve(result).then(
        (value) => this.fromReturned(flight.job, ctx, value),
        (error: unknown) => this.fromThrown(flight.job, ctx, error),
      );
    }
    return this.fromReturned(flight.job, ctx, result);
  }

  private async decideAfterAbuseRule(flight: InFlight, ctx: FlightContext): Promise<Outcome> {
    try {
      if (await this.options.isAbuse!(flight.job.row)) return { kind: 'abuse', reason: 'isAbuse rule' };
      return this.fromReturned(flight.job, ctx, await this.handlers.handlerFor(flight.job)(flight.job, ctx));
    } catch (error) {
      return this.fromThrown(flight.job, ctx, error);
    }
  }

  /** A directive chosen through ctx wins over whatever the handler returned. */
  private fromReturned(job: Job, ctx: FlightContext, result: unknown): Outcome {
    const directive = ctx.directive ?? (result instanceof SettleDirective ? result : null);
    if (directive) return this.fromDirective(directive);
    if (result === undefined) return COMPLETED_WITHOUT_RESULT;
    try {
      return { kind: 'complete', result, stored: storedResult(this.queue.table, result) };
    } catch (error) {
      return this.failure(job, error);
    }
  }

  private fromThrown(job: Job, ctx: FlightContext, error: unknown): Outcome {
    const directive = ctx.directive ?? (error instanceof SettleDirective ? error : null);
    return directive ? this.fromDirective(directive) : this.failure(job, error);
  }

  private fromDirective(directive: SettleDirective): Outcome {
    return directive.kind === 'abuse' ? { kind: 'abuse', reason: directive.reason } : { kind: 'giveUp', reason: directive.reason };
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
