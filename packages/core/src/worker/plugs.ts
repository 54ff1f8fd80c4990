/**
 * Which module fills each of the worker loop's seams (seams.ts), chosen from the worker's options. A feature
 * that plugs into the loop (a limit, a source of claims, a step after settles) adds its module and its line
 * here; worker.ts does not change.
 */
import type { Queue } from '../queue/queue.js';
import { RateBudgetGate, RateLimiter, kindBudgetKey, parseRateLimit, validateRateLimit, type RateLimit } from '../limits/rate-budget.js';
import { BrokerClaims } from './broker-claims.js';
import { ProgressWriter } from './progress-writer.js';
import { ReadOnlyWait } from './read-only-wait.js';
import type { ClaimGate } from '../limits/claim-gate.js';
import type { ProgressSink } from './job-run.js';
import type { ClaimSource, RefusedWrites, SettleStep } from './seams.js';
import { TableClaims } from './table-claims.js';
import { KindConcurrency } from '../limits/kind-concurrency.js';
import { KindLimitedClaims, type LimitedKind, type TokenClaims } from './kind-limited-claims.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import { GroupLimits } from '../limits/group-limits.js';
import { GroupLimitedClaims } from './group-limited-claims.js';
import { HeldBackWait } from './held-back-wait.js';
import type { WorkerEvents } from './events.js';
import type { WorkerOptions, WorkerSettings } from './worker-options.js';
import { WorkerTracing } from './tracing.js';

/** Every seam, filled for one worker. */
export interface WorkerPlugs {
  source: ClaimSource;
  /** Null: every claim takes what the free slots allow. */
  gate: ClaimGate | null;
  afterSettle: readonly SettleStep[];
  progress: ProgressSink;
  refusedWrites: RefusedWrites;
  /** Null: `@opentelemetry/api` is not installed, and nothing is traced. */
  tracing: WorkerTracing | null;
}

/** What a plug may tell the worker. */
export interface PlugHooks {
  emit<E extends 'error' | 'read-only' | 'writable' | 'trace-context-ignored'>(event: E, payload: WorkerEvents[E]): void;
  /** Ends the run with `error` (running jobs drain first). */
  fatal(error: unknown): void;
}

/** The rate limit option, checked before anything is touched (bad input makes no budget table). */
export function rateLimitOption(options: WorkerOptions): RateLimit | null {
  const rate = options.rateLimit;
  return rate === undefined ? null : typeof rate === 'string' ? parseRateLimit(rate, 'rateLimit') : validateRateLimit(rate);
}

/** A limited kind's claims under its concurrency's lock (KindConcurrency), retried as every claim is. */
function underKindLock(concurrency: KindConcurrency, kind: string, claimer: string, retrying: (error: unknown) => void): TokenClaims {
  return {
    async claimWith(limit, token) {
      const { rows, heldBack } = await withStoreRetry(() => concurrency.claim(kind, limit, token, claimer), { ...STORE_RETRY.claim, onRetry: retrying });
      return { rows, token, candidatesLost: 0, heldBack };
    },
  };
}

/** Opens the plugs `options` ask for; `rate` is rateLimitOption's answer. */
export async function openPlugs(queue: Queue, options: WorkerOptions, settings: WorkerSettings, rate: RateLimit | null, hooks: PlugHooks): Promise<WorkerPlugs> {
  let claimSequence = 0;
  const nextToken = () => `${settings.workerId}:${++claimSequence}`;
  const afterSettle: SettleStep[] = [];
  let source: ClaimSource;
  if (options.from) {
    const broker = new BrokerClaims(queue, options.from, settings.prefetch, nextToken, {
      error: (error, during) => hooks.emit('error', { error, during }),
      lost: (error) => hooks.fatal(error),
    });
    source = broker;
    afterSettle.push(broker);
  } else {
    const retrying = (error: unknown) => hooks.emit('error', { error, during: 'claim (retrying)' });
    const how = { strategy: settings.claimStrategy, agingMs: options.agingMs };
    const fencing = queue.table.features.fencing;
    const heldBack = new HeldBackWait(settings);
    const groups = settings.groupLimits === null ? null : await GroupLimits.open(queue.store, queue.table, settings.groupLimits);
    // The claim of rows no kind limit holds: the usual one, or the one under the table's group limits.
    const plain = (of: Queue) => (groups === null ? new TableClaims(of, how, nextToken, retrying) : new GroupLimitedClaims(groups, of.table, fencing, nextToken, settings.workerId, retrying, heldBack));
    const limitedKinds = [...new Set([...settings.kindLimits.keys(), ...settings.kindRates.keys()])].sort();
    if (limitedKinds.length === 0) source = plain(queue);
    else {
      const others = (settings.routes.kinds ?? []).filter((kind) => !limitedKinds.includes(kind));
      const concurrency = settings.kindLimits.size === 0 ? null : await KindConcurrency.open(queue.store, queue.table, settings.kindLimits, groups);
      const limited: LimitedKind[] = [];
      for (const kind of limitedKinds) {
        const rate = settings.kindRates.get(kind);
        const ofKind = queue.forKinds([kind]);
        limited.push({
          kind,
          claims: concurrency?.has(kind) ? underKindLock(concurrency, kind, settings.workerId, retrying) : plain(ofKind),
          rate: rate === undefined ? null : await RateLimiter.open(queue.store, queue.table.table, rate, kindBudgetKey(queue.table.table, kind)),
          hasDueRow: () => ofKind.hasDueRow(),
        });
      }
      source = new KindLimitedClaims(limited, others.length === 0 ? null : plain(queue.forKinds(others)), fencing, nextToken, heldBack, (error) => hooks.emit('error', { error, during: 'rate limit' }));
    }
  }
  const tracing = await WorkerTracing.open(queue.table, settings.workerId, { ignored: (job, reason) => hooks.emit('trace-context-ignored', { job, reason }) });
  if (tracing !== null) source = tracing.claims(source);
  const limiter = rate === null ? null : await RateLimiter.open(queue.store, queue.table.table, rate);
  const gate = limiter && new RateBudgetGate(limiter, () => queue.hasDueRow(), (error) => hooks.emit('error', { error, during: 'rate limit' }));
  return {
    source,
    tracing,
    gate,
    afterSettle,
    progress: new ProgressWriter(queue, (error) => hooks.emit('error', { error, during: 'progress' })),
    refusedWrites: new ReadOnlyWait(settings.readOnlyWaitMs, settings.pollMaxMs, settings.random, {
      started: (error, during, waitMs) => hooks.emit('read-only', { error, during, waitMs }),
      ended: (durationMs) => hooks.emit('writable', { durationMs }),
    }),
  };
}
