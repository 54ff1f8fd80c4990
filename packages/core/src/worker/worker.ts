/*
 * The worker loop and what shares its per-process state (the jobs in flight, the stop and drain flags, the
 * wake-ups): claiming, settling, job timeouts, stop with hand-back and the drain check. It stays over 350
 * lines because each of those reads and changes that state, and apart they would pass all of it around. The
 * parts with one job each live beside it: options (worker-options.ts), one job's state and outcome
 * (job-run.ts), grouped settles (settler.ts), lease heartbeat and reaper (lease-keeper.ts).
 */
import { settlesWithin } from '../store/deadline.js';
import { ConfigError, JobTimeoutError, StoreError, describeError, isRetryableStoreError } from '../protocol/errors.js';
import { TypedEmitter } from './events.js';
import type { IdOf, Job } from './handler.js';
import { Queue, type GivenUpRow } from '../queue/queue.js';
import { RateLimiter, parseRateLimit, validateRateLimit } from '../features/rate-limiter.js';
import { InFlight, JobOutcomes, abortFlight, beforeSettle, ranFor, undecided, type FlightOwner, type Outcome } from './job-run.js';
import { LeaseKeeper } from './lease-keeper.js';
import { WakeUps } from './wake-ups.js';
import { DeliveryBuffer } from '../broker/broker-source.js';
import { deadLetterFor } from '../broker/broker.js';
import { claimGivenIds } from '../sql/claim.js';
import { ProgressWriter } from './progress-writer.js';
import { ReadOnlyWait, isReadOnlyError } from './read-only-wait.js';
import { Settler } from './settler.js';
import { DEFAULT_POLL_MAX_MS, DEFAULT_POLL_MIN_MS, defaultWorkerId, nonNegative, resolveWorkerOptions, type WorkerOptions, type WorkerSettings } from './worker-options.js';
import { STORE_RETRY, backoffDelay, withStoreRetry } from '../store/retry.js';
import { IDLE_PROBE_WAIT_MS, type JobId, type Row, type Statement } from '../store/store.js';

// The option types and the default worker id keep their historical home in this module's exports.
export { DEFAULT_POLL_MAX_MS, DEFAULT_POLL_MIN_MS, defaultWorkerId, type WorkerOptions };

/**
 * How a stop() ended. `drained`: every running job finished within the timeout. Otherwise the unfinished
 * jobs' signals were aborted and their claims handed back (`handedBack` rows back to pending; a row whose
 * hand-back the database did not confirm returns by lease), and `abandoned` handlers had not returned yet:
 * they still run in this process. A row handed back may be claimed by another worker at once, so a process
 * with `abandoned > 0` must exit now (the CLI exits with code 3); handlers that honour ctx.signal end by themselves.
 */
export interface StopReport {
  drained: boolean;
  handedBack: number;
  abandoned: number;
}

/** Longest a stop past its timeout waits for the database to take the unfinished claims back. */
export const HAND_BACK_DEADLINE_MS = 3_000;
/**
 * stop(timeout) resolves by timeout + this at the latest, whatever the database does: the hand-back's
 * deadline, then as long again for run() to see it. A process that must be gone (the CLI) exits by then.
 */
export const STOP_MARGIN_MS = 2 * HAND_BACK_DEADLINE_MS;
export interface WorkerCounters {
  /**
   * Claim calls that returned, including those that found nothing (each one claim round trip or
   * transaction); attempts that failed and were retried are reported as `error` events, not counted here.
   */
  claimCalls: number;
  /** Claim calls that returned no row: polls of an empty queue, or every candidate lost. */
  emptyClaims: number;
  claimed: number;
  /** Candidates another claimer took first (conditional-update claims); nothing was lost but a round trip. */
  candidatesLost: number;
  completed: number;
  failed: number;
  retried: number;
  abused: number;
  /** Claims this worker held but no longer owned when it settled or renewed them (see the `claim-lost` event). */
  claimLost: number;
  released: number;
  /** Jobs that ran past jobTimeoutMs. */
  timedOut: number;
}

/** All counters at zero: a new worker's, and the start of a sum over several. */
export function emptyWorkerCounters(): WorkerCounters {
  return { claimCalls: 0, emptyClaims: 0, claimed: 0, candidatesLost: 0, completed: 0, failed: 0, retried: 0, abused: 0, claimLost: 0, released: 0, timedOut: 0 };
}

