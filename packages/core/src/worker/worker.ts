/*
 * The worker loop: when to claim (free slots, the gate), from where (the claim source), how long to wait when
 * there is nothing (backoff, the store's wake-up, known due times), what ends the run (stop, an empty queue,
 * errors retrying cannot fix, a read-only database past its bound), and the drain check. What becomes of each
 * claimed row is flights.ts; what plugs into the loop is seams.ts, chosen in plugs.ts.
 */
import { settlesWithin } from '../store/deadline.js';
import { ConfigError, StoreError, isRetryableStoreError } from '../protocol/errors.js';
import { TypedEmitter } from './events.js';
import type { IdOf } from './handler.js';
import { Queue } from '../queue/queue.js';
import { jobFromRow, type InFlight } from './job-run.js';
import { LeaseKeeper } from './lease-keeper.js';
import { WakeUps } from './wake-ups.js';
import { openPlugs, rateLimitOption } from './plugs.js';
import type { ClaimedBatch, RefusedWrites } from './seams.js';
import type { WorkerPlugs } from './plugs.js';
import { DueTimes } from './due-times.js';
import { Flights } from './flights.js';
import { HAND_BACK_DEADLINE_MS, emptyWorkerCounters, type StopReport, type WorkerCounters } from './reports.js';
import { nonNegative, resolveWorkerOptions, type WorkerOptions, type WorkerSettings } from './worker-options.js';
import { backoffDelay } from '../store/retry.js';
import { IDLE_PROBE_WAIT_MS, type JobId, type Row } from '../store/store.js';

