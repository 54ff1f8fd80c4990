/**
 * Claims for a worker with handlers by kind some of which have a fleet-wide limit (limits/kind-concurrency.ts):
 * each claim takes the limited kinds first, each under its lock and within its limit, starting from a
 * different kind every time so that one busy kind does not always go first, then fills what is left from its
 * other kinds through the usual claim. One token for the whole batch, as the loop settles a batch under one.
 */
import type { KindConcurrency } from '../limits/kind-concurrency.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import type { Row } from '../store/store.js';
import type { ClaimSource, ClaimedBatch } from './seams.js';
import type { TableClaims } from './table-claims.js';

export class KindLimitedClaims implements ClaimSource {
  private next = 0;

  constructor(
    private readonly limited: KindConcurrency,
    /** The usual claim over the worker's kinds that have no limit; null when every kind it handles has one. */
    private readonly unlimited: TableClaims | null,
    private readonly fencing: boolean,
    private readonly nextToken: () => string,
    private readonly claimer: string,
    private readonly retrying: (error: unknown) => void,
  ) {}

  async start(): Promise<void> {}

  async claim(limit: number): Promise<ClaimedBatch> {
    const token = this.fencing ? this.nextToken() : null;
    const rows: Row[] = [];
    const kinds = this.limited.kinds;
    const first = this.next++ % kinds.length;
    for (let i = 0; i < kinds.length && rows.length < limit; i++) {
      const kind = kinds[(first + i) % kinds.length]!;
      try {
        rows.push(...(await withStoreRetry(() => this.limited.claim(kind, limit - rows.length, token, this.claimer), { ...STORE_RETRY.claim, onRetry: this.retrying })));
      } catch (error) {
        // What the earlier kinds' claims took is this worker's: hand it over with the error (it runs; the loop backs off).
        if (rows.length === 0) throw error;
        return { rows, token, candidatesLost: 0, interruptedBy: error };
      }
    }
    if (this.unlimited === null || rows.length >= limit) return { rows, token, candidatesLost: 0 };
    let rest: ClaimedBatch;
    try {
      rest = await this.unlimited.claimWith(limit - rows.length, token);
    } catch (error) {
      if (rows.length === 0) throw error;
      return { rows, token, candidatesLost: 0, interruptedBy: error };
    }
    return { ...rest, rows: [...rows, ...rest.rows] };
  }

  finished(): void {}

  arrival(): null {
    return null;
  }

  async stop(): Promise<void> {}
}