/** Consecutive non-retryable claim failures after which run() gives up and rejects. */
const MAX_CONSECUTIVE_CLAIM_FAILURES = 5;

/**
 * Past the due time of a row this worker retried, before the idle wait ends: the database set next_attempt_at
 * from its own clock as the settle committed, a moment after this process computed the same instant.
 */
const KNOWN_DUE_SLACK_MS = 5;
/** Due times of its own retries a worker keeps at most (the earliest are what matter; more waits for a poll). */
const MAX_KNOWN_DUE = 1_000;

/**
 * Claims rows, runs the handler on each in up to `concurrency` slots, and settles every outcome with a
 * guarded UPDATE (grouped into one commit per flush). Create with `Worker.create`, then `run()`; `stop()`
 * drains: no more claims, running jobs finish (or, past the timeout, are handed back), then run() resolves.
 */
export class Worker extends TypedEmitter {
  readonly counters: WorkerCounters = emptyWorkerCounters();
  readonly workerId: string;
  /** Attempts per job, as configured or defaulted from the table. */
  readonly maxAttempts: number;
  private readonly settings: WorkerSettings;
  private readonly inFlight = new Set<InFlight>();
  /**
   * The flights of inFlight whose user code has ended and whose settle is submitted: they hold a row, not a
   * slot. The next claim goes out while their settle commits instead of after it (see freeSlots).
   */
  private readonly settling = new Set<InFlight>();
  private readonly settler: Settler;
  private readonly leases: LeaseKeeper<InFlight>;
  private readonly outcomes: JobOutcomes;
  /** A read-only database: the one wait (and bound) the claim loop and the settles share. */
  private readonly readOnly: ReadOnlyWait;
  private stopping = false;
  private stopReason: 'stop' | 'empty' | 'recycle' = 'stop';
  /** Set once a stop past its timeout handed the unfinished claims back: nothing waits for them any more. */
  private handedBack = false;
  private stopCall: Promise<StopReport> | null = null;
  /** The error that ends run(): claims or settles failing for a reason retrying cannot fix. */
  private fatal: unknown = null;
  /** The loop's current wait; a finished job or stop() ends it early. */
  private readonly wakeUps = new WakeUps();
  /**
   * When the rows this worker retried come due, on this process's clock: an idle wait ends at the earliest
   * rather than at the next poll, which on a store that wakes on inserts (NOTIFY, a file watch) or polls up to
   * pollMaxMs would pick a retry up to a second late.
   */
  private knownDue: number[] = [];
  /** When the database last said its earliest waiting row comes due (look-ahead), on this process's clock. */
  private lookedAheadDue: number | null = null;
  private claimSequence = 0;
  /** Where every flight of this worker reports its settle. */
  private readonly flightOwner: FlightOwner = {
    settleStatement: (flight) => this.settleStatement(flight),
    settled: (flight, applied) => this.settled(flight, applied),
    settleFailed: (flight, error) => this.settleFailed(flight, error),
  };
  private running: Promise<WorkerCounters> | null = null;
  /** With the `from` option: the broker's deliveries, which name the rows to claim instead of the candidate SELECT. */
  private readonly deliveries: DeliveryBuffer | null;

  private constructor(
    readonly queue: Queue,
    private readonly options: WorkerOptions,
    settings: WorkerSettings,
    private readonly rateLimiter: RateLimiter | null,
  ) {
    super();
    this.settings = settings;
    this.maxAttempts = this.settings.maxAttempts;
    this.workerId = this.settings.workerId;
    this.readOnly = new ReadOnlyWait(this.settings.readOnlyWaitMs, this.settings.pollMaxMs, this.settings.random, {
      started: (error, during, waitMs) => this.emit('read-only', { error, during, waitMs }),
      ended: (durationMs) => this.emit('writable', { durationMs }),
    });
    this.settler = new Settler(queue, this.settings.settleBatch, (error) => this.emit('error', { error, during: 'settle' }), this.readOnly);
    this.outcomes = new JobOutcomes(queue, this.settings, options, new ProgressWriter(queue, (error) => this.emit('error', { error, during: 'progress' })));
    this.leases = new LeaseKeeper<InFlight>(queue, this.settings, {
      held: () => [...this.inFlight].filter(beforeSettle),
      lost: (flight) => this.heartbeatLost(flight),
      reaped: (count, givenUp) => {
        this.emit('reaped', { count, givenUp });
        for (const row of givenUp) this.deadLetter(row);
      },
      error: (error, during) => this.emit('error', { error, during }),
    });
    this.deliveries = options.from
      ? new DeliveryBuffer(options.from, queue.table.table, this.settings.prefetch, {
          malformed: (raw, reason) => this.emit('error', { error: new ConfigError(`a broker message that names no row of ${queue.table.table} was acked and dropped: ${reason} (${raw.slice(0, 200)})`), during: 'broker delivery' }),
          error: (error, during) => this.emit('error', { error, during }),
          lost: (error) => {
            this.fatal ??= error;
            this.stopping = true;
            this.wakeUps.wake();
          },
        })
      : null;
  }

