/** What a worker reports of its run: its counters, and how a stop() ended. */

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
