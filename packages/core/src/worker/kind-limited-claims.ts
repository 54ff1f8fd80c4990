/**
 * Claims for a worker with handlers by kind some of which have a fleet-wide limit: a concurrency
 * (limits/kind-concurrency.ts) or a rate (a budget per kind, limits/rate-budget.ts), or both. Each claim takes
 * the limited kinds first, each within its limits, starting from a different kind every time so that one busy
 * kind does not always go first, then fills what is left from its other kinds through the usual claim (or the
 * group-limited one). One token for the whole batch, as the loop settles a batch under one.
 */
import type { RateLimiter } from '../limits/rate-budget.js';
import type { Row } from '../store/store.js';
import type { HeldBackWait } from './held-back-wait.js';
import type { ClaimSource, ClaimedBatch } from './seams.js';

/** A claim under the batch's token (TableClaims, GroupLimitedClaims, a limited kind's); `heldBack`: a limit left due rows behind. */
export interface TokenClaims {
  claimWith(limit: number, token: string | null): Promise<ClaimedBatch & { heldBack?: boolean }>;
}

/** One limited kind, as this source claims it. */
export interface LimitedKind {
  kind: string;
  /** Its claim: under its concurrency's lock, or the usual one over that kind alone. */
  claims: TokenClaims;
  /** Its rate's budget; null without one. */
  rate: RateLimiter | null;
  /** Whether a row of the kind is due: asked before spending budget after an empty claim (a budget's take is a write). */
  hasDueRow(): Promise<boolean>;
}

export class KindLimitedClaims implements ClaimSource {
  private next = 0;
  /** Kinds whose last claim found nothing due. */
  private readonly idle = new Set<string>();

  constructor(
    private readonly limited: readonly LimitedKind[],
    /** The usual claim over the worker's kinds that have no limit; null when every kind it handles has one. */
    private readonly unlimited: TokenClaims | null,
    private readonly fencing: boolean,
    private readonly nextToken: () => string,
    private readonly heldBack: HeldBackWait,
    private readonly giveBackFailed: (error: unknown) => void,
  ) {}

  async start(): Promise<void> {}

  async claim(limit: number): Promise<ClaimedBatch> {
    const token = this.fencing ? this.nextToken() : null;
    const rows: Row[] = [];
    let candidatesLost = 0;
    let heldBack = false;
    let freedInMs: number | null = null;
    try {
      const first = this.next++ % this.limited.length;
      for (let i = 0; i < this.limited.length && rows.length < limit; i++) {
        const kind = this.limited[(first + i) % this.limited.length]!;
        let wanted = limit - rows.length;
        if (kind.rate !== null) {
          if (this.idle.has(kind.kind) && !(await kind.hasDueRow())) continue;
          const grant = await kind.rate.take(wanted);
          if (grant.tokens === 0) {
            heldBack = true;
            freedInMs = Math.min(freedInMs ?? grant.waitMs, grant.waitMs);
            continue;
          }
          wanted = grant.tokens;
        }
        const claimed = await this.claimGranted(kind, wanted, token);
        rows.push(...claimed.rows);
        candidatesLost += claimed.candidatesLost;
        heldBack ||= claimed.heldBack === true;
        if (claimed.rows.length === 0 && claimed.heldBack !== true) this.idle.add(kind.kind);
        else this.idle.delete(kind.kind);
        if (claimed.interruptedBy !== undefined) throw claimed.interruptedBy;
      }
      if (this.unlimited !== null && rows.length < limit) {
        const rest = await this.unlimited.claimWith(limit - rows.length, token);
        rows.push(...rest.rows);
        candidatesLost += rest.candidatesLost;
        heldBack ||= rest.heldBack === true;
        if (rest.interruptedBy !== undefined) throw rest.interruptedBy;
      }
    } catch (error) {
      // What the earlier claims took is this worker's: hand it over with the error (it runs; the loop backs off).
      if (rows.length === 0) throw error;
      return { rows, token, candidatesLost, interruptedBy: error };
    }
    this.heldBack.claimed(rows.length, heldBack, freedInMs);
    return { rows, token, candidatesLost };
  }

  /** The claim of `wanted` rows of a kind its rate granted; what the claim did not use goes back to the budget. */
  private async claimGranted(kind: LimitedKind, wanted: number, token: string | null): Promise<ClaimedBatch & { heldBack?: boolean }> {
    let claimed: (ClaimedBatch & { heldBack?: boolean }) | undefined;
    try {
      claimed = await kind.claims.claimWith(wanted, token);
      return claimed;
    } finally {
      const unused = wanted - (claimed?.rows.length ?? 0);
      if (kind.rate !== null && unused > 0) await kind.rate.giveBack(unused).catch(this.giveBackFailed);
    }
  }

  finished(): void {}

  arrival(): Promise<void> | null {
    return this.heldBack.arrival();
  }

  async stop(): Promise<void> {
    this.heldBack.stop();
  }
}
