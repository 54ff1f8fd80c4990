import { settlesWithin } from '../store/deadline.js';
import { JobTimeoutError, JobTransactionError, describeError, isRetryableStoreError } from '../protocol/errors.js';
import type { Job } from './handler.js';
import type { GivenUpRow, Queue } from '../queue/queue.js';
import { InFlight, JobOutcomes, abortFlight, beforeSettle, ranFor, settleStatementFor, undecided, type FlightOwner, type Outcome } from './job-run.js';
import type { DueTimes } from './due-times.js';
import type { WorkerEventName, WorkerEvents } from './events.js';
import type { WorkerPlugs } from './plugs.js';
import { Settler } from './settler.js';
import { JobTransactions } from './job-transaction.js';
import { HAND_BACK_DEADLINE_MS, type WorkerCounters } from './reports.js';
import type { WakeUps } from './wake-ups.js';
import type { WorkerOptions, WorkerSettings } from './worker-options.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import type { JobId } from '../store/store.js';

/** What the jobs in flight tell the worker that runs them. */
export interface FlightHooks {
  emit<K extends WorkerEventName>(name: K, event: WorkerEvents[K]): void;
  /** Settles fail for a reason retrying cannot fix: the run ends with `error`. */
  endRun(error: unknown): void;
  /** A handler ignored its timeout's abort: the run winds down so the process can be recycled. */
  recycle(): void;
}

/**
 * A worker's jobs from claim to settle: each one's run, timeout, outcome and grouped settle, what it counts and
 * reports, and the hand-back of the unfinished ones when a stop runs out of time. The worker loop decides when
 * to claim; this decides what becomes of each row claimed.
 */
export class Flights {
  private readonly inFlight = new Set<InFlight>();
  /**
   * The flights of inFlight whose user code has ended and whose settle is submitted: they hold a row, not a
   * slot. The next claim goes out while their settle commits instead of after it (see freeSlots).
   */
  private readonly settling = new Set<InFlight>();
  private readonly settler: Settler;
  private readonly outcomes: JobOutcomes;
  /** Set once a stop past its timeout handed the unfinished claims back: nothing waits for them any more. */
  handedBack = false;
  /** Where every flight reports its settle. */
  private readonly flightOwner: FlightOwner = {
    settleStatement: (flight) => settleStatementFor(this.queue.sql, flight, flight.outcome!),
    settled: (flight, applied) => this.settled(flight, applied),
    settleFailed: (flight, error) => this.settleFailed(flight, error),
  };

  constructor(
    private readonly queue: Queue,
    private readonly settings: WorkerSettings,
    options: WorkerOptions,
    private readonly plugs: WorkerPlugs,
    private readonly counters: WorkerCounters,
    private readonly dueTimes: DueTimes,
    private readonly wakeUps: WakeUps,
    private readonly hooks: FlightHooks,
  ) {
    this.settler = new Settler(queue, settings.settleBatch, (error) => hooks.emit('error', { error, during: 'settle' }), plugs.refusedWrites);
    this.outcomes = new JobOutcomes(queue, settings, options, settings.routes, plugs.progress, new JobTransactions(queue));
  }

  get size(): number {
    return this.inFlight.size;
  }

  /** No job in flight and every settle committed. */
  get idle(): boolean {
    return this.inFlight.size === 0 && this.settler.idle;
  }

  /** The flights whose lease the heartbeat keeps: those not yet settling. */
  held(): InFlight[] {
    return [...this.inFlight].filter(beforeSettle);
  }

  /** The claims held whose handlers have not started (Worker.unstartedClaims). */
  unstartedClaims(): Array<{ id: JobId; token: string | null }> {
    return [...this.inFlight].filter((f) => f.state === 'claimed').map((f) => ({ id: f.job.id, token: f.token }));
  }

