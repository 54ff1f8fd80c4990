/**
 * Claims for a worker under its table's group limits (limits/group-limits.ts): each claim is one transaction
 * under the table's group lock. An empty claim that skipped rows of full or paced groups waits (HeldBackWait)
 * rather than claiming again as soon as the idle wait sees rows due.
 */
import type { GroupLimits } from '../limits/group-limits.js';
import type { ResolvedTable } from '../protocol/table.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import type { HeldBackWait } from './held-back-wait.js';
import type { ClaimSource, ClaimedBatch } from './seams.js';

export class GroupLimitedClaims implements ClaimSource {
  constructor(
    private readonly groups: GroupLimits,
    /** The rows this worker claims: the table, or the kinds it has handlers for. */
    private readonly view: ResolvedTable,
    private readonly fencing: boolean,
    private readonly nextToken: () => string,
    private readonly claimer: string,
    private readonly retrying: (error: unknown) => void,
    private readonly heldBack: HeldBackWait,
  ) {}

  async start(): Promise<void> {}

  async claim(limit: number): Promise<ClaimedBatch> {
    const batch = await this.claimWith(limit, this.fencing ? this.nextToken() : null);
    this.heldBack.claimed(batch.rows.length, batch.heldBack, batch.freedInMs);
    return batch;
  }

  /** A claim under a token the caller chose (KindLimitedClaims makes one batch of several claims under one). */
  async claimWith(limit: number, token: string | null): Promise<ClaimedBatch & { heldBack: boolean; freedInMs: number | null }> {
    const claimed = await withStoreRetry(() => this.groups.claim(this.view, limit, token, this.claimer), { ...STORE_RETRY.claim, onRetry: this.retrying });
    return { rows: claimed.rows, token, candidatesLost: 0, heldBack: claimed.skipped, freedInMs: claimed.pacedForMs };
  }

  finished(): void {}

  arrival(): Promise<void> | null {
    return this.heldBack.arrival();
  }

  async stop(): Promise<void> {
    this.heldBack.stop();
  }
}
