/**
 * What a peer queue (graphile-worker, pg-boss, BullMQ) implements so the harness can run it in the same scenarios
 * as statusq. Each run owns its database objects: it creates them, loads jobs, measures, and drops them.
 */
export interface BurnDownOptions {
  /** PostgreSQL URL of a database the run may create schemas in (the bench's own). */
  url: string;
  /** Jobs loaded before the clock starts. */
  jobs: number;
  /** Independent worker instances, each with its own connection pool. */
  workers: number;
  /** Jobs each worker runs at once (and fetches per round trip where the peer batches). */
  concurrency: number;
  /** Simulated I/O per job; 0 is the no-op handler. */
  handlerDelayMs: number;
  /** Give up (and report what was done) after this long. */
  timeoutMs: number;
}

export interface BurnDownResult {
  /** Jobs whose handler ran to completion before the clock stopped. */
  handled: number;
  /** From the first handler start to the last job settled (queue empty). */
  seconds: number;
  /** True when timeoutMs passed before the queue emptied. */
  timedOut: boolean;
  /** Jobs a worker could hold at once when the peer's setting is not `concurrency` (pg-boss localConcurrency x batchSize). */
  slotsPerWorker?: number;
}

export interface PickupOptions {
  url: string;
  /** Rows inserted one at a time, intervalMs apart, while one idle worker waits. */
  rows: number;
  intervalMs: number;
  timeoutMs: number;
}

export interface PickupResult {
  /** Milliseconds from just before each insert to its handler's start, in insert order. */
  latenciesMs: number[];
}

export interface Peer {
  /** e.g. `graphile-worker`, `pg-boss`, `bullmq`. */
  system: string;
  /**
   * Where its jobs live when not the bench's PostgreSQL (BullMQ on Redis: `redis`). `url` is still the
   * PostgreSQL one; such a peer ignores it.
   */
  store?: 'redis';
  /** e.g. `unbatched`, `local-queue`, `batch-fetch`. */
  variant: string;
  burnDown(options: BurnDownOptions): Promise<BurnDownResult>;
  pickup(options: PickupOptions): Promise<PickupResult>;
}