  /** Validates options and the table (missing table or column: SchemaError) before any row is touched. */
  static async create<R extends object = Row, Id extends JobId = IdOf<R>>(options: WorkerOptions<R, Id>): Promise<Worker> {
    if (!options || typeof options !== 'object') throw new ConfigError('worker options must be an object');
    if (!options.store) throw new ConfigError('worker needs a store');
    const rate = options.rateLimit === undefined ? null : typeof options.rateLimit === 'string' ? parseRateLimit(options.rateLimit, 'rateLimit') : validateRateLimit(options.rateLimit);
    const queue = await Queue.open(options.store, options.table);
    // The row type is the caller's promise about its table; inside, a row is whatever the database returned.
    const untyped = options as unknown as WorkerOptions;
    // Options are checked before the budget's table is made: bad input touches nothing.
    const settings = resolveWorkerOptions(untyped, queue.table);
    const limiter = rate === null ? null : await RateLimiter.open(options.store, queue.table.table, rate);
    return new Worker(queue, untyped, settings, limiter);
  }

  /**
   * Runs until stop() or, with exitWhenEmpty, until the queue is empty, and resolves with the counters.
   * Rejects only when claims keep failing for a reason retrying cannot fix, or the database stays read-only
   * past readOnlyWaitMs (StoreError ReadOnly); running jobs drain first.
   */
  run(): Promise<WorkerCounters> {
    this.running ??= this.loop();
    return this.running;
  }

  /**
   * Stops claiming and lets running jobs finish for up to `timeoutMs` (default 30 s). Past it, the rest have
   * their ctx.signal aborted and their claims handed back (processing -> pending, the attempt not counted),
   * and stop() resolves within about HAND_BACK_DEADLINE_MS more whatever the database does. A handler that
   * ignores its signal keeps running in this process while its row may already run elsewhere: when the
   * report says `abandoned > 0`, exit the process (as the CLI does). Later calls return the first call's report.
   */
  stop(timeoutMs = 30_000): Promise<StopReport> {
    nonNegative(timeoutMs, 0, 'stop timeout');
    this.stopCall ??= this.stopWithin(timeoutMs);
    return this.stopCall;
  }

  private async stopWithin(timeoutMs: number): Promise<StopReport> {
    this.stopping = true;
    this.wakeUps.wake();
    const drained = await settlesWithin(this.whenIdle(), timeoutMs);
    const report: StopReport = { drained, handedBack: 0, abandoned: 0 };
    if (!drained) Object.assign(report, await this.handBack());
    // run() may still wait on the database (a claim or a settle in flight): it gets a bounded margin, no more.
    await settlesWithin(this.running ?? Promise.resolve(), HAND_BACK_DEADLINE_MS);
    return report;
  }

  /**
   * The claims this worker holds whose handlers have not started. Synchronous, for a process `exit` hook:
   * when a handler ends the process from the loop that starts a claimed batch, the rest of the batch never
   * ran, and its launcher hands them back at no cost (see Queue.recoverDeadWorker).
   */
  unstartedClaims(): Array<{ id: JobId; token: string | null }> {
    return [...this.inFlight].filter((f) => f.state === 'claimed').map((f) => ({ id: f.job.id, token: f.token }));
  }

  get activeJobs(): number {
    return this.inFlight.size;
  }

