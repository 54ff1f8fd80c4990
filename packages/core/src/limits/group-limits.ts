/**
 * Limits per group, fleet-wide (`--group-concurrency 1`, `--group-rate 2/s`): a group is the value of a row's
 * group column (a URL's host, a tenant). At most N rows of a group processing at once across every worker, process
 * and host (1: the group runs serially, in queue order), and at most so many starts of a group per second (a
 * cell rate per group: per-host politeness). Rows without a group are not limited.
 *
 * Each claim is one short transaction under one lock per table (the UPDATE of the table's group row of the
 * kind-limits table): count the processing rows per group (the group index holds only those), read the pacing of
 * recently started groups, then read due rows page by page, skipping in SQL the groups already at their limit and
 * taking from each page only what each group may still start; the pacing of the groups started is written before
 * the commit. Whoever holds the lock counts what the one before it committed, so two claimers never together go
 * over a limit, and no counter can drift: the count is the table's own processing rows (a dead worker's rows count
 * until their lease brings them back). A busy group does not starve the others: its rows are skipped, and the
 * page goes on to the next groups in queue order.
 *
 * The cost: claims under group limits run one at a time per table, fleet-wide, and each reads the processing rows
 * (bounded by the fleet's slots) and one page of candidates per round (docs/benchmarks.md, "Claims under group
 * limits"). Aging does not apply to these claims: the queue order is the only order.
 */
import { ConfigError, StoreError } from '../protocol/errors.js';
import type { ResolvedTable } from '../protocol/table.js';
import { DatabaseClock } from '../store/database-clock.js';
import { claimInOpenTransaction, type CandidatePicker } from '../sql/claim.js';
import { GROUP_RATE_COLUMNS, KIND_LIMIT_COLUMNS, ensureSideTable, insertSideRow, lockLimitRow } from '../sql/side-tables.js';
import { Params, TransitionSql } from '../sql/transition-sql.js';
import type { ClaimRequest, Row, SqlValue, StatementRunner, Store } from '../store/store.js';
import { cadenceOf, parseRateLimit, spendBudget, validateRateLimit, type Cadence, type RateLimit } from './rate-budget.js';

/** The most a group's concurrency may be: a cap above any fleet's slots means no cap. */
export const MAX_GROUP_CONCURRENCY = 100_000;

/**
 * The key of a table's group lock in the kind-limits table: `#` is outside the alphabet of kinds (validateKind),
 * so no kind's row can be it.
 */
const GROUP_LOCK_KEY = '#groups';

/** The column a candidate carries its group in; not a column of the table. */
const CANDIDATE_GROUP = 'statusq_group';

/** Group values skipped in the candidate SQL at most; more are skipped as the page is picked (correct, just wider pages). */
const MAX_SKIPPED_IN_SQL = 500;

/** How often the database's clock is read again for pacing. */
const CLOCK_SYNC_MS = 60_000;

/** What a worker's group limits are: either may be absent. */
export interface GroupLimitOptions {
  /** At most this many rows of a group processing at once (1: serial). */
  concurrency?: number | undefined;
  /** At most this many starts of a group per period. */
  rate?: RateLimit | string | undefined;
}

/** The checked options; null when neither limit is set. */
export function resolveGroupLimits(options: GroupLimitOptions): { concurrency: number | null; rate: RateLimit | null } | null {
  const { concurrency, rate } = options;
  if (concurrency === undefined && rate === undefined) return null;
  if (concurrency !== undefined && (typeof concurrency !== 'number' || !Number.isSafeInteger(concurrency) || concurrency < 1 || concurrency > MAX_GROUP_CONCURRENCY)) {
    throw new ConfigError(`groupConcurrency must be a whole number from 1 to ${MAX_GROUP_CONCURRENCY} (1: each group runs serially), got ${JSON.stringify(concurrency)}`);
  }
  return { concurrency: concurrency ?? null, rate: rate === undefined ? null : typeof rate === 'string' ? parseRateLimit(rate, 'groupRate') : validateRateLimit(rate) };
}

