/**
 * At most N rows of a kind processing at once across every worker, process and host (`--kind-concurrency
 * report=2`): a report that loads the database, an API that takes two calls at a time. Nothing is counted in
 * memory or in a counter that a crash could leave wrong: the limit is the table's own processing rows of that
 * kind, counted under a lock every claimer of the kind takes first. Each claim of a limited kind is one short
 * transaction: UPDATE the kind's row of the kind-limits table (the lock: that row's lock, or the whole database's
 * write lock on a store that has only that), COUNT its processing rows, claim at most N minus that,
 * commit. Two claimers of the kind therefore take turns, and the second counts what the first committed. A row
 * a dead worker left processing counts until its lease brings it back, which is what "at most N at once" means
 * for a job that may still be running.
 *
 * The cost is that claims of one limited kind run one at a time, fleet-wide; claims of other kinds do not wait.
 */
import { ConfigError, StoreError } from '../protocol/errors.js';
import { scopeToKinds, validateKind, type ResolvedTable } from '../protocol/table.js';
import { claimInOpenTransaction } from '../sql/claim.js';
import { KIND_LIMIT_COLUMNS, ensureSideTable, insertSideRow, lockLimitRow } from '../sql/side-tables.js';
import { TransitionSql } from '../sql/transition-sql.js';
import type { Row, Store } from '../store/store.js';
import type { GroupLimits } from './group-limits.js';
import { parseRateLimit, validateRateLimit, type RateLimit } from './rate-budget.js';

/** The most a kind's limit may be: a cap above any fleet's slots means no cap. */
export const MAX_KIND_CONCURRENCY = 100_000;

/** A kind's concurrency limit, checked: a whole number from 1 to MAX_KIND_CONCURRENCY (as a number, or its digits in a flag). */
function kindConcurrencyOf(value: unknown, what: string): number {
  const limit = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > MAX_KIND_CONCURRENCY) {
    throw new ConfigError(`${what} must be a whole number from 1 to ${MAX_KIND_CONCURRENCY}, got ${JSON.stringify(value)}`);
  }
  return limit;
}

/**
 * `report=2,email=5` (or a record) as a checked map of kind limits; anything else is a ConfigError saying the
 * form. Each limit is read by `limitOf` (default: a concurrency, a whole number); `form` shows one in messages.
 */
export function parseKindLimits(value: string | Readonly<Record<string, unknown>>, what: string): Map<string, number>;
export function parseKindLimits<T>(value: string | Readonly<Record<string, unknown>>, what: string, limitOf: (value: unknown, what: string) => T, form: string): Map<string, T>;
export function parseKindLimits(value: string | Readonly<Record<string, unknown>>, what: string, limitOf: (value: unknown, what: string) => unknown = kindConcurrencyOf, form = 'report=2,email=5'): Map<string, unknown> {
  const entries: Array<[string, unknown]> =
    typeof value === 'string'
      ? value.split(',').map((part) => {
          const match = /^\s*([^=\s]+)\s*=\s*(\S+)\s*$/.exec(part);
          if (!match) throw new ConfigError(`${what} takes kind=limit pairs separated by commas (${form}), got ${JSON.stringify(value)}`);
          return [match[1]!, match[2]!];
        })
      : value !== null && typeof value === 'object' && !Array.isArray(value)
        ? Object.entries(value)
        : (() => {
            throw new ConfigError(`${what} must be an object of kind limits ({ ${form.split(',')[0]!.replace('=', ': ')} }), got ${JSON.stringify(value)}`);
          })();
  const limits = new Map<string, unknown>();
  for (const [kind, limit] of entries) {
    validateKind(kind, `${what}: a kind`);
    if (limits.has(kind)) throw new ConfigError(`${what} names ${kind} twice`);
    limits.set(kind, limitOf(limit, `${what}: ${kind}'s limit`));
  }
  if (limits.size === 0) throw new ConfigError(`${what} names no kind`);
  return limits;
}

