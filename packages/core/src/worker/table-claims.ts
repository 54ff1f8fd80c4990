import type { Queue } from '../queue/queue.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import type { ClaimStrategy } from '../store/store.js';
import type { ClaimSource, ClaimedBatch } from './seams.js';

/** The default source of claims: the table's candidate SELECT and the guarded UPDATE (Queue.claim). */
export class TableClaims implements ClaimSource {
  constructor(
    private readonly queue: Queue,
    private readonly how: { strategy: ClaimStrategy; agingMs: number | undefined },
    /** A new claim token; called only when the table fences its claims. */
    private readonly nextToken: () => string,
    private readonly retrying: (error: unknown) => void,
  ) {}

  async start(): Promise<void> {}

  claim(limit: number): Promise<ClaimedBatch> {
    return this.claimWith(limit, this.queue.table.features.fencing ? this.nextToken() : null);
  }

  /** A claim under a token the caller chose (one batch made of several claims shares one). */
  async claimWith(limit: number, token: string | null): Promise<ClaimedBatch> {
    const { rows, candidatesLost, interruptedBy } = await withStoreRetry(() => this.queue.claim({ limit, token, agingMs: this.how.agingMs }, this.how.strategy), {
      ...STORE_RETRY.claim,
      onRetry: this.retrying,
    });
    return interruptedBy === undefined ? { rows, token, candidatesLost } : { rows, token, candidatesLost, interruptedBy };
  }

  finished(): void {}

  arrival(): null {
    return null;
  }

  async stop(): Promise<void> {}
}