  /**
   * Slots to claim for: `concurrency` bounds the handlers running at once, and a job whose settle is in flight
   * no longer runs one. So the next claim overlaps the last batch's settle rather than waiting for its commit:
   * one worker of 64 slots, one adapter's server 5 ms away (the TCP proxy), a cycle of claim (2 round trips) then settle (1)
   * became one of 2 (docs/benchmarks.md, "Claim round trips"). Only once a settle went through at once, and
   * while they do: before the first commit, and after one that was retried, split or waited out a read-only
   * database, a settling job holds its slot as before, so a worker in trouble claims no rows it may not be able
   * to finish. And the rows held stay within twice the concurrency.
   */
  freeSlots(): number {
    const { concurrency } = this.settings;
    if (!this.settler.healthy || this.plugs.refusedWrites.waiting) return concurrency - this.inFlight.size;
    const running = this.inFlight.size - this.settling.size;
    return Math.min(concurrency - running, 2 * concurrency - this.inFlight.size);
  }

  /**
   * Every claim of the batch is in flight before any handler runs: a handler that ends the process from its
   * first synchronous step leaves the rest listed as claimed but not started (see unstartedClaims).
   */
  start(jobs: readonly Job[], token: string | null): void {
    const flights = jobs.map((job) => new InFlight(job, token, this.flightOwner));
    for (const flight of flights) this.inFlight.add(flight);
    for (const flight of flights) {
      if (this.settings.jobTimeoutMs !== null) flight.timer = setTimeout(() => this.timeOut(flight), this.settings.jobTimeoutMs);
      this.execute(flight);
    }
  }

  /**
   * Runs one job's user code and submits its settle. No promise of its own: a handler that returns at once
   * goes straight to the settler, and the flight hears back through settled/settleFailed. Its slot is free
   * again (finish) however it ends.
   */
  private execute(flight: InFlight): void {
    flight.startedAt = performance.now();
    const { tracing } = this.plugs;
    const decided = tracing === null ? this.outcomes.decide(flight) : tracing.run(flight, () => this.outcomes.decide(flight));
    if (decided instanceof Promise) {
      // decide turns every throw into an outcome; a rejection here would be a bug, still settled as a failure.
      decided.then(
        (outcome) => this.decided(flight, outcome),
        (error: unknown) => this.decided(flight, this.outcomes.failure(flight.job, error)),
      );
    } else {
      this.decided(flight, decided);
    }
  }

  private decided(flight: InFlight, outcome: Outcome): void {
    flight.ranMs ??= performance.now() - flight.startedAt;
    if (flight.timer) clearTimeout(flight.timer);
    // A handler that returned without awaiting its ctx.transaction: that transaction decides first.
    const { lent } = flight;
    if (lent) return void lent.then(() => this.decided(flight, outcome));
    if (flight.state === 'committed') return this.committedInTransaction(flight, outcome);
    // Lost, handed back or settled as stuck while the handler ran: that already decided the row.
    if (flight.state !== 'running') return this.finish(flight);
    flight.outcome = flight.timedOut ? this.outcomes.failure(flight.job, flight.abortReason) : outcome;
    flight.state = 'settling';
    this.settling.add(flight);
    this.plugs.tracing?.settling(flight);
    this.settler.submit(flight);
    this.wakeUps.wake();
  }

  /**
   * ctx.transaction committed the row done: counted and reported as any completion, with nothing left to settle. A
   * handler that chose another outcome after it (threw, gave up) is reported; the row stays done.
   */
  private committedInTransaction(flight: InFlight, outcome: Outcome): void {
    flight.state = 'done';
    try {
      this.countOutcome(flight, flight.outcome!);
      if (outcome.kind !== 'complete') {
        const chose = outcome.kind === 'retry' ? `failed (${outcome.reason})` : outcome.kind === 'giveUp' ? `gave up (${outcome.reason})` : `chose abuse (${outcome.reason})`;
        this.hooks.emit('error', {
          error: new JobTransactionError(`job ${String(flight.job.id)}: its handler ${chose} after ctx.transaction committed the row done; the row stays done`),
          during: `job ${String(flight.job.id)}`,
        });
      }
    } finally {
      this.finish(flight);
    }
  }

  /** The flight's settle committed. */
  private settled(flight: InFlight, applied: boolean): void {
    this.plugs.tracing?.settled(flight, applied);
    try {
      if (flight.state === 'settling') flight.state = 'done';
      if (!applied) {
        this.counters.claimLost++;
        this.hooks.emit('claim-lost', { job: flight.job, during: 'settle' });
      } else {
        this.countOutcome(flight, flight.outcome!);
      }
    } finally {
      this.finish(flight);
    }
  }

