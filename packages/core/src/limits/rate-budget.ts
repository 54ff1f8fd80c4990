/**
 * A rate limit on the jobs a table's workers start, shared by every process and host (`work --rate 50/s`): the
 * external services handlers call have limits of their own, and one per process would multiply with the process
 * count. The budget is one row of the rate-limits table, a generic cell rate (GCRA) kept as its theoretical
 * arrival time `tat`: the instant, on the database's clock, from which the next job may start. Taking k starts
 * moves it k intervals on by a compare-and-swap UPDATE (`... WHERE tat = <what was read>`, affected rows = 1),
 * the guarded write every other transition uses, so two workers never spend the same budget. The arithmetic
 * runs here rather than in SQL, so it is the same on every dialect; `tat` is stored as the decimal text of
 * epoch milliseconds, which compares exactly.
 *
 * A worker with nothing granted sleeps until the next start is due rather than asking again: no polling while
 * the budget is spent. Tokens a claim did not use (it found fewer rows) are given back by moving `tat` back.
 */
import { DatabaseClock } from '../store/database-clock.js';
import { ConfigError, StoreError } from '../protocol/errors.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import { RATE_LIMIT_COLUMNS, ensureSideTable, insertSideRow } from '../sql/side-tables.js';
import type { Store } from '../store/store.js';
import type { ClaimGate } from './claim-gate.js';
import { Params } from '../sql/transition-sql.js';

/** At most `count` job starts per `periodMs`, across every worker of the table. */
export interface RateLimit {
  count: number;
  periodMs: number;
}

const PERIODS: Readonly<Record<string, number>> = { s: 1_000, m: 60_000, h: 3_600_000 };
/** The most starts a budget may grant at once after an idle spell: a tenth of a second's worth (at least one). */
const BURST_WINDOW_MS = 100;
/** Compare-and-swap tries per take before it reports nothing granted (and the worker waits an interval). */
const MAX_SWAPS = 20;
/** How often the database's clock is read again. */
const CLOCK_SYNC_MS = 60_000;

/** `50/s`, `300/m`, `1000/h` as a RateLimit; anything else is a ConfigError. */
export function parseRateLimit(text: string, what = 'rate'): RateLimit {
  const match = /^\s*(\d+)\s*\/\s*([smh])\s*$/.exec(String(text));
  const count = match ? Number(match[1]) : Number.NaN;
  if (!match || !Number.isSafeInteger(count) || count < 1 || count > 1_000_000) throw new ConfigError(`${what} must be a number of jobs from 1 to 1000000 per s, m or h (50/s, 300/m, 1000/h), got ${JSON.stringify(text)}`);
  return { count, periodMs: PERIODS[match[2]!]! };
}

export function validateRateLimit(rate: unknown): RateLimit {
  const r = rate as RateLimit;
  if (r === null || typeof r !== 'object' || !Number.isSafeInteger(r.count) || r.count < 1 || r.count > 1_000_000 || !Number.isSafeInteger(r.periodMs) || r.periodMs < 1 || r.periodMs > 86_400_000) {
    throw new ConfigError(`rateLimit must be { count: 1 to 1000000, periodMs: 1 to 86400000 }, got ${JSON.stringify(rate)}`);
  }
  return { count: r.count, periodMs: r.periodMs };
}

export interface Grant {
  /** Job starts granted now, 0 to what was asked. */
  tokens: number;
  /** With none granted: how long until the next start is due. */
  waitMs: number;
}

/** A rate as the cell-rate arithmetic uses it: the spacing of starts, and how many an idle budget holds. */
export interface Cadence {
  intervalMs: number;
  burst: number;
}

export function cadenceOf(rate: RateLimit): Cadence {
  const intervalMs = rate.periodMs / rate.count;
  return { intervalMs, burst: Math.max(1, Math.floor(BURST_WINDOW_MS / intervalMs)) };
}

/**
 * The cell-rate (GCRA) step, the same for the table's budget and each group's: up to `wanted` starts at `now`
 * from a budget whose theoretical arrival time is `tat` (null: never spent), and the `tat` that spends them. A
 * budget idle for long holds at most `burst` starts. A spend never moves `tat` past now, so one far ahead was
 * written on a clock that was wrong (a failed clock read): it would stall every worker, and is read as now.
 */
export function spendBudget(tat: number | null, now: number, cadence: Cadence, wanted: number): Grant & { tat: number } {
  const { intervalMs, burst } = cadence;
  const sane = tat === null ? now - burst * intervalMs : tat > now + Math.max(1_000, intervalMs) ? now : tat;
  const base = Math.max(sane, now - burst * intervalMs);
  const available = Math.floor((now - base) / intervalMs + 1e-9);
  const tokens = Math.max(0, Math.min(wanted, available));
  return tokens > 0 ? { tokens, waitMs: 0, tat: base + tokens * intervalMs } : { tokens: 0, waitMs: Math.max(1, Math.ceil(base + intervalMs - now)), tat: base };
}

/**
 * The key of a kind's budget (`--kind-rate email=50/s`) in the rate-limits table, beside the table's own: `#` is
 * in no table name (identifiers are validated) and in no kind, so no two budgets share a key.
 */
export function kindBudgetKey(queueTable: string, kind: string): string {
  return `${queueTable}#kind:${kind}`;
}

/** One worker's view of a shared budget: its table's, or one kind's of it. */
export class RateLimiter {
  private readonly cadence: Cadence;
  private readonly clock: DatabaseClock;
  private clockSyncedAt = 0;

