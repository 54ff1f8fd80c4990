/**
 * The seams of the worker loop. The loop knows claim -> run -> settle; what else a worker does plugs in,
 * chosen from its options in plugs.ts: where claims come from (the table's candidate SELECT, or a broker's
 * deliveries), a gate before each claim (limits/claim-gate.ts: the rate budget), steps after a settle (the
 * broker's dead letters), where ctx.progress goes (job-run.ts's ProgressSink), and the reaction to a refused
 * write (the read-only wait). A new feature is a module implementing one of these and a line in plugs.ts,
 * not an edit of worker.ts.
 */
import type { GivenUpRow } from '../queue/queue.js';
import type { JobId, Row } from '../store/store.js';
import type { StoreError } from '../protocol/errors.js';

/** What one claim call returned. */
export interface ClaimedBatch {
  /** The rows now this worker's, in processing. */
  rows: Row[];
  /** The claim token written with them (fencing), which their settles must name; null without fencing. */
  token: string | null;
  /** Candidates another claimer took first: nothing lost but a round trip. */
  candidatesLost: number;
  /** The claim failed after taking `rows` (they still run): the loop backs off as after any failed claim. */
  interruptedBy?: unknown;
}

/** Where the loop's claims come from. */
export interface ClaimSource {
  /** Before the first claim (a broker subscribes here). */
  start(): Promise<void>;
  /**
   * Claims up to `limit` rows (retrying what a retry can fix); rejects with what it cannot. null: nothing was
   * asked of the database (a broker with no message waiting), so no claim is counted.
   */
  claim(limit: number): Promise<ClaimedBatch | null>;
  /** The job of a claimed row is over here: settled, lost, or handed back. */
  finished(id: JobId): void;
  /**
   * With nothing claimed: what the idle wait ends on when this source says when there is work (a broker's next
   * delivery); null when the table is the one to watch (the poll, the store's wake-up).
   */
  arrival(): Promise<void> | null;
  /** After the last job (a broker unsubscribes here, once every ack is answered). */
  stop(): Promise<void>;
}

/** A step after a settle committed. */
export interface SettleStep {
  /** A row given up, by its handler's outcome or by this worker's lease reaper (its failed status is committed). */
  givenUp(row: GivenUpRow): void;
}

/**
 * What a worker does while the database refuses writes for now (a replica, a failover): one wait shared by
 * its claims and its settles, bounded; ReadOnlyWait is the one the worker uses.
 */
export interface RefusedWrites {
  /** Whether `error` is such a refusal, rather than a failure. */
  handles(error: unknown): error is StoreError;
  readonly waiting: boolean;
  /** Records a refusal; false once the wait is over (bound spent, or cancelled): the run ends then. */
  refused(error: StoreError, during: string): boolean;
  /** A write went through: the wait (if any) is over. */
  writable(): void;
  /** The pause before the step-th check. */
  delay(step: number): number;
  /** Sleeps delay(step), cut short by cancel(). */
  pause(step: number): Promise<void>;
  /** Ends the wait at once: nothing waits for the writes any more (a stop past its timeout). */
  cancel(): void;
  /** The error that ends the run when the wait ran out. */
  exhausted(error: StoreError): StoreError;
}
