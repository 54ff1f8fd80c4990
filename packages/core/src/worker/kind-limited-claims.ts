/**
 * Claims for a worker with handlers by kind some of which have a fleet-wide limit (limits/kind-concurrency.ts):
 * each claim takes the limited kinds first, each under its lock and within its limit, starting from a
 * different kind every time so that one busy kind does not always go first, then fills what is left from its
 * other kinds through the usual claim (or the group-limited one). One token for the whole batch, as the loop
 * settles a batch under one.
 */
import type { KindConcurrency } from '../limits/kind-concurrency.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import type { Row } from '../store/store.js';
import type { HeldBackWait } from './held-back-wait.js';
import type { ClaimSource, ClaimedBatch } from './seams.js';

/** The claim of the kinds without a limit, under the batch's token (TableClaims, GroupLimitedClaims). */
export interface TokenClaims {
  claimWith(limit: number, token: string | null): Promise<ClaimedBatch & { heldBack?: boolean }>;
}

export class KindLimitedClaims implements ClaimSource {
  private next = 0;

  constructor(
    private readonly limited: KindConcurrency,
    /** The usual claim over the worker's kinds that have no limit; null when every kind it handles has one. */
    private readonly unlimited: TokenClaims | null,
    private readonly fencing: boolean,
    private readonly nextToken: () => string,
    private readonly claimer: string,
    private readonly retrying: (error: unknown) => void,
    private readonly heldBack: HeldBackWait,
  ) {}

  async start(): Promise<void> {}

  async claim(limit: number): Promise<ClaimedBatch> {
    const token = this.fencing ? this.nextToken() : null;
    const rows: Row[] = [];
    let heldBack = false;
    let batch: ClaimedBatch = { rows, token, candidatesLost: 0 };
    try {
      const kinds = this.limited.kinds;
      const first = this.next++ % kinds.length;
      for (let i = 0; i < kinds.length && rows.length < limit; i++) {
        const kind = kinds[(first + i) % kinds.length]!;
        const claimed = await withStoreRetry(() => this.limited.claim(kind, limit - rows.length, token, this.claimer), { ...STORE_RETRY.claim, onRetry: this.retrying });
        rows.push(...claimed.rows);
        heldBack ||= claimed.heldBack;
      }
      if (this.unlimited !== null && rows.length < limit) {
        const rest = await this.unlimited.claimWith(limit - rows.length, token);
        heldBack ||= rest.heldBack === true;
        batch = { ...rest, rows: [...rows, ...rest.rows] };
      }
    } catch (error) {
      // What the earlier claims took is this worker's: hand it over with the error (it runs; the loop backs off).
      if (rows.length === 0) throw error;
      return { rows, token, candidatesLost: 0, interruptedBy: error };
    }
    this.heldBack.claimed(batch.rows.length, heldBack, null);
    return { rows: batch.rows, token, candidatesLost: batch.candidatesLost, ...(batch.interruptedBy !== undefined && { interruptedBy: batch.interruptedBy }) };
  }

  finished(): void {}

  arrival(): Promise<void> | null {
    return this.heldBack.arrival();
  }

  async stop(): Promise<void> {
    this.heldBack.stop();
  }
}