/** A group's pacing as stored: epoch milliseconds as zero-padded text, so that text order is time order on every database. */
const storedTime = (ms: number) => String(Math.max(0, Math.ceil(ms))).padStart(15, '0');

/** What one claim under the group limits found, beside the rows it took. */
export interface GroupClaim {
  rows: Row[];
  /** Due rows were skipped because their groups were at a limit: there is work, just not now. */
  skipped: boolean;
  /** With `skipped` and pacing: how long until the soonest paced group may start again (null: no pacing wait known). */
  pacedForMs: number | null;
}

/** One table's group limits, as every worker of it claims under them. */
export class GroupLimits {
  private locks = 0;
  private clockSyncedAt = 0;
  private readonly clock: DatabaseClock;
  private readonly cadence: Cadence | null;
  private readonly sql: TransitionSql;
  private readonly lockTable: string;

  private constructor(
    private readonly store: Store,
    private readonly table: ResolvedTable,
    private readonly concurrency: number | null,
    rate: RateLimit | null,
    lockTable: string,
    private readonly ratesTable: string | null,
  ) {
    this.clock = new DatabaseClock(store);
    this.cadence = rate === null ? null : cadenceOf(rate);
    this.sql = new TransitionSql(table, store.dialect);
    this.lockTable = lockTable;
  }

  /** Makes the lock row (and, with a rate, the pacing table) if missing. */
  static async open(store: Store, table: ResolvedTable, limits: { concurrency: number | null; rate: RateLimit | null }): Promise<GroupLimits> {
    if (!table.features.groups) {
      throw new ConfigError(`table ${table.table} has no group column, which group limits need (statusq migrate --with groups adds group_key; an application's own column: columns.group, --group-column)`);
    }
    if (!store.transaction) throw new ConfigError(`the ${store.dialect.name} store has no transactions, which a group limit needs (its count and its claim are one)`);
    const lockTable = await ensureSideTable(store, table.table, 'statusq_kind_limits');
    await insertSideRow(store, lockTable, { [KIND_LIMIT_COLUMNS.queueTable]: table.table, [KIND_LIMIT_COLUMNS.kind]: GROUP_LOCK_KEY });
    const ratesTable = limits.rate === null ? null : await ensureSideTable(store, table.table, 'statusq_group_rates');
    return new GroupLimits(store, table, limits.concurrency, limits.rate, lockTable, ratesTable);
  }

  /** A claim of up to `wanted` rows of `view` (the table, or the kinds a worker handles) in its own transaction. */
  async claim(view: ResolvedTable, wanted: number, token: string | null, claimer: string): Promise<GroupClaim> {
    await this.beforeClaim();
    return this.store.transaction!(async (tx) => {
      await this.takeLock(tx, claimer);
      return this.claimLocked(tx, view, { limit: wanted, token });
    });
  }

  /**
   * Takes the table's group lock in `tx`. Before anything is read in that transaction: on a store whose
   * transactions read from a snapshot taken at their first read, a read before the lock would not see what the
   * holder before committed.
   */
  async takeLock(tx: StatementRunner, claimer: string): Promise<void> {
    const row = { queueTable: this.table.table, kind: GROUP_LOCK_KEY };
    await lockLimitRow(tx, this.store.dialect, this.lockTable, row, `${claimer}:${++this.locks}`, () => new StoreError('Unknown', `the group-limit row of ${this.table.table} in ${this.lockTable} is gone (dropped while workers ran?)`, 'GROUP_LIMIT_ROW'));
  }