  /** The flight's settle did not commit. */
  private settleFailed(flight: InFlight, error: unknown): void {
    this.plugs.tracing?.settleFailed(flight, error);
    const outcome = flight.outcome!;
    const { job } = flight;
    if (outcome.kind === 'complete' && outcome.stored !== null && !isRetryableStoreError(error) && !this.plugs.refusedWrites.handles(error)) {
      // The database refuses this result (too large, not valid for the column): the row fails with that
      // reason instead of staying in processing and running again by lease.
      this.hooks.emit('error', { error, during: `settle of job ${String(job.id)}` });
      flight.outcome = { kind: 'giveUp', reason: `result could not be stored: ${describeError(error)}`, cause: error };
      this.settler.submit(flight);
      return;
    }
    try {
      this.reportUncommittedSettle(job, error);
    } finally {
      this.finish(flight);
    }
  }

  /** The job's slot is free again. */
  private finish(flight: InFlight): void {
    this.plugs.tracing?.finished(flight);
    this.inFlight.delete(flight);
    this.settling.delete(flight);
    this.plugs.source.finished(flight.job.id);
    this.wakeUps.wake();
  }

  private countOutcome(flight: InFlight, outcome: Outcome): void {
    const { job } = flight;
    const durationMs = ranFor(flight);
    switch (outcome.kind) {
      case 'complete':
        this.counters.completed++;
        this.hooks.emit('completed', { job, result: outcome.result, durationMs });
        break;
      case 'abuse':
        this.counters.abused++;
        this.hooks.emit('abused', { job, reason: outcome.reason, durationMs });
        break;
      case 'giveUp':
        this.counters.failed++;
        this.hooks.emit('failed', { job, error: outcome.reason, durationMs, cause: outcome.cause });
        this.givenUp({ id: job.id, attempt: job.attempt, error: outcome.reason });
        break;
      case 'retry':
        this.counters.retried++;
        this.dueTimes.retried(outcome.delayMs);
        this.hooks.emit('retried', { job, error: outcome.reason, delayMs: outcome.delayMs, durationMs, cause: outcome.cause });
        break;
    }
  }

  /** A row given up (by its handler's outcome, or by this worker's reaper after its worker was lost). */
  givenUp(row: GivenUpRow): void {
    for (const step of this.plugs.afterSettle) step.givenUp(row);
  }

  /**
   * A settle that did not commit. After an outage that outlasted the retries the row stays in processing
   * (with a lease the reaper returns it; without one an operator requeues it). Any other error would fail
   * every settle alike (a column the database will not write, a revoked grant): the run ends with it rather
   * than claiming rows it cannot finish; so does a database still read-only at the end of the wait
   * (the rows stay in processing, for the lease reaper or a requeue).
   */
  private reportUncommittedSettle(job: Job, error: unknown): void {
    this.hooks.emit('error', { error, during: `settle of job ${String(job.id)}` });
    if (!isRetryableStoreError(error)) this.hooks.endRun(error);
  }

  /**
   * A heartbeat found the claim gone. `cancelled` (the row's last_error) when an operator cancelled it: the
   * handler's signal aborts with that reason and the worker reports a cancel, which is no fault of its own.
   */
  heartbeatLost(flight: InFlight, cancelled?: string): void {
    if (!beforeSettle(flight) || !this.inFlight.has(flight)) return;
    flight.state = 'lost';
    if (cancelled !== undefined) {
      abortFlight(flight, new Error(cancelled));
      this.hooks.emit('cancelled', { job: flight.job, reason: cancelled });
      return;
    }
    abortFlight(flight, new Error('claim lost: lease taken over'));
    this.counters.claimLost++;
    this.hooks.emit('claim-lost', { job: flight.job, during: 'heartbeat' });
  }

  private timeOut(flight: InFlight): void {
    if (!beforeSettle(flight)) return;
    flight.timedOut = true;
    this.counters.timedOut++;
    abortFlight(flight, new JobTimeoutError(`job ran past its timeout of ${this.settings.jobTimeoutMs} ms`));
    flight.timer = setTimeout(() => this.markStuck(flight), this.settings.jobTimeoutGraceMs);
  }