  /**
   * Slots to claim for: `concurrency` bounds the handlers running at once, and a job whose settle is in flight
   * no longer runs one. So the next claim overlaps the last batch's settle rather than waiting for its commit:
   * one worker of 64 slots, MariaDB 5 ms away (the TCP proxy), a cycle of claim (2 round trips) then settle (1)
   * became one of 2 (docs/benchmarks.md, "Claim round trips"). Only once a settle went through at once, and
   * while they do: before the first commit, and after one that was retried, split or waited out a read-only
   * database, a settling job holds its slot as before, so a worker in trouble claims no rows it may not be able
   * to finish. And the rows held stay within twice the concurrency.
   */
  private freeSlots(): number {
    const { concurrency } = this.settings;
    if (!this.settler.healthy || this.readOnly.waiting) return concurrency - this.inFlight.size;
    const running = this.inFlight.size - this.settling.size;
    return Math.min(concurrency - running, 2 * concurrency - this.inFlight.size);
  }

  private async loop(): Promise<WorkerCounters> {
    const features = this.queue.table.features;
    await this.deliveries?.start();
    if (features.leases) {
      await this.leases.start();
    }
    let idleStep = 0;
    let failedClaims = 0;
    let readOnlyStep = 0;
    try {
      while (!this.stopping) {
        const free = this.freeSlots();
        if (free <= 0) {
          await this.wakeUps.sleep(this.settings.pollMaxMs);
          continue;
        }
        let rows: Row[];
        try {
          const wanted = Math.min(this.settings.batch, free);
          const claimed = this.rateLimiter ? await this.claimWithinBudget(this.rateLimiter, wanted, idleStep > 0) : await this.claim(wanted);
          // Nothing granted: the wait for the budget is over; look at the slots again.
          if (claimed === null) continue;
          rows = claimed;
          failedClaims = 0;
          readOnlyStep = 0;
          // A claim that went through ends a read-only wait. On MySQL a claim that found no candidate wrote
          // nothing, so it cannot tell a writable server from a read-only one: it ends the wait too (there was
          // nothing to write), and the next claim that finds rows on a server still read-only starts a new one.
          this.readOnly.writable();
        } catch (error) {
          // A read-only database (a replica, a failover in progress): no more claims until it takes writes,
          // checked again with backoff, for a bounded time; one event for the whole wait, not one per refusal.
          if (isReadOnlyError(error)) {
            if (!this.readOnly.refused(error, 'claim')) {
              this.fatal ??= this.readOnly.exhausted(error);
              break;
            }
            await this.pause(() => this.wakeUps.sleep(this.readOnly.delay(readOnlyStep++)));
            continue;
          }
          this.emit('error', { error, during: 'claim' });
          // A database that keeps refusing the claim for a reason retrying cannot fix (a dropped table, a
          // revoked grant) ends the run with that error instead of spinning; transient kinds never do. A
          // server setting statusq cannot run on (Unsupported) ends it at once: it will refuse every time.
          const unsupported = error instanceof StoreError && error.kind === 'Unsupported';
          if (unsupported || (!isRetryableStoreError(error) && ++failedClaims >= MAX_CONSECUTIVE_CLAIM_FAILURES)) {
            this.fatal ??= error;
            break;
          }
          await this.pause(() => this.wakeUps.sleep(backoffDelay(idleStep++, { baseMs: this.settings.pollMinMs, maxMs: this.settings.pollMaxMs, random: this.settings.random })));
          continue;
        }
        if (rows.length > 0) {
          idleStep = 0;
          continue;
        }
        if (this.options.exitWhenEmpty && (await this.isDrained())) {
          this.stopReason = 'empty';
          break;
        }
        const delay = backoffDelay(idleStep++, { baseMs: this.settings.pollMinMs, maxMs: this.settings.pollMaxMs, random: this.settings.random });
        const deliveries = this.deliveries;
        if (deliveries) {
          // Messages say when there is work: wait for the next one (the timer only bounds the wait).
          await this.pause(() => this.wakeUps.sleep(this.settings.pollMaxMs, deliveries.arrival()));
          continue;
        }
        // A probing store's wait ends when a row is due, so it may be long; not for exitWhenEmpty, whose
        // check above must see other workers' rows finish, which no probe reports.
        const probed = this.queue.store.capabilities.idleProbe && !this.options.exitWhenEmpty;
        // Without a probe nothing wakes this worker when another process's delayed row comes due (NOTIFY and the
        // file watch fire on the insert): ask the database when the next one is, and wake then.
        if (!probed && this.queue.table.columns.nextAttemptAt) await this.lookAheadForDue();
        if (this.queue.store.waitForWork && this.inFlight.size === 0) await this.pause(() => this.wakeUps.waitForWork(this.queue.store, this.untilKnownDue(probed ? IDLE_PROBE_WAIT_MS : delay), this.queue.table));
        else await this.pause(() => this.wakeUps.sleep(this.untilKnownDue(delay)));
      }
      this.stopping = true;
      await this.whenIdle();
      if (!this.handedBack) await this.settleStuck();
    } finally {
      // A reap under way may be giving rows up: their dead letters go out before the subscription closes.
      await this.leases.stop();
      // After the jobs: their messages are acked as they end, on the subscription's channel.
      await this.deliveries?.stop().catch((error: unknown) => this.emit('error', { error, during: 'broker unsubscribe' }));
    }
    if (this.fatal !== null) throw this.fatal;
    this.emit('stopped', { reason: this.stopReason });
    return this.counters;
  }