  /** The claim, in `tx` under the lock (takeLock): counts, paces, picks and claims. */
  async claimLocked(tx: StatementRunner, view: ResolvedTable, request: ClaimRequest): Promise<GroupClaim> {
    const running = this.concurrency === null ? new Map<string, { value: SqlValue; n: number }>() : await this.runningByGroup(tx);
    const paced = this.ratesTable === null ? new Map<string, number>() : await this.pacing(tx);
    const now = this.clock.now();
    const state = new PickState(this.concurrency, this.cadence, running, paced, now);
    const picker: CandidatePicker = {
      groupAlias: CANDIDATE_GROUP,
      where: (p) => this.sql.outsideGroups(p, state.skippedValues(MAX_SKIPPED_IN_SQL)),
      pick: (candidates) => candidates.filter((row) => state.take(row[CANDIDATE_GROUP] as SqlValue)),
      lost: (candidate) => state.giveBack(candidate[CANDIDATE_GROUP] as SqlValue),
    };
    const rows = await claimInOpenTransaction(tx, this.store, view, request, picker);
    if (this.ratesTable !== null) await this.writePacing(tx, state, now);
    return { rows, skipped: state.skippedAny, pacedForMs: state.pacedForMs() };
  }

  private async runningByGroup(tx: StatementRunner): Promise<Map<string, { value: SqlValue; n: number }>> {
    const { rows } = await tx.execute(this.sql.processingByGroup(CANDIDATE_GROUP));
    return new Map(rows.map((row) => [groupKey(row[CANDIDATE_GROUP] as SqlValue), { value: row[CANDIDATE_GROUP] as SqlValue, n: Number(row.n) }]));
  }

  /** The groups started recently enough that their pacing still holds them back, by group. */
  private async pacing(tx: StatementRunner): Promise<Map<string, number>> {
    const d = this.store.dialect;
    const p = new Params(d);
    const q = (name: string) => d.quoteIdentifier(name);
    const { rows } = await tx.execute({ sql: `SELECT ${q(GROUP_RATE_COLUMNS.group)} AS g, ${q(GROUP_RATE_COLUMNS.tat)} AS tat FROM ${q(this.ratesTable!)} WHERE ${q(GROUP_RATE_COLUMNS.queueTable)} = ${p.add(this.table.table)}`, params: p.values });
    return new Map(rows.map((row) => [String(row.g), Number(row.tat)]));
  }

  /**
   * Writes the pacing of every group this claim started, and forgets groups whose pacing no longer holds them
   * back (an idle group's budget is full, as for a group never seen): the table holds only recently started groups.
   */
  private async writePacing(tx: StatementRunner, state: PickState, now: number): Promise<void> {
    const d = this.store.dialect;
    const q = (name: string) => d.quoteIdentifier(name);
    const table = q(this.ratesTable!);
    const owner = `${q(GROUP_RATE_COLUMNS.queueTable)} = `;
    for (const [group, tat] of state.newPacing()) {
      const p = new Params(d);
      const update = `UPDATE ${table} SET ${q(GROUP_RATE_COLUMNS.tat)} = ${p.add(storedTime(tat))} WHERE ${owner}${p.add(this.table.table)} AND ${q(GROUP_RATE_COLUMNS.group)} = ${p.add(group)}`;
      if ((await tx.execute({ sql: update, params: p.values })).affected === 1) continue;
      // Under the lock nobody else writes this table's pacing, so the row is not there and the INSERT is the only one.
      const insert = new Params(d);
      const columns = [GROUP_RATE_COLUMNS.queueTable, GROUP_RATE_COLUMNS.group, GROUP_RATE_COLUMNS.tat];
      await tx.execute({ sql: `INSERT INTO ${table} (${columns.map(q).join(', ')}) VALUES (${[this.table.table, group, storedTime(tat)].map((v) => insert.add(v)).join(', ')})`, params: insert.values });
    }
    const p = new Params(d);
    const idle = now - this.cadence!.burst * this.cadence!.intervalMs;
    await tx.execute({ sql: `DELETE FROM ${table} WHERE ${owner}${p.add(this.table.table)} AND ${q(GROUP_RATE_COLUMNS.tat)} < ${p.add(storedTime(idle))}`, params: p.values });
  }