/** Consecutive non-retryable claim failures after which run() gives up and rejects. */
const MAX_CONSECUTIVE_CLAIM_FAILURES = 5;

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
  private readonly flights: Flights;
  private readonly leases: LeaseKeeper<InFlight>;
  /** A read-only database: the one wait (and bound) the claim loop and the settles share. */
  private readonly refusedWrites: RefusedWrites;
  private stopping = false;
  private stopReason: 'stop' | 'empty' | 'recycle' = 'stop';
  private stopCall: Promise<StopReport> | null = null;
  /** The error that ends run(): claims or settles failing for a reason retrying cannot fix. */
  private fatal: unknown = null;
  /** The loop's current wait; a finished job or stop() ends it early. */
  private readonly wakeUps = new WakeUps();
  private readonly dueTimes = new DueTimes();
  private running: Promise<WorkerCounters> | null = null;

  private constructor(
    readonly queue: Queue,
    private readonly options: WorkerOptions,
    settings: WorkerSettings,
    private readonly plugs: WorkerPlugs,
  ) {
    super();
    this.settings = settings;
    this.maxAttempts = this.settings.maxAttempts;
    this.workerId = this.settings.workerId;
    this.refusedWrites = plugs.refusedWrites;
    this.flights = new Flights(queue, settings, options, plugs, this.counters, this.dueTimes, this.wakeUps, {
      emit: (name, event) => this.emit(name, event),
      endRun: (error) => this.endRun(error),
      recycle: () => {
        this.stopReason = 'recycle';
        this.stopping = true;
        this.wakeUps.wake();
      },
    });
    this.leases = new LeaseKeeper<InFlight>(queue, this.settings, {
      held: () => this.flights.held(),
      lost: (flight, cancelled) => this.flights.heartbeatLost(flight, cancelled),
      reaped: (count, givenUp) => {
        this.emit('reaped', { count, givenUp });
        for (const row of givenUp) this.flights.givenUp(row);
      },
      error: (error, during) => this.emit('error', { error, during }),
    });
  }

  /** Validates options and the table (missing table or column: SchemaError) before any row is touched. */
  static async create<R extends object = Row, Id extends JobId = IdOf<R>, Kinds extends object = Record<string, unknown>>(options: WorkerOptions<R, Id, Kinds>): Promise<Worker> {
    if (!options || typeof options !== 'object') throw new ConfigError('worker options must be an object');
    if (!options.store) throw new ConfigError('worker needs a store');
    // The row type is the caller's promise about its table; inside, a row is whatever the database returned.
    const untyped = options as unknown as WorkerOptions;
    const rate = rateLimitOption(untyped);
    const table = await Queue.open(options.store, options.table);
    // Options are checked before the budget's table is made: bad input touches nothing.
    const settings = resolveWorkerOptions(untyped, table.table);
    // Handlers by kind: every claim and look-ahead of this worker asks for its kinds only.
    const queue = settings.routes.kinds === null ? table : table.forKinds(settings.routes.kinds);
    // The plugs are made before the worker they report to: they say nothing until its run starts.
    let worker: Worker | null = null;
    const plugs = await openPlugs(queue, untyped, settings, rate, {
      emit: (event, payload) => worker?.emit(event, payload),
      fatal: (error) => worker?.endRun(error),
    });
    worker = new Worker(queue, untyped, settings, plugs);
    return worker;
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
    const drained = await settlesWithin(this.flights.whenIdle(), timeoutMs);
    const report: StopReport = { drained, handedBack: 0, abandoned: 0 };
    if (!drained) Object.assign(report, await this.flights.handBack());
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
    return this.flights.unstartedClaims();
  }

  get activeJobs(): number {
    return this.flights.size;
  }

  private async loop(): Promise<WorkerCounters> {
    const features = this.queue.table.features;
    await this.plugs.source.start();
    if (features.leases) {
      await this.leases.start();
    }
    let idleStep = 0;
    let failedClaims = 0;
    let readOnlyStep = 0;
    try {
      while (!this.stopping) {
        const free = this.flights.freeSlots();
        if (free <= 0) {
          await this.wakeUps.sleep(this.settings.pollMaxMs);
          continue;
        }
        let rows: Row[];
        try {
          const claimed = await this.claimThroughGate(Math.min(this.settings.batch, free), idleStep > 0);
          // The gate waited: look at the slots again.
          if (claimed === null) continue;
          rows = claimed;
          failedClaims = 0;
          readOnlyStep = 0;
          // A claim that went through ends a read-only wait. On a store whose server refuses only writes it is
          // asked to make, a claim that found no candidate wrote nothing, so it cannot tell a writable server
          // from a read-only one: it ends the wait too (there was
          // nothing to write), and the next claim that finds rows on a server still read-only starts a new one.
          this.refusedWrites.writable();
        } catch (error) {
          // A read-only database (a replica, a failover in progress): no more claims until it takes writes,
          // checked again with backoff, for a bounded time; one event for the whole wait, not one per refusal.
          if (this.refusedWrites.handles(error)) {
            if (!this.refusedWrites.refused(error, 'claim')) {
              this.fatal ??= this.refusedWrites.exhausted(error);
              break;
            }
            await this.pause(() => this.wakeUps.sleep(this.refusedWrites.delay(readOnlyStep++)));
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
        const arrival = this.plugs.source.arrival();
        if (arrival) {
          // The source says when there is work (a broker's messages): wait for it (the timer only bounds the wait).
          await this.pause(() => this.wakeUps.sleep(this.settings.pollMaxMs, arrival));
          continue;
        }
        // A probing store's wait ends when a row is due, so it may be long; not for exitWhenEmpty, whose
        // check above must see other workers' rows finish, which no probe reports.
        const probed = this.queue.store.capabilities.idleProbe && !this.options.exitWhenEmpty;
        // Without a probe nothing wakes this worker when another process's delayed row comes due (a `listenNotify`
        // store's notifications and file watch fire on the insert): ask the database when the next one is, and wake then.
        if (!probed && this.queue.table.columns.nextAttemptAt) await this.dueTimes.lookAhead(this.queue);
        if (this.queue.store.waitForWork && this.flights.size === 0) await this.pause(() => this.wakeUps.waitForWork(this.queue.store, this.dueTimes.waitUntilDue(probed ? IDLE_PROBE_WAIT_MS : delay), this.queue.table));
        else await this.pause(() => this.wakeUps.sleep(this.dueTimes.waitUntilDue(delay)));
      }
      this.stopping = true;
      await this.flights.whenIdle();
      if (!this.flights.handedBack) await this.flights.settleStuck();
    } finally {
      // A reap under way may be giving rows up: their dead letters go out before the subscription closes.
      await this.leases.stop();
      // After the jobs: a broker's messages are acked as they end, on the subscription's channel.
      await this.plugs.source.stop();
    }
    if (this.fatal !== null) throw this.fatal;
    this.emit('stopped', { reason: this.stopReason });
    return this.counters;
  }

  /** A claim of what the gate (if any) lets through; null when the gate waited instead. */
  private async claimThroughGate(wanted: number, idle: boolean): Promise<Row[] | null> {
    const gate = this.plugs.gate;
    if (!gate) return this.claim(wanted);
    const admitted = await gate.admit(wanted, idle, (ms) => this.waitUnlessStopping(ms));
    if (admitted === null || admitted === 0) return admitted === null ? null : [];
    const rows = await this.claim(admitted);
    await gate.claimed(admitted, rows.length);
    return rows;
  }

  private async claim(limit: number): Promise<Row[]> {
    const claimStarted = performance.now();
    const batch = await this.plugs.source.claim(limit);
    if (batch === null) return [];
    await this.began(batch, claimStarted);
    // The rows it did claim run; the claim itself failed, and the loop backs off (or waits) as after any failure.
    if (batch.interruptedBy !== undefined) throw batch.interruptedBy;
    return batch.rows;
  }

  /** Counts a claim and starts its rows (or hands them back when stop() already gave up on this worker). */
  private async began({ rows, token, candidatesLost }: ClaimedBatch, claimStarted: number): Promise<void> {
    this.counters.claimCalls++;
    if (rows.length === 0) this.counters.emptyClaims++;
    this.counters.claimed += rows.length;
    this.counters.candidatesLost += candidatesLost;
    if (rows.length === 0 && candidatesLost === 0) return;
    const jobs = rows.map((row) => jobFromRow(this.queue.table, row));
    if (this.flights.handedBack) {
      // A claim that was still waiting on the database when stop() gave up: nobody will run these rows.
      await this.flights.release(jobs.map((job) => ({ job, token })));
      for (const job of jobs) this.plugs.source.finished(job.id);
    } else {
      this.emit('claimed', { jobs, candidatesLost, durationMs: performance.now() - claimStarted });
      this.flights.start(jobs, token);
    }
  }

  /** Ends the run with `error`: no more claims; running jobs drain, then run() rejects with it. */
  private endRun(error: unknown): void {
    this.fatal ??= error;
    this.stopping = true;
    this.wakeUps.wake();
  }

  private async isDrained(): Promise<boolean> {
    if (!this.flights.idle) return false;
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
   * on a store with `idleProbe` (a drained table's idle probe, IDLE_PROBE_WAIT_MS) held a stopped worker's run() for 30 s.
   */
  private async pause(wait: () => Promise<void>): Promise<void> {
    if (!this.stopping) await wait();
  }

  /** Waits `ms` whatever finishes meanwhile (a finished job frees a slot, not budget); stop() ends it early. */
  private async waitUnlessStopping(ms: number): Promise<void> {
    const until = Date.now() + ms;
    while (!this.stopping && Date.now() < until) await this.wakeUps.sleep(until - Date.now());
  }

}