  private async claim(limit: number): Promise<Row[]> {
    if (this.deliveries) return this.claimDelivered(this.deliveries, limit);
    const token = this.queue.table.features.fencing ? `${this.workerId}:${++this.claimSequence}` : null;
    const claimStarted = performance.now();
    const { rows, candidatesLost, interruptedBy } = await withStoreRetry(() => this.queue.claim({ limit, token, agingMs: this.options.agingMs }, this.settings.claimStrategy), {
      ...STORE_RETRY.claim,
      onRetry: (error) => this.emit('error', { error, during: 'claim (retrying)' }),
    });
    await this.began(rows, token, candidatesLost, claimStarted);
    // The rows it did claim run; the claim itself failed, and the loop backs off (or waits) as after any failure.
    if (interruptedBy !== undefined) throw interruptedBy;
    return rows;
  }

  /**
   * The claim of the rows the broker's messages name, by id with the guarded UPDATE. A message whose row it did
   * not get is acked at once (settled, another owner's, or not due: the relay publishes it again when due); a
   * claim that failed gives its messages back for redelivery.
   */
  private async claimDelivered(deliveries: DeliveryBuffer, limit: number): Promise<Row[]> {
    const taken = deliveries.take(limit);
    if (taken.size === 0) return [];
    const token = `${this.workerId}:${++this.claimSequence}`;
    const claimStarted = performance.now();
    const ids = [...taken.values()].map((same) => same[0]!.message.id);
    let rows: Row[];
    try {
      rows = await withStoreRetry(() => claimGivenIds(this.queue.store, this.queue.table, ids, token), {
        ...STORE_RETRY.claim,
        onRetry: (error) => this.emit('error', { error, during: 'claim (retrying)' }),
      });
    } catch (error) {
      for (const same of taken.values()) for (const delivery of same) delivery.release().catch((releaseError: unknown) => this.emit('error', { error: releaseError, during: 'release of a delivery' }));
      throw error;
    }
    const owned = new Set(rows.map((row) => String(row[this.queue.table.id])));
    for (const [key, same] of taken) {
      if (owned.has(key) && !this.handedBack) deliveries.hold(key, same);
      else deliveries.dismiss(same);
    }
    await this.began(rows, token, taken.size - rows.length, claimStarted);
    return rows;
  }

  /** Counts a claim and starts its rows (or hands them back when stop() already gave up on this worker). */
  private async began(rows: Row[], token: string | null, candidatesLost: number, claimStarted: number): Promise<void> {
    this.counters.claimCalls++;
    if (rows.length === 0) this.counters.emptyClaims++;
    this.counters.claimed += rows.length;
    this.counters.candidatesLost += candidatesLost;
    if (rows.length === 0 && candidatesLost === 0) return;
    const jobs = rows.map((row) => this.toJob(row));
    if (this.handedBack) {
      // A claim that was still waiting on the database when stop() gave up: nobody will run these rows.
      await this.release(jobs.map((job) => ({ job, token })));
    } else {
      this.emit('claimed', { jobs, candidatesLost, durationMs: performance.now() - claimStarted });
      this.start(jobs, token);
    }
  }