  /** Before the transaction of a claim that calls claimLocked: reads the database's clock when it is due (not inside a transaction, which a store may hold its only connection for). */
  async beforeClaim(): Promise<void> {
    if (this.cadence === null) return;
    if (this.clockSyncedAt !== 0 && Date.now() - this.clockSyncedAt < CLOCK_SYNC_MS) return;
    if (await this.clock.sync()) this.clockSyncedAt = Date.now();
  }
}

/** A group's key in the maps of one claim: the column holds one type, so its values' text tells them apart. */
const groupKey = (group: SqlValue): string => String(group);

/**
 * What each group may still start in this claim, as the pages are picked: its concurrency left (the limit minus
 * its processing rows) and its pacing's grant, less what this claim already took of it.
 */
class PickState {
  private readonly taken = new Map<string, { value: SqlValue; n: number }>();
  private readonly skipped = new Map<string, SqlValue>();
  skippedAny = false;

  constructor(
    private readonly concurrency: number | null,
    private readonly cadence: Cadence | null,
    private readonly running: ReadonlyMap<string, { value: SqlValue; n: number }>,
    private readonly paced: ReadonlyMap<string, number>,
    private readonly now: number,
  ) {
    // Groups known to have no room before any page is read are skipped in the first page's SQL already.
    for (const { value } of running.values()) if (this.room(groupKey(value)) <= 0) this.skipped.set(groupKey(value), value);
    for (const key of paced.keys()) if (this.room(key) <= 0) this.skipped.set(key, key);
  }

  /** Whether a candidate of `group` may be claimed; counts it when so. A group found full is skipped from then on. */
  take(group: SqlValue): boolean {
    if (group === null || group === undefined) return true;
    const key = groupKey(group);
    const taken = this.taken.get(key)?.n ?? 0;
    const room = this.room(key);
    if (taken >= room) {
      this.skip(key, group);
      return false;
    }
    this.taken.set(key, { value: group, n: taken + 1 });
    if (taken + 1 >= room) this.skip(key, group);
    return true;
  }

  /** A taken candidate that another claimer had: its place is free again. */
  giveBack(group: SqlValue): void {
    if (group === null || group === undefined) return;
    const entry = this.taken.get(groupKey(group));
    if (entry) entry.n--;
  }

  /** The values of the groups to skip, for the next page's SQL. */
  skippedValues(most: number): SqlValue[] {
    return [...this.skipped.values()].slice(0, most);
  }

  /** Each group this claim started, with its pacing after the starts. */
  newPacing(): Array<[group: string, tat: number]> {
    return [...this.taken.entries()].filter(([, { n }]) => n > 0).map(([key, { n }]) => [key, spendBudget(this.pacedAt(key), this.now, this.cadence!, n).tat]);
  }

  /** How long until the soonest group held back by its pacing may start again; null when no group is. */
  pacedForMs(): number | null {
    if (this.cadence === null) return null;
    const waits = [...this.skipped.keys()].map((key) => spendBudget(this.pacedAt(key), this.now, this.cadence!, 1)).filter((grant) => grant.tokens === 0);
    return waits.length === 0 ? null : Math.min(...waits.map((grant) => grant.waitMs));
  }

  private room(key: string): number {
    const byCount = this.concurrency === null ? Number.POSITIVE_INFINITY : this.concurrency - (this.running.get(key)?.n ?? 0);
    const byPace = this.cadence === null ? Number.POSITIVE_INFINITY : spendBudget(this.pacedAt(key), this.now, this.cadence, Number.MAX_SAFE_INTEGER).tokens;
    return Math.min(byCount, byPace);
  }

  private pacedAt(key: string): number | null {
    return this.paced.get(key) ?? null;
  }

  private skip(key: string, group: SqlValue): void {
    this.skippedAny = true;
    this.skipped.set(key, group);
  }
}