  private constructor(
    private readonly store: Store,
    private readonly limits: string,
    /** The budget's key: the queue table's name, or a kind's budget of it (kindBudgetKey). */
    private readonly budget: string,
    rate: RateLimit,
  ) {
    this.cadence = cadenceOf(rate);
    this.clock = new DatabaseClock(store);
  }

  /** Makes the rate-limits table and the table's row if missing (a new budget grants its burst at once). */
  static async open(store: Store, queueTable: string, rate: RateLimit, budget = queueTable): Promise<RateLimiter> {
    const checked = validateRateLimit(rate);
    const limiter = new RateLimiter(store, await ensureSideTable(store, queueTable, 'statusq_rate_limits'), budget, checked);
    await limiter.ensureRow();
    return limiter;
  }

  /** Takes up to `wanted` starts from the budget. */
  async take(wanted: number): Promise<Grant> {
    await this.syncClockEvery();
    for (let swap = 0; swap < MAX_SWAPS; swap++) {
      const read = await this.read();
      const grant = spendBudget(read.tat, this.clock.now(), this.cadence, wanted);
      if (grant.tokens <= 0) return { tokens: 0, waitMs: grant.waitMs };
      if (await this.swap(read.text, grant.tat)) return { tokens: grant.tokens, waitMs: 0 };
    }
    return { tokens: 0, waitMs: Math.max(1, Math.ceil(this.cadence.intervalMs)) };
  }

  /** Gives back starts taken but not used; best effort (a lost swap leaves them spent, which errs below the limit). */
  async giveBack(tokens: number): Promise<void> {
    if (tokens <= 0) return;
    for (let swap = 0; swap < 3; swap++) {
      const read = await this.read();
      // Not below now minus the burst: what an idle budget holds anyway.
      const { intervalMs, burst } = this.cadence;
      const back = Math.max(read.tat - tokens * intervalMs, this.clock.now() - burst * intervalMs);
      if (back >= read.tat || (await this.swap(read.text, back))) return;
    }
  }

  private where(p: Params): string {
    return `${this.q(RATE_LIMIT_COLUMNS.queueTable)} = ${p.add(this.budget)}`;
  }

  private q(name: string): string {
    return this.store.dialect.quoteIdentifier(name);
  }

  private async read(): Promise<{ text: string; tat: number }> {
    const select = async () => {
      const p = new Params(this.store.dialect);
      return (await withStoreRetry(() => this.store.execute({ sql: `SELECT ${this.q(RATE_LIMIT_COLUMNS.tat)} AS tat FROM ${this.q(this.limits)} WHERE ${this.where(p)}`, params: p.values }), STORE_RETRY.claim)).rows;
    };
    let rows = await select();
    // Deleted by an operator (to start the budget afresh): made again, as the first worker made it.
    if (rows.length === 0) {
      await this.ensureRow();
      rows = await select();
    }
    const text = rows[0]?.tat;
    const tat = typeof text === 'string' ? Number(text) : Number.NaN;
    if (typeof text !== 'string' || !Number.isFinite(tat)) {
      throw new StoreError('Unknown', `${this.limits} holds ${JSON.stringify(text ?? null)} as the rate budget of ${this.budget}, which is not a time; delete that row to start the budget afresh`);
    }
    return { text, tat };
  }

  private async swap(expected: string, tat: number): Promise<boolean> {
    const p = new Params(this.store.dialect);
    const set = `${this.q(RATE_LIMIT_COLUMNS.tat)} = ${p.add(String(tat))}`;
    const { affected } = await this.store.execute({ sql: `UPDATE ${this.q(this.limits)} SET ${set} WHERE ${this.where(p)} AND ${this.q(RATE_LIMIT_COLUMNS.tat)} = ${p.add(expected)}`, params: p.values });
    return affected === 1;
  }

  private async ensureRow(): Promise<void> {
    await this.syncClockEvery();
    const p = new Params(this.store.dialect);
    const { rows } = await this.store.execute({ sql: `SELECT 1 AS present FROM ${this.q(this.limits)} WHERE ${this.where(p)}`, params: p.values });
    if (rows.length > 0) return;
    await insertSideRow(this.store, this.limits, { [RATE_LIMIT_COLUMNS.queueTable]: this.budget, [RATE_LIMIT_COLUMNS.tat]: String(this.clock.now() - this.cadence.burst * this.cadence.intervalMs) });
  }

  /** Reads the database's clock every CLOCK_SYNC_MS, and at every take until a read has succeeded. */
  private async syncClockEvery(): Promise<void> {
    if (this.clockSyncedAt !== 0 && Date.now() - this.clockSyncedAt < CLOCK_SYNC_MS) return;
    if (await this.clock.sync()) this.clockSyncedAt = Date.now();
  }
}

/**
 * The budget as the worker's claim gate: a claim takes at most the starts granted, and gives back what it did not
 * use. An idle worker first asks with a read whether a row is due: taking budget is a write, and on a store whose
 * `listenNotify` is a watch on the database file every write wakes every idle worker's watch.
 */
export class RateBudgetGate implements ClaimGate {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly hasDueRow: () => Promise<boolean>,
    private readonly giveBackFailed: (error: unknown) => void,
  ) {}

  async admit(wanted: number, idle: boolean, wait: (ms: number) => Promise<void>): Promise<number | null> {
    if (idle && !(await this.hasDueRow())) return 0;
    const grant = await this.limiter.take(wanted);
    if (grant.tokens > 0) return grant.tokens;
    await wait(grant.waitMs);
    return null;
  }

  async claimed(admitted: number, claimed: number): Promise<void> {
    if (claimed < admitted) await this.limiter.giveBack(admitted - claimed).catch(this.giveBackFailed);
  }
}

