/**
 * A limit on what a worker claims that the whole fleet shares (the rate budget now; kinds and groups with limits
 * of their own next). The worker asks its gate before every claim and tells it after; a gate never sees a row.
 * A limit is a module of this room implementing this, chosen from the worker's options in worker/plugs.ts: the
 * loop itself does not change when a limit is added.
 */
export interface ClaimGate {
  /**
   * How many rows the next claim may take, at most `wanted`. 0: claim nothing now (the loop goes idle as after
   * an empty claim). null: the gate waited (with `wait`, which a stop ends early) and the loop should look at
   * its slots again before asking once more. `idle`: the last claim found nothing.
   */
  admit(wanted: number, idle: boolean, wait: (ms: number) => Promise<void>): Promise<number | null>;
  /** The claim let through `admitted` rows and took `claimed` of them; what went unused is the gate's to take back. */
  claimed(admitted: number, claimed: number): Promise<void>;
}
