import { keyOf } from '../sql/claim.js';
import type { Queue } from '../queue/queue.js';
import { whileReadOnly } from './read-only-wait.js';
import type { RefusedWrites } from './seams.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import { splitToFit } from '../sql/statement-size.js';
import type { ExecResult, JobId, Statement } from '../store/store.js';

/**
 * Groups settles: whatever accumulates while one transaction commits goes into the next, so a busy worker
 * commits many settles at once instead of paying one commit per job (a single-row commit costs about as
 * much as a claim). Completions under the same claim token go further and share one
 * `UPDATE ... WHERE id IN (...) AND status = 9 AND worker_id = ?` (those that store a result only on a store
 * with groupedResults; elsewhere each is its own statement); on a table without a token column (no
 * fencing: an application table with only a status column) they share one without the token guard, since
 * a row-by-row settle there cost one adapter's server half its throughput (8 workers x 256 slots: ~20,000 jobs/s
 * against ~30,000-50,000 with tokens, 2026-12-02). Each submit resolves with whether its guarded UPDATE
 * changed its row.
 */
export class Settler {
  private queue: SettleRequest[] = [];
  private flushing: Promise<void> | null = null;
  /**
   * Set until a settle has committed at once, and again by one that had to be retried, split or waited for
   * (read-only), until the next clean commit: while it is set the worker claims nothing ahead of its settles.
   * Set at first so a table whose settles can never pass (a constraint, a revoked grant) strands no more rows in
   * processing than without the claim ahead.
   */
  private troubled = true;

  constructor(
    private readonly target: Queue,
    private readonly maxBatch: number,
    private readonly onRetry: (error: unknown) => void,
    /** A read-only database: settles wait for it (the worker's one wait and bound) instead of failing. */
    private readonly readOnly: RefusedWrites,
  ) {}

  get idle(): boolean {
    return this.queue.length === 0 && this.flushing === null;
  }

  /** The settles commit as they should: the last flush committed with no retry, no split and no read-only wait. */
  get healthy(): boolean {
    return !this.troubled;
  }

  whenIdle(): Promise<void> {
    return this.flushing ?? Promise.resolve();
  }

  /**
   * Queues one settle for the next commit; the request hears back through `settled` or `failed`, once. A
   * callback rather than a promise per settle: the worker's job in flight is its own request, so a no-op job
   * allocates no promise, closure or wrapper object here.
   */
  submit(request: SettleRequest): void {
    this.queue.push(request);
    this.kick();
  }

  private kick(): void {
    if (this.flushing) return;
    this.flushing = this.flush().finally(() => {
      this.flushing = null;
      // A submit that came after the flush's last look at the queue, but before this, would wait forever.
      if (this.queue.length > 0) this.kick();
    });
  }