/** `email=50/s,report=1/m` (or a record of rates) as a checked map of per-kind rates (kindRate). */
export function parseKindRates(value: string | Readonly<Record<string, unknown>>, what: string): Map<string, RateLimit> {
  return parseKindLimits(value, what, (rate, where) => (typeof rate === 'string' ? parseRateLimit(rate, where) : validateRateLimit(rate)), 'email=50/s,report=1/m');
}

/** The fleet-wide limits of one table's kinds, as one worker claims under them. */
export class KindConcurrency {
  /** Makes each lock's write a change: a server that counts changed rows, not matched ones, reports 0 for a write of the same value. */
  private locks = 0;

  /** Each limited kind's limit and its view of the table, made once: every claim round of the worker uses them. */
  private readonly byKind: ReadonlyMap<string, { limit: number; view: ResolvedTable; sql: TransitionSql }>;

  private constructor(
    private readonly store: Store,
    private readonly limitsTable: string,
    private readonly table: ResolvedTable,
    limits: ReadonlyMap<string, number>,
    /** The table's group limits, which a limited kind's claim keeps too (its lock taken after the kind's). */
    private readonly groups: GroupLimits | null,
  ) {
    this.byKind = new Map([...limits].map(([kind, limit]) => {
      const view = scopeToKinds(table, [kind]);
      return [kind, { limit, view, sql: new TransitionSql(view, store.dialect) }];
    }));
  }

  /** Makes the kind-limits table and each limited kind's row if missing. A kind no row has yet is accepted: it may come. */
  static async open(store: Store, table: ResolvedTable, limits: ReadonlyMap<string, number>, groups: GroupLimits | null = null): Promise<KindConcurrency> {
    if (!store.transaction) throw new ConfigError(`the ${store.dialect.name} store has no transactions, which a kind's limit needs (its count and its claim are one)`);
    const limitsTable = await ensureSideTable(store, table.table, 'statusq_kind_limits');
    for (const kind of limits.keys()) await insertSideRow(store, limitsTable, { [KIND_LIMIT_COLUMNS.queueTable]: table.table, [KIND_LIMIT_COLUMNS.kind]: kind });
    return new KindConcurrency(store, limitsTable, table, limits, groups);
  }

  has(kind: string): boolean {
    return this.byKind.has(kind);
  }

  get kinds(): string[] {
    return [...this.byKind.keys()];
  }

  /**
   * Claims up to `wanted` due rows of `kind`, never so many that more than its limit are processing at once
   * (counted in the same transaction, under the kind's lock); none when nothing is due, or with `heldBack` when
   * the limit (or a group's) held due rows back.
   */
  async claim(kind: string, wanted: number, token: string | null, claimer: string): Promise<{ rows: Row[]; heldBack: boolean }> {
    const limited = this.byKind.get(kind);
    if (limited === undefined) throw new ConfigError(`kind ${kind} has no limit here`);
    const { limit, view, sql } = limited;
    const claimedBy = `${claimer}:${++this.locks}`;
    await this.groups?.beforeClaim();
    return this.store.transaction!(async (tx) => {
      // The lock first: whoever holds it counts and claims; the others wait here, then count what it committed.
      await lockLimitRow(tx, this.store.dialect, this.limitsTable, { queueTable: this.table.table, kind }, claimedBy, () => new StoreError('Unknown', `the limit row of kind ${kind} in ${this.limitsTable} is gone (dropped while workers ran?)`, 'KIND_LIMIT_ROW'));
      // Every lock before the first read (GroupLimits.takeLock says why), always the kind's first: no two claimers wait on each other in a circle.
      await this.groups?.takeLock(tx, claimer);
      const processing = Number((await tx.execute(sql.countWithStatus(view.codes.processing))).rows[0]?.n ?? 0);
      const allowed = Math.min(wanted, limit - processing);
      if (allowed <= 0) return { rows: [], heldBack: true };
      const request = { limit: allowed, token };
      if (this.groups === null) return { rows: await claimInOpenTransaction(tx, this.store, view, request), heldBack: false };
      const claimed = await this.groups.claimLocked(tx, view, request);
      return { rows: claimed.rows, heldBack: claimed.skipped };
    });
  }
}