  /** The handler ignored its abort: the process must be recycled to end it, so this run winds down. */
  private markStuck(flight: InFlight): void {
    flight.timer = null;
    if (!beforeSettle(flight)) return;
    flight.stuck = true;
    this.hooks.emit('error', {
      error: new JobTimeoutError(
        `job ${String(flight.job.id)} still running ${this.settings.jobTimeoutGraceMs} ms after its ${this.settings.jobTimeoutMs} ms timeout aborted it; ` +
          'this worker stops claiming and ends its run so the process can be recycled',
      ),
      during: 'job timeout',
    });
    this.hooks.recycle();
  }

  /**
   * Settles stuck jobs as failed attempts once everything else has drained. Their heartbeats kept the rows
   * ours until now; from the commit on, the row may run elsewhere, so the caller must end the process.
   */
  async settleStuck(): Promise<void> {
    for (const flight of [...this.inFlight].filter((f) => f.stuck && undecided(f))) {
      flight.state = 'settledStuck';
      const outcome = this.outcomes.failure(flight.job, new JobTimeoutError(`job ran past its timeout of ${this.settings.jobTimeoutMs} ms and ignored the abort`));
      const statement = settleStatementFor(this.queue.sql, flight, outcome);
      try {
        const [result] = await withStoreRetry(() => this.queue.apply([statement]), STORE_RETRY.settle);
        if (result!.affected === 1) this.countOutcome(flight, outcome);
      } catch (error) {
        this.hooks.emit('error', { error, during: `settle of timed-out job ${String(flight.job.id)}` });
      }
      this.plugs.tracing?.finished(flight);
      this.inFlight.delete(flight);
    }
  }

  /**
   * Past the stop timeout: aborts every unfinished job and hands its claim back, within HAND_BACK_DEADLINE_MS
   * whatever the database does (an unconfirmed hand-back leaves the row to its lease).
   */
  async handBack(): Promise<{ handedBack: number; abandoned: number }> {
    const flights = [...this.inFlight].filter(undecided);
    for (const flight of flights) {
      flight.state = 'handedBack';
      if (flight.timer) clearTimeout(flight.timer);
      abortFlight(flight, new Error('worker stopped'));
    }
    // The flights stay in flight until the hand-back is done: run() must not end (and its caller close the
    // store) while the release is still on its way to the database.
    const releasing = this.release(flights);
    const handedBack = (await settlesWithin(releasing, HAND_BACK_DEADLINE_MS)) ? await releasing : null;
    for (const flight of flights) {
      this.plugs.tracing?.finished(flight);
      this.inFlight.delete(flight);
      this.settling.delete(flight);
    }
    this.handedBack = true;
    // Settles still waiting for a read-only database give up now: nothing waits for them any more.
    this.plugs.refusedWrites.cancel();
    this.wakeUps.wake();
    if (handedBack === null) {
      this.hooks.emit('error', { error: new Error(`the database did not confirm the hand-back of ${flights.length} claims within ${HAND_BACK_DEADLINE_MS} ms; they return by lease`), during: 'release on stop' });
    }
    return { handedBack: handedBack ?? 0, abandoned: flights.length };
  }

  /** Hands claims back (processing -> pending, the attempt not counted); resolves with how many rows moved. */
  async release(claims: ReadonlyArray<{ job: Job; token: string | null }>): Promise<number> {
    if (claims.length === 0) return 0;
    try {
      const results = await withStoreRetry(() => this.queue.apply(claims.map((c) => this.queue.sql.release(c.job.id, c.token))), {
        ...STORE_RETRY.release,
        onRetry: (error) => this.hooks.emit('error', { error, during: 'release on stop (retrying)' }),
      });
      const released = results.filter((r) => r.affected === 1).length;
      this.counters.released += released;
      return released;
    } catch (error) {
      this.hooks.emit('error', { error, during: 'release on stop' });
      return 0;
    }
  }

  /** Resolves once no job runs here (stuck ones aside) and every settle is committed, or once claims were handed back. */
  async whenIdle(): Promise<void> {
    const busy = () => [...this.inFlight].some((f) => !f.stuck) || !this.settler.idle;
    while (!this.handedBack && busy()) {
      await this.wakeUps.sleep(50);
      // A settle waiting on a database that stopped answering must not hold this past a hand-back (which wakes it).
      if (!this.settler.idle) await this.wakeUps.sleep(1000, this.settler.whenIdle());
    }
  }
}