  private async flush(): Promise<void> {
    // Let jobs finishing in the same tick join this commit.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      const plan = this.plan(batch);
      if (plan.length === 0) continue;
      let results: ExecResult[];
      // After a retry the commit may have happened on the attempt that seemed to fail, so the last attempt's
      // own counts cannot tell which rows this flush changed.
      let retried = false;
      const onRetry = (error: unknown) => {
        retried = true;
        this.troubled = true;
        this.onRetry(error);
      };
      try {
        results = await whileReadOnly(this.readOnly, 'settle', () => withStoreRetry(() => this.target.apply(plan.map((step) => step.statement)), { ...STORE_RETRY.settle, onRetry }));
        this.troubled = retried;
      } catch (error) {
        this.troubled = true;
        // A database that stayed read-only past the wait refuses every statement alike: trying each on its
        // own would only wait the bound again per row.
        if (this.readOnly.handles(error)) {
          for (const b of batch) b.failed(error);
          continue;
        }
        // One bad statement must not hold the others back: settle each on its own.
        for (const b of batch) {
          let result: ExecResult;
          try {
            const statement = b.statement();
            [result] = (await whileReadOnly(this.readOnly, 'settle', () => withStoreRetry(() => this.target.apply([statement]), { ...STORE_RETRY.settle, onRetry: this.onRetry }))) as [ExecResult];
          } catch (error) {
            b.failed(error);
            continue;
          }
          b.settled(result.affected === 1);
        }
        continue;
      }
      // Committed: from here a failure may only leave a job's fate unknown, never re-run its statement.
      await Promise.all(plan.map((step, i) => step.resolve(results[i]!, retried)));
    }
  }

  /** The statements of one commit: grouped completions per token, then every other settle on its own. */
  private plan(batch: SettleRequest[]): SettleStep[] {
    const steps: SettleStep[] = [];
    const byToken = new Map<string | null, SettleRequest[]>();
    const resultsToo = this.target.store.capabilities.groupedResults;
    for (const b of batch) {
      if (b.completes === undefined || (b.completes !== null && !resultsToo)) continue;
      const group = byToken.get(b.token);
      if (group) group.push(b);
      else byToken.set(b.token, [b]);
    }
    const grouped = new Set<SettleRequest>();
    const limit = this.target.store.statementLimit;
    for (const [token, all] of byToken) {
      if (all.length < 2) continue;
      for (const m of all) grouped.add(m);
      // Within the store's statement limit (Store.statementLimit, a server's largest packet): one UPDATE per run of ids that fits,
      // all in this same commit, instead of one the server refuses (and drops the connection for).
      for (const run of splitToFit(all, (some) => this.target.sql.completeMany(some.map((m) => m.id), token, resultsOf(some)), limit)) {
        steps.push(this.groupedStep(run.items, run.statement, token));
      }
    }
    for (const b of batch) {
      if (grouped.has(b)) continue;
      let statement: Statement;
      try {
        statement = b.statement();
      } catch (error) {
        b.failed(error);
        continue;
      }
      // A completion on its own is a group of one: after a retried commit it asks which rows are done under its
      // token, as a group does, instead of taking its own first attempt's commit for a claim lost.
      if (b.completes !== undefined) steps.push(this.groupedStep([b], statement, b.token));
      else steps.push({ statement, resolve: (result) => b.settled(result.affected === 1) });
    }
    return steps;
  }

  /**
   * One grouped completion: `statement` completes `members` (claimed under `token`), and each learns whether
   * its row changed. The affected count answers that when it covers every member, as it does unless a claim
   * was lost; only then (or after a retried commit) is the database asked which rows are done.
   */
  private groupedStep(members: SettleRequest[], statement: Statement, token: string | null): SettleStep {
    return {
      statement,
      resolve: async (result, retried) => {
        let changed: Set<string> | null = null;
        if (retried || result.affected < members.length) {
          const ids = members.map((m) => m.id);
          try {
            // No longer than the UPDATE of the same ids, which fit the statement limit.
            const { rows } = await withStoreRetry(() => this.target.store.execute(this.target.sql.completedUnder(ids, token)), { ...STORE_RETRY.settle, onRetry: this.onRetry });
            changed = new Set(rows.map((row) => keyOf(row.id)));
          } catch (error) {
            for (const m of members) m.failed(error);
            return;
          }
        }
        for (const m of members) m.settled(changed === null || changed.has(keyOf(m.id)));
      },
    };
  }
}

/** The results a group of completions stores, or undefined when none stores one (the column is then left alone). */
function resultsOf(members: readonly SettleRequest[]): Array<string | null> | undefined {
  return members.some((m) => m.completes) ? members.map((m) => m.completes ?? null) : undefined;
}

/** One settle waiting for its commit. */
export interface SettleRequest {
  /**
   * For a completion, the result it stores (null: none); undefined for any other outcome. A completion may
   * share one UPDATE with the others of its commit claimed under the same token, and its own statement is
   * then never built (in a busy worker nearly every completion joins a group, and building a statement per
   * job was a measurable share of its cost).
   */
  readonly completes: string | null | undefined;
  readonly id: JobId;
  readonly token: string | null;
  /** The settle's own guarded UPDATE; one that throws fails this request alone. */
  statement(): Statement;
  /** Committed: whether its guarded UPDATE changed its row. Neither callback may throw: the commit loop calls them. */
  settled(applied: boolean): void;
  /** Not committed (or, for a group, not known which rows changed). */
  failed(error: unknown): void;
}

interface SettleStep {
  statement: Statement;
  /**
   * `retried`: the commit needed more than one attempt. A completion then asks the database which rows are
   * done under its token. Any other single settle (abuse, giveUp, retry) still goes by the last attempt's
   * count: after a lost connection that had in fact committed it reports the claim lost (the row itself is
   * right).
   */
  resolve: (result: ExecResult, retried: boolean) => void | Promise<void>;
}