  private toJob(row: Row): Job {
    const { columns, id } = this.queue.table;
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
    return { id: row[id] as JobId, row, attempt: attempts + 1, payload };
  }

  /**
   * Every claim of the batch is in flight before any handler runs: a handler that ends the process from its
   * first synchronous step leaves the rest listed as claimed but not started (see unstartedClaims).
   */
  private start(jobs: readonly Job[], token: string | null): void {
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
    const decided = this.outcomes.decide(flight);
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
    flight.ranMs = performance.now() - flight.startedAt;
    if (flight.timer) clearTimeout(flight.timer);
    // Lost, handed back or settled as stuck while the handler ran: that already decided the row.
    if (flight.state !== 'running') return this.finish(flight);
    flight.outcome = flight.timedOut ? this.outcomes.failure(flight.job, flight.abortReason) : outcome;
    flight.state = 'settling';
    this.settling.add(flight);
    this.settler.submit(flight);
    this.wakeUps.wake();
  }

  /** The flight's settle committed. */
  private settled(flight: InFlight, applied: boolean): void {
    try {
      if (flight.state === 'settling') flight.state = 'done';
      if (!applied) {
        this.counters.claimLost++;
        this.emit('claim-lost', { job: flight.job, during: 'settle' });
      } else {
        this.countOutcome(flight, flight.outcome!);
      }
    } finally {
      this.finish(flight);
    }
  }

