import { dispatchId, type Broker, type DispatchMessage } from '../broker/broker.js';
import { ConfigError, describeError, isRetryableStoreError } from '../protocol/errors.js';
import { TypedEmitter } from '../worker/events.js';
import { Queue } from '../queue/queue.js';
import { STORE_RETRY, backoffDelay, withStoreRetry } from '../store/retry.js';
import { assertDispatchColumns, dispatchIndexName, hasIndex } from '../sql/schema.js';
import { WakeUps } from '../worker/wake-ups.js';
import type { JobId, Row, Store } from '../store/store.js';
import type { TableConfig } from '../protocol/table.js';
import { DEFAULT_POLL_MAX_MS, DEFAULT_POLL_MIN_MS, nonNegative } from '../worker/worker-options.js';

/**
 * The relay: hands a table's due rows to a broker, one message per row, while the table stays the record.
 * It never claims a row: a row stays pending until a consumer (a Worker with `from`) claims it by id with the
 * guarded UPDATE, so polling workers on the same table keep working during a migration and a message that
 * arrives twice, late or for a settled row changes nothing. Per pass: select rows that need a dispatch, mark
 * them dispatched (dispatched_at = now, guarded), publish with confirms; a publish that fails unmarks them.
 * A relay that dies between marking and the confirm leaves rows that the redispatch age brings back.
 */
export interface RelayOptions {
  store: Store;
  table: TableConfig;
  /** Where messages go. The relay does not close it. */
  to: Broker;
  /** Most rows published per pass. Default 256. */
  batch?: number | undefined;
  /**
   * A row dispatched this long ago and still not claimed is published again: the broker lost its message, or
   * a relay died before the confirm. Keep it above the longest a message waits in a backlog, or rows are
   * published twice (harmless: the second claim finds the row taken). Default 5 minutes.
   */
  redispatchMs?: number | undefined;
  /** Waits between passes that found nothing, doubling from pollMinMs to pollMaxMs (where the store cannot wake the relay). */
  pollMinMs?: number | undefined;
  pollMaxMs?: number | undefined;
  /** Stop once no row is pending or processing (tests and one-shot runs). */
  exitWhenEmpty?: boolean | undefined;
  /** Source of randomness for jitter (tests pin it). */
  random?: (() => number) | undefined;
}

export interface RelayCounters {
  /** Passes that asked the table for rows to dispatch. */
  passes: number;
  /** Messages the broker confirmed. */
  published: number;
  /** Rows marked by another relay between this one's SELECT and its mark (nothing published for them). */
  skipped: number;
  /** Batches the broker refused or did not confirm (unmarked, published again at the next pass). */
  publishFailures: number;
}

export interface RelayEvents {
  /** One batch confirmed: `count` messages, `durationMs` from the SELECT to the last confirm. */
  published: { count: number; durationMs: number };
  /** A database or broker error the relay survived (it retries with backoff). */
  error: { error: unknown; during: string };
  stopped: { reason: 'stop' | 'empty' };
}

export const DEFAULT_RELAY_BATCH = 256;
export const DEFAULT_REDISPATCH_MS = 300_000;
/** Consecutive database failures that no retry can fix after which run() rejects. */
const MAX_CONSECUTIVE_FAILURES = 5;

export class Relay extends TypedEmitter<RelayEvents> {
  readonly counters: RelayCounters = { passes: 0, published: 0, skipped: 0, publishFailures: 0 };
  private stopping = false;
  private running: Promise<RelayCounters> | null = null;
  private readonly wakeUps = new WakeUps();

  private constructor(
    readonly queue: Queue,
    private readonly broker: Broker,
    private readonly settings: { batch: number; redispatchMs: number; pollMinMs: number; pollMaxMs: number; dispatchIndex: string | null; exitWhenEmpty: boolean; random: () => number },
  ) {
    super();
  }

  /** Validates the options and the table (no dispatch, lease or token column: SchemaError) before any row is touched. */
  static async create(options: RelayOptions): Promise<Relay> {
    if (!options || typeof options !== 'object') throw new ConfigError('relay options must be an object');
    if (!options.store) throw new ConfigError('relay needs a store');
    if (!options.to || typeof options.to.publish !== 'function') throw new ConfigError('relay needs a broker (the `to` option; see connectBroker)');
    const batch = options.batch ?? DEFAULT_RELAY_BATCH;
    if (!Number.isSafeInteger(batch) || batch < 1 || batch > 10_000) throw new ConfigError(`batch must be an integer from 1 to 10000, got ${String(options.batch)}`);
    const redispatchMs = nonNegative(options.redispatchMs, DEFAULT_REDISPATCH_MS, 'redispatch');
    if (redispatchMs < 1000) throw new ConfigError('redispatch must be at least 1 s: a shorter one publishes every waiting row again and again');
    const pollMinMs = nonNegative(options.pollMinMs, DEFAULT_POLL_MIN_MS, 'pollMin');
    const pollMaxMs = Math.max(pollMinMs, nonNegative(options.pollMaxMs, DEFAULT_POLL_MAX_MS, 'pollMax'));
    const queue = await Queue.open(options.store, options.table);
    assertDispatchColumns(queue.table, 'statusq relay');
    const dispatchIndex = await hintedDispatchIndex(queue);
    return new Relay(queue, options.to, { batch, redispatchMs, pollMinMs, pollMaxMs, dispatchIndex, exitWhenEmpty: options.exitWhenEmpty === true, random: options.random ?? Math.random });
  }

