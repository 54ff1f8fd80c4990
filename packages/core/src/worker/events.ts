import type { Job } from './handler.js';
import type { GivenUpRow } from '../queue/queue.js';

// `durationMs` on a settled job's event: how long its user code (the abuse rule and the handler) ran.

export interface WorkerEvents {
  /**
   * `candidatesLost`: candidates another claimer took first during this claim. `durationMs`: how long the
   * claim took, its store retries included (what the worker waited).
   */
  claimed: { jobs: Job[]; candidatesLost: number; durationMs: number };
  completed: { job: Job; result: unknown; durationMs: number };
  /**
   * The job settled to failed (0): given up, or out of attempts. `cause`: what the handler threw (or the
   * timeout's error), for its stack; absent when it gave up through ctx.giveUp.
   */
  failed: { job: Job; error: string; durationMs: number; cause?: unknown };
  /** The attempt failed and a retry is scheduled; `cause` as for `failed`. */
  retried: { job: Job; error: string; delayMs: number; durationMs: number; cause?: unknown };
  abused: { job: Job; reason: string; durationMs: number };
  /** This worker no longer owns the job (lease taken over, or settled by someone else); its settle changed nothing. */
  'claim-lost': { job: Job; during: 'settle' | 'heartbeat' };
  /**
   * An operator cancelled the running job (Queue.cancel): its heartbeat found the row failed with `reason`
   * (`cancelled: ...`), its ctx.signal aborted with it, and nothing it settles afterwards changes the row.
   */
  cancelled: { job: Job; reason: string };
  /**
   * The row's trace_context is not W3C trace context (`reason` says how): it is ignored, and the job runs in a
   * trace of its own. Worth a debug line, not more: the row is fine, only its link to the enqueuer is lost.
   */
  'trace-context-ignored': { job: Job; reason: string };
  /** A database or internal error the worker survived (it retries or leaves the row to the lease reaper). */
  error: { error: unknown; during: string };
  /**
   * This worker's reaper charged an attempt to `count` claims whose lease expired: most went back to pending,
   * `givenUp` had used their attempts and ended in failed (a worker with `from` also dead-letters them).
   */
  reaped: { count: number; givenUp: GivenUpRow[] };
  /**
   * The database refused a write as read-only (a replica, a hot standby, a failover in progress): claims
   * stop and settles wait, for up to `waitMs`. Once per wait, not per refused call.
   */
  'read-only': { error: unknown; during: string; waitMs: number };
  /** A write went through again after a read-only wait of `durationMs`. */
  writable: { durationMs: number };
  /** `recycle`: a handler outlived its job timeout and grace; the process should exit so the handler ends with it. */
  stopped: { reason: 'stop' | 'empty' | 'recycle' };
}

export type WorkerEventName = keyof WorkerEvents;
type Listener<Events, K extends keyof Events> = (event: Events[K]) => void;

/**
 * A typed emitter. Unlike node's EventEmitter, an `error` event with no listener does not throw, and a
 * listener that throws cannot break the worker loop.
 */
export class TypedEmitter<Events extends object = WorkerEvents> {
  private readonly listeners = new Map<keyof Events, Set<Listener<Events, never>>>();

  on<K extends keyof Events>(name: K, listener: Listener<Events, K>): () => void {
    let set = this.listeners.get(name);
    if (!set) this.listeners.set(name, (set = new Set()));
    set.add(listener as Listener<Events, never>);
    return () => set.delete(listener as Listener<Events, never>);
  }

  protected emit<K extends keyof Events>(name: K, event: Events[K]): void {
    const set = this.listeners.get(name);
    if (!set) return;
    for (const listener of set) {
      try {
        (listener as Listener<Events, K>)(event);
      } catch {
        // A broken listener must not stop the queue.
      }
    }
  }
}