  /** The flight's settle did not commit. */
  private settleFailed(flight: InFlight, error: unknown): void {
    const outcome = flight.outcome!;
    const { job } = flight;
    if (outcome.kind === 'complete' && outcome.stored !== null && !isRetryableStoreError(error) && !isReadOnlyError(error)) {
      // The database refuses this result (too large, not valid for the column): the row fails with that
      // reason instead of staying in processing and running again by lease.
      this.emit('error', { error, during: `settle of job ${String(job.id)}` });
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
    this.inFlight.delete(flight);
    this.settling.delete(flight);
    this.deliveries?.finished(flight.job.id);
    this.wakeUps.wake();
  }

  /**
   * `waitMs`, cut short to end just after the earliest row this worker knows is still to come due: one it
   * retried, or the one the database named (lookAheadForDue).
   */
  private untilKnownDue(waitMs: number): number {
    const now = Date.now();
    // Due times passed: the claim just made has taken those rows, or another worker has.
    if (this.knownDue.length > 0) this.knownDue = this.knownDue.filter((at) => at + KNOWN_DUE_SLACK_MS > now);
    if (this.lookedAheadDue !== null && this.lookedAheadDue + KNOWN_DUE_SLACK_MS <= now) this.lookedAheadDue = null;
    const earliest = Math.min(...this.knownDue, this.lookedAheadDue ?? Number.POSITIVE_INFINITY);
    return earliest === Number.POSITIVE_INFINITY ? waitMs : Math.min(waitMs, earliest + KNOWN_DUE_SLACK_MS - now);
  }

  /** Asks the database when its earliest waiting row comes due (Queue.msUntilNextDue), for untilKnownDue. */
  private async lookAheadForDue(): Promise<void> {
    try {
      const ms = await this.queue.msUntilNextDue();
      // Due by now (it came due since the query's clock read): the wait is the slack, then the claim takes it.
      this.lookedAheadDue = ms === null ? null : Date.now() + Math.max(0, ms);
    } catch {
      // The next claim meets the same trouble and reports it; meanwhile the wait is the poll's.
      this.lookedAheadDue = null;
    }
  }

  private countOutcome(flight: InFlight, outcome: Outcome): void {
    const { job } = flight;
    const durationMs = ranFor(flight);
    switch (outcome.kind) {
      case 'complete':
        this.counters.completed++;
        this.emit('completed', { job, result: outcome.result, durationMs });
        break;
      case 'abuse':
        this.counters.abused++;
        this.emit('abused', { job, reason: outcome.reason, durationMs });
        break;
      case 'giveUp':
        this.counters.failed++;
        this.emit('failed', { job, error: outcome.reason, durationMs, cause: outcome.cause });
        this.deadLetter({ id: job.id, attempt: job.attempt, error: outcome.reason });
        break;
      case 'retry':
        this.counters.retried++;
        if (this.knownDue.length < MAX_KNOWN_DUE) this.knownDue.push(Date.now() + outcome.delayMs);
        this.emit('retried', { job, error: outcome.reason, delayMs: outcome.delayMs, durationMs, cause: outcome.cause });
        break;
    }
  }

  /**
   * A row given up (by its handler's outcome, or by this worker's reaper after its worker was lost), told to
   * the broker's dead-letter queue for other services. The row's failed status is the record and is already
   * committed: a dead letter that does not go through is reported, not retried.
   */
  private deadLetter(row: GivenUpRow): void {
    this.deliveries?.deadLetter(deadLetterFor(this.queue.table.table, row));
  }

  /** The guarded UPDATE that settles the flight with its outcome (or with `outcome`). */
  private settleStatement(flight: InFlight, outcome: Outcome = flight.outcome!): Statement {
    const { job, token } = flight;
    const sql = this.queue.sql;
    return outcome.kind === 'complete'
      ? sql.complete(job.id, token, outcome.stored)
      : outcome.kind === 'abuse'
        ? sql.abuse(job.id, token, outcome.reason)
        : outcome.kind === 'giveUp'
          ? sql.giveUp(job.id, token, outcome.reason)
          : sql.retry(job.id, token, outcome.reason, outcome.delayMs);
  }

  /**
   * A settle that did not commit. After an outage that outlasted the retries the row stays in processing
   * (with a lease the reaper returns it; without one an operator requeues it). Any other error would fail
   * every settle alike (a column the database will not write, a revoked grant): the run ends with it rather
   * than claiming rows it cannot finish; so does a database still read-only at the end of the wait
   * (the rows stay in processing, for the lease reaper or a requeue).
   */
  private reportUncommittedSettle(job: Job, error: unknown): void {
    this.emit('error', { error, during: `settle of job ${String(job.id)}` });
    if (isRetryableStoreError(error)) return;
    this.fatal ??= error;
    this.stopping = true;
    this.wakeUps.wake();
  }

  private heartbeatLost(flight: InFlight): void {
    if (!beforeSettle(flight) || !this.inFlight.has(flight)) return;
    flight.state = 'lost';
    abortFlight(flight, new Error('claim lost: lease taken over'));
    this.counters.claimLost++;
    this.emit('claim-lost', { job: flight.job, during: 'heartbeat' });
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
    this.emit('error', {
      error: new JobTimeoutError(
        `job ${String(flight.job.id)} still running ${this.settings.jobTimeoutGraceMs} ms after its ${this.settings.jobTimeoutMs} ms timeout aborted it; ` +
          'this worker stops claiming and ends its run so the process can be recycled',
      ),
      during: 'job timeout',
    });
    this.stopReason = 'recycle';
    this.stopping = true;
    this.wakeUps.wake();
  }

  /**
   * Settles stuck jobs as failed attempts once everything else has drained. Their heartbeats kept the rows
   * ours until now; from the commit on, the row may run elsewhere, so the caller must end the process.
   */
  private async settleStuck(): Promise<void> {
    for (const flight of [...this.inFlight].filter((f) => f.stuck && undecided(f))) {
      flight.state = 'settledStuck';
      const outcome = this.outcomes.failure(flight.job, new JobTimeoutError(`job ran past its timeout of ${this.settings.jobTimeoutMs} ms and ignored the abort`));
      const statement = this.settleStatement(flight, outcome);
      try {
        const [result] = await withStoreRetry(() => this.queue.apply([statement]), STORE_RETRY.settle);
        if (result!.affected === 1) this.countOutcome(flight, outcome);
      } catch (error) {
        this.emit('error', { error, during: `settle of timed-out job ${String(flight.job.id)}` });
      }
      this.inFlight.delete(flight);
    }
  }

  /**
   * Past the stop timeout: aborts every unfinished job and hands its claim back, within HAND_BACK_DEADLINE_MS
   * whatever the database does (an unconfirmed hand-back leaves the row to its lease).
   */
  private async handBack(): Promise<{ handedBack: number; abandoned: number }> {
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
      this.inFlight.delete(flight);
      this.settling.delete(flight);
    }
    this.handedBack = true;
    // Settles still waiting for a read-only database give up now: nothing waits for them any more.
    this.readOnly.cancel();
    this.wakeUps.wake();
    if (handedBack === null) {
      this.emit('error', { error: new Error(`the database did not confirm the hand-back of ${flights.length} claims within ${HAND_BACK_DEADLINE_MS} ms; they return by lease`), during: 'release on stop' });
    }
    return { handedBack: handedBack ?? 0, abandoned: flights.length };
  }