  run(): Promise<RelayCounters> {
    this.running ??= this.loop();
    return this.running;
  }

  /** Stops after the pass in flight (its publish confirmed or failed); resolves with run(). */
  async stop(): Promise<RelayCounters> {
    this.stopping = true;
    this.wakeUps.wake();
    return this.running ?? this.counters;
  }

  private async loop(): Promise<RelayCounters> {
    let idleStep = 0;
    let failures = 0;
    let fatal: unknown = null;
    while (!this.stopping) {
      let published: number;
      try {
        published = await this.pass();
        failures = 0;
      } catch (error) {
        this.emit('error', { error, during: 'dispatch' });
        if (!isRetryableStoreError(error) && !isBrokerRetryable(error) && ++failures >= MAX_CONSECUTIVE_FAILURES) {
          fatal = error;
          break;
        }
        if (!this.stopping) await this.wakeUps.sleep(backoffDelay(idleStep++, { baseMs: this.settings.pollMinMs, maxMs: this.settings.pollMaxMs, random: this.settings.random }));
        continue;
      }
      if (published > 0) {
        idleStep = 0;
        continue;
      }
      // Not while rows are processing: a claim its worker loses comes back pending (a reap, a hand-back) and
      // needs publishing again, which nothing would do once this relay is gone.
      if (this.settings.exitWhenEmpty && !(await this.queue.hasRowsWithStatus('pending', 'processing'))) {
        this.emit('stopped', { reason: 'empty' });
        return this.counters;
      }
      await this.idle(backoffDelay(idleStep++, { baseMs: this.settings.pollMinMs, maxMs: this.settings.pollMaxMs, random: this.settings.random }));
    }
    if (fatal !== null) throw fatal;
    this.emit('stopped', { reason: 'stop' });
    return this.counters;
  }

  /** One pass: the rows that need a dispatch, marked, published; how many the broker confirmed. */
  private async pass(): Promise<number> {
    const started = performance.now();
    const { sql, store, table } = this.queue;
    const { redispatchMs } = this.settings;
    this.counters.passes++;
    const { rows: found } = await withStoreRetry(() => store.execute(sql.dispatchCandidates(this.settings.batch, redispatchMs, this.settings.dispatchIndex)), STORE_RETRY.claim);
    // The two selections may each bring a batch; the rows never dispatched come first.
    const rows = found.slice(0, this.settings.batch);
    if (rows.length === 0) return 0;
    const ids = rows.map((row) => row[table.id] as JobId);
    const { affected } = await withStoreRetry(() => store.execute(sql.markDispatched(ids, redispatchMs)), STORE_RETRY.claim);
    // Another relay marked some of them in between: this one cannot tell which without a read, and publishing
    // all is safe (a duplicate's claim changes nothing), so only a relay that lost them all skips the batch.
    if (affected === 0) {
      this.counters.skipped += rows.length;
      return 0;
    }
    const messages = rows.map((row) => this.messageFor(row));
    try {
      await this.broker.publish(messages);
    } catch (error) {
      this.counters.publishFailures++;
      await store.execute(sql.unmarkDispatched(ids)).catch((unmarkError: unknown) => this.emit('error', { error: unmarkError, during: 'unmark after a failed publish (the redispatch age brings the rows back)' }));
      throw error;
    }
    this.counters.published += messages.length;
    this.emit('published', { count: messages.length, durationMs: performance.now() - started });
    return messages.length;
  }

  private messageFor(row: Row): DispatchMessage {
    const { table } = this.queue;
    const attempts = table.columns.attemptCount ? Number(row['attempts'] ?? 0) : 0;
    return { table: table.table, id: dispatchId(row[table.id] as JobId), attempt: attempts + 1 };
  }

  /**
   * Until rows may be due: the store's wake-up (`listenNotify`: the server's notifications, the file watch) or a
   * timer. Not an `idleProbe` store's probe: it ends as soon as any row is pending and due, which rows waiting in the broker's queue always are,
   * so the relay would spin through empty passes for as long as a backlog lasts.
   */
  private async idle(delayMs: number): Promise<void> {
    // No wait starts once stop() was called (here or before a retry): its wake() ended only the waits already
    // under way, and a pass in flight at that moment would go on into a whole one.
    if (this.stopping) return;
    const { store, table } = this.queue;
    if (!store.capabilities.listenNotify) return this.wakeUps.sleep(delayMs);
    try {
      await this.wakeUps.waitForWork(store, delayMs, table);
    } catch (error) {
      this.emit('error', { error, during: `wait for work (${describeError(error)})` });
      await this.wakeUps.sleep(delayMs);
    }
  }
}

function isBrokerRetryable(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { retryable?: unknown }).retryable === true;
}

/**
 * The dispatch index's name where the dialect hints indexes (forceIndex) and the table has it (`migrate --with
 * dispatch` built it), else null: a hint naming a missing index may be an error (`forceIndex` on one adapter's server), not a no-op.
 */
async function hintedDispatchIndex(queue: Queue): Promise<string | null> {
  const { store } = queue;
  if (!store.dialect.forceIndex || !store.schema) return null;
  const name = dispatchIndexName(queue.table.table);
  return (await hasIndex(store, store.schema, queue.table.table, name)) ? name : null;
}