  /** Hands claims back (processing -> pending, the attempt not counted); resolves with how many rows moved. */
  private async release(claims: ReadonlyArray<{ job: Job; token: string | null }>): Promise<number> {
    if (claims.length === 0) return 0;
    try {
      const results = await withStoreRetry(() => this.queue.apply(claims.map((c) => this.queue.sql.release(c.job.id, c.token))), {
        ...STORE_RETRY.release,
        onRetry: (error) => this.emit('error', { error, during: 'release on stop (retrying)' }),
      });
      const released = results.filter((r) => r.affected === 1).length;
      this.counters.released += released;
      return released;
    } catch (error) {
      this.emit('error', { error, during: 'release on stop' });
      return 0;
    }
  }

  private async isDrained(): Promise<boolean> {
    if (this.inFlight.size > 0 || !this.settler.idle) return false;
    // With leases, another worker's claim either settles or expires and is reaped back to pending; wait.
    // Without them a row left in processing by a dead worker would never leave, so only our own count.
    // Both states are asked in one statement: asked one after the other, a row moving between them in the
    // gap is missed by both (a claim, pending -> processing, after a processing check; a reap or a retry,
    // processing -> pending, after a pending check), and this worker ends while that row may still need it
    // (its claimer dies and nobody is left to reap it).
    try {
      return !(await (this.queue.table.features.leases ? this.queue.hasRowsWithStatus('pending', 'processing') : this.queue.hasRowsWithStatus('pending')));
    } catch (error) {
      // A database that cannot answer for a moment (restarting, connections dropped) has not said the queue
      // is empty: the loop backs off and asks again, as after a failed claim, instead of ending the run.
      if (!isRetryableStoreError(error)) throw error;
      this.emit('error', { error, during: 'drain check' });
      return false;
    }
  }

  /**
   * One of the loop's waits, for work or before a retry; none starts once stop() was called. stop()'s wake()
   * ends only the waits already under way: a claim in flight at that moment went on into a whole wait, which
   * on MySQL (a drained table's idle probe, IDLE_PROBE_WAIT_MS) held a stopped worker's run() for 30 s.
   */
  private async pause(wait: () => Promise<void>): Promise<void> {
    if (!this.stopping) await wait();
  }

  /** Resolves once no job runs here (stuck ones aside) and every settle is committed, or once claims were handed back. */
  private async whenIdle(): Promise<void> {
    const busy = () => [...this.inFlight].some((f) => !f.stuck) || !this.settler.idle;
    while (!this.handedBack && busy()) {
      await this.wakeUps.sleep(50);
      // A settle waiting on a database that stopped answering must not hold this past a hand-back (which wakes it).
      if (!this.settler.idle) await this.wakeUps.sleep(1000, this.settler.whenIdle());
    }
  }

  /**
   * A claim of at most the starts the shared budget grants, unused ones given back; null after waiting for the
   * budget when it granted none. An idle worker first asks with a read whether a row is due: taking budget is a
   * write, and on SQLite every write wakes every idle worker's file watch.
   */
  private async claimWithinBudget(limiter: RateLimiter, wanted: number, idle: boolean): Promise<Row[] | null> {
    if (idle && !(await this.queue.hasDueRow())) return [];
    const grant = await limiter.take(wanted);
    if (grant.tokens === 0) {
      await this.waitUnlessStopping(grant.waitMs);
      return null;
    }
    const rows = await this.claim(grant.tokens);
    if (rows.length < grant.tokens) await limiter.giveBack(grant.tokens - rows.length).catch((error: unknown) => this.emit('error', { error, during: 'rate limit' }));
    return rows;
  }

  /** Waits `ms` whatever finishes meanwhile (a finished job frees a slot, not budget); stop() ends it early. */
  private async waitUnlessStopping(ms: number): Promise<void> {
    const until = Date.now() + ms;
    while (!this.stopping && Date.now() < until) await this.wakeUps.sleep(until - Date.now());
  }

}
