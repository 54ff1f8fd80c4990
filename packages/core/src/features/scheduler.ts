/**
 * Recurring schedules: rows enqueued on cron ticks, exactly one row per tick however many schedulers (worker
 * processes, hosts) run the same schedules. Each tick is claimed the way a job is: a guarded UPDATE of the
 * schedule's row in the schedules table (`last_tick < tick`), in the same transaction as the INSERT of the job
 * row, which selects its values from the row that UPDATE claimed (Queue.enqueueIfClaimed). A scheduler that
 * loses the UPDATE inserts nothing; one that dies before its commit claimed nothing.
 *
 * Why not the deduplication key alone: a key is held only while its row is pending or processing, so a
 * scheduler that woke late, after another's row for the same tick had already run, would enqueue it again.
 * The schedules table remembers every tick, settled or not. Its last tick also bounds what start-up catches
 * up on after everything was down: at most `catchUp` missed ticks, the newest ones, never a replay.
 */
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as CronParser from 'cron-parser';
import type { CronExpression } from 'cron-parser';
import { DatabaseClock } from '../store/database-clock.js';
import { ConfigError, StoreError } from '../protocol/errors.js';
import { Queue } from '../queue/queue.js';
import { STORE_RETRY, sleep, withStoreRetry } from '../store/retry.js';
import { SCHEDULE_COLUMNS, ensureSideTable, insertSideRow } from '../sql/side-tables.js';
import type { JobId, Statement, Store } from '../store/store.js';
import { Params } from '../sql/transition-sql.js';
import { idValueIn, validateKind, type TableConfig } from '../protocol/table.js';
import { missingColumnError } from '../sql/schema.js';

/** One recurring schedule, as a schedule file or the library gives it. */
export interface ScheduleDefinition {
  /** Unique among the schedules of a table: 1-100 of A-Z a-z 0-9 _ . : - */
  name: string;
  /**
   * A cron expression: five fields (minute hour day-of-month month day-of-week), or six with seconds first;
   * `@hourly`, `@daily` and the like. Parsed by cron-parser.
   */
  cron: string;
  /** The IANA time zone the expression is read in (`Europe/Paris`); default UTC. */
  timezone?: string;
  /** The payload of each row (a table with a payload column). Not with `row`. */
  payload?: unknown;
  /** Column values of each row (an application's own table). Not with `payload`. */
  row?: Record<string, unknown>;
  /** The rows' priority (a priority column). */
  priority?: number;
  /** The rows' kind (a kind column): only workers with a handler for it claim them. */
  kind?: string;
  /**
   * Ticks missed while no scheduler ran that start-up enqueues, newest first: 0 none, default 1 (the latest
   * missed tick only), at most MAX_CATCH_UP.
   */
  catchUp?: number;
}

export interface SchedulerOptions {
  store: Store;
  table: TableConfig;
  schedules: readonly ScheduleDefinition[];
  /** A row was enqueued for a tick this scheduler claimed. */
  onEnqueued?: (event: ScheduledEvent) => void;
  /** A tick could not be claimed for a database failure; the next wake tries it again. */
  onError?: (error: unknown, schedule: string) => void;
}

export interface ScheduledEvent {
  schedule: string;
  /** The tick, UTC ISO 8601. */
  tick: string;
  id: JobId | null;
  /** True for a tick start-up caught up on. */
  caughtUp: boolean;
}

/** The most missed ticks start-up enqueues per schedule. */
export const MAX_CATCH_UP = 100;
const DEFAULT_CATCH_UP = 1;
/** The longest a scheduler sleeps before looking at the clock again (it may have jumped; the database's clock is read again). */
const MAX_WAIT_MS = 60_000;
/** Ticks due at one wake beyond which the oldest are skipped (a process stopped in a debugger, a clock jump). */
const MAX_DUE_AT_ONCE = MAX_CATCH_UP;
/** How soon a tick whose claim failed is tried again. */
const RETRY_AFTER_FAILURE_MS = 1_000;
const NAME = /^[A-Za-z0-9_.:-]{1,100}$/;

interface ParsedSchedule {
  definition: ScheduleDefinition;
  item: unknown;
  catchUp: number;
  /** Ticks after this instant (epoch ms) are still to be enqueued. */
  since: number;
}

/** Checks schedule definitions (from a file or code): every mistake is a ConfigError naming the schedule, before anything runs. */
export function parseSchedules(input: unknown, source = 'schedules'): ScheduleDefinition[] {
  const list = Array.isArray(input) ? input : input !== null && typeof input === 'object' && Array.isArray((input as { schedules?: unknown }).schedules) ? (input as { schedules: unknown[] }).schedules : null;
  if (list === null) throw new ConfigError(`${source}: expected a list of schedules (or an object with a "schedules" list)`);
  if (list.length === 0) throw new ConfigError(`${source}: holds no schedules`);
  const names = new Set<string>();
  return list.map((entry, index) => {
    const where = `${source}: schedule ${index + 1}`;
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) throw new ConfigError(`${where} is not an object`);
    const s = entry as Record<string, unknown>;
    const known = new Set(['name', 'cron', 'timezone', 'payload', 'row', 'priority', 'kind', 'catchUp']);
    const unknown = Object.keys(s).filter((k) => !known.has(k));
    if (unknown.length > 0) throw new ConfigError(`${where}: unknown field${unknown.length === 1 ? '' : 's'} ${unknown.join(', ')}; the fields are ${[...known].join(', ')}`);
    if (typeof s.name !== 'string' || !NAME.test(s.name)) throw new ConfigError(`${where}: name must be 1 to 100 of A-Z a-z 0-9 _ . : -, got ${JSON.stringify(s.name) ?? String(s.name)}`);
    const named = `${source}: schedule ${s.name}`;
    if (names.has(s.name)) throw new ConfigError(`${named} is defined twice`);
    names.add(s.name);
    if (typeof s.cron !== 'string') throw new ConfigError(`${named}: cron must be a cron expression, got ${JSON.stringify(s.cron) ?? String(s.cron)}`);
    if (s.timezone !== undefined && (typeof s.timezone !== 'string' || !isTimeZone(s.timezone))) throw new ConfigError(`${named}: timezone must be an IANA time zone such as Europe/Paris, got ${JSON.stringify(s.timezone)}`);
    cronOf(s as unknown as ScheduleDefinition, Date.now(), named);
    if (s.payload !== undefined && s.row !== undefined) throw new ConfigError(`${named}: give payload or row, not both`);
    if (s.kind !== undefined) validateKind(s.kind, `${named}: kind`);
    if (s.row !== undefined && (s.row === null || typeof s.row !== 'object' || Array.isArray(s.row))) throw new ConfigError(`${named}: row must be an object of column values`);
    if (s.catchUp !== undefined && (typeof s.catchUp !== 'number' || !Number.isInteger(s.catchUp) || s.catchUp < 0 || s.catchUp > MAX_CATCH_UP)) {
      throw new ConfigError(`${named}: catchUp must be a whole number from 0 to ${MAX_CATCH_UP}, got ${JSON.stringify(s.catchUp)}`);
    }
    return s as unknown as ScheduleDefinition;
  });
}

function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

// cron-parser (a CommonJS package) and the date library under it take 45 ms of CPU to load, in every worker
// process and CLI command that imports core; only a process with schedules needs them, so they load on first use.
const requireCjs = createRequire(import.meta.url);
let cronParser: typeof CronParser | undefined;

/** The schedule's expression, iterating from `fromMs`; a bad expression is a ConfigError naming `where`. */
function cronOf(definition: ScheduleDefinition, fromMs: number, where: string): CronExpression {
  cronParser ??= requireCjs('cron-parser') as typeof CronParser;
  try {
    return cronParser.CronExpressionParser.parse(definition.cron, { tz: definition.timezone ?? 'UTC', currentDate: new Date(fromMs) });
  } catch (error) {
    throw new ConfigError(`${where}: cron ${JSON.stringify(definition.cron)} is not a cron expression: ${(error as Error).message}`);
  }
}

/** The first tick strictly after `afterMs` (the parser works in whole seconds, so a tick at `afterMs` itself is stepped over here). */
function nextTickAfter(definition: ScheduleDefinition, afterMs: number): number {
  const cron = cronOf(definition, afterMs, definition.name);
  let tick = cron.next().getTime();
  while (tick <= afterMs) tick = cron.next().getTime();
  return tick;
}

/** Ticks in (afterMs, untilMs], oldest first, at most the newest `limit` of them. */
function ticksBetween(definition: ScheduleDefinition, afterMs: number, untilMs: number, limit: number): number[] {
  if (limit <= 0 || untilMs <= afterMs) return [];
  // Backwards from the end: a schedule of every second down for a year would be thirty million ticks forward.
  // From a second past the end, and ticks after it dropped: the parser works in whole seconds.
  const cron = cronOf(definition, untilMs + 1_000, definition.name);
  const ticks: number[] = [];
  while (ticks.length < limit) {
    const tick = cron.prev().getTime();
    if (tick <= afterMs) break;
    if (tick <= untilMs) ticks.push(tick);
  }
  return ticks.reverse();
}

/**
 * Runs schedules on one queue table until stop(). Start-up makes the schedules table if it is missing, reads each
 * schedule's last tick and catches up on what was missed (a schedule seen for the first time has missed nothing);
 * then it sleeps until the next tick of any schedule and claims each due tick.
 */
export class Scheduler {
  private readonly stopper = new AbortController();
  private running: Promise<void> | null = null;
  /** What ticks are judged by: read at start and again every wake past MAX_WAIT_MS. */
  private readonly clock: DatabaseClock;

  private constructor(
    private readonly queue: Queue,
    private readonly scheduleTable: string,
    private readonly schedules: ParsedSchedule[],
    private readonly options: SchedulerOptions,
  ) {
    this.clock = new DatabaseClock(queue.store, (error) => options.onError?.(error, '*'));
  }

  static async create(options: SchedulerOptions): Promise<Scheduler> {
    if (!options || typeof options !== 'object') throw new ConfigError('scheduler options must be an object');
    const definitions = parseSchedules(options.schedules);
    const queue = await Queue.open(options.store, options.table);
    // A kind with nowhere to go would fail at its first tick, maybe in the middle of the night: refused now.
    const kinded = definitions.find((definition) => definition.kind !== undefined);
    if (kinded && !queue.table.features.kinds) throw missingColumnError(queue.table.table, 'kind', `schedule ${kinded.name}'s kind`);
    const schedules = definitions.map((definition) => ({
      definition,
      item: itemOf(queue, definition),
      catchUp: definition.catchUp ?? DEFAULT_CATCH_UP,
      since: 0,
    }));
    const scheduleTable = await ensureSideTable(options.store, queue.table.table, 'statusq_schedules');
    return new Scheduler(queue, scheduleTable, schedules, options);
  }

  /** Start-up, then one wake per tick until stop(); resolves when stopped. */
  run(): Promise<void> {
    this.running ??= this.loop();
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopper.abort();
    await this.running?.catch(() => undefined);
  }

  private async loop(): Promise<void> {
    await this.clock.sync();
    await this.startUp(this.clock.now());
    while (!this.stopper.signal.aborted) {
      const now = this.clock.now();
      // From each schedule's last handled tick: a tick that fell between start-up and here is due at once.
      const next = Math.min(...this.schedules.map((s) => nextTickAfter(s.definition, s.since)));
      // A tick whose claim failed (the database was away) is tried again soon, not at the schedule's next tick.
      const waitMs = this.behind ? RETRY_AFTER_FAILURE_MS : Math.min(MAX_WAIT_MS, Math.max(0, next - now));
      await sleep(waitMs, this.stopper.signal);
      if (this.stopper.signal.aborted) return;
      if (waitMs === MAX_WAIT_MS) await this.clock.sync();
      await this.claimDue(this.clock.now());
    }
  }

  /** Some schedule has a due tick whose claim failed. */
  private behind = false;

  /**
   * Reads each schedule's last tick (making its row when it has none: a new schedule has missed nothing) and
   * enqueues up to `catchUp` of the ticks missed since. Also what a test calls to see start-up on its own.
   */
  async startUp(nowMs: number): Promise<void> {
    this.behind = false;
    for (const schedule of this.schedules) {
      const last = await this.lastTick(schedule.definition.name, nowMs);
      const kept = ticksBetween(schedule.definition, Math.min(last, nowMs), nowMs, schedule.catchUp);
      // The missed ticks beyond catchUp are passed over for good: since starts just before the first one kept,
      // so a claim that fails is tried again without reaching further back.
      schedule.since = kept.length > 0 ? kept[0]! - 1 : nowMs;
      if (await this.claimTicks(schedule, kept, true)) schedule.since = Math.max(schedule.since, nowMs);
    }
  }

  /** Claims every tick due by `nowMs` that this scheduler has not handled (one a schedule, normally). */
  async claimDue(nowMs: number): Promise<void> {
    this.behind = false;
    for (const schedule of this.schedules) {
      await this.claimTicks(schedule, ticksBetween(schedule.definition, schedule.since, nowMs, MAX_DUE_AT_ONCE), false);
    }
  }

  /**
   * Claims `ticks` in order; `since` moves past each one handled (claimed here or by another), not past a
   * failure, which the next wake tries again. False when one failed.
   */
  private async claimTicks(schedule: ParsedSchedule, ticks: readonly number[], caughtUp: boolean): Promise<boolean> {
    const name = schedule.definition.name;
    for (const tick of ticks) {
      const iso = new Date(tick).toISOString();
      try {
        const { claimed, id } = await this.queue.enqueueIfClaimed(schedule.item, { ...(schedule.definition.priority !== undefined && { priority: schedule.definition.priority }), ...(schedule.definition.kind !== undefined && { kind: schedule.definition.kind }), ...(this.queue.table.features.dedupe && { key: `schedule:${name}:${iso}` }) }, this.tickClaim(name, iso));
        if (claimed) this.options.onEnqueued?.({ schedule: name, tick: iso, id, caughtUp });
        schedule.since = tick;
      } catch (error) {
        if (!(error instanceof StoreError)) throw error;
        if (error.kind === 'UniqueViolation' && givesId(this.queue, schedule.definition) && (await this.fixedIdTaken(schedule.definition))) {
          // Not a passing failure to retry each second: the row's fixed id is taken until someone deletes that row.
          throw new ConfigError(`schedule ${name}: its row's ${this.queue.table.id} is already in ${this.queue.table.table}, so tick ${iso} cannot insert it; a schedule whose row fixes the ${this.queue.table.id} fires once (delete that row, or give the column a default and drop the ${this.queue.table.id} from the row)`);
        }
        this.options.onError?.(error, name);
        this.behind = true;
        return false;
      }
    }
    return true;
  }

  /** Whether the row a schedule fixes the id of is in the table (a unique violation may be another column's). */
  private async fixedIdTaken(definition: ScheduleDefinition): Promise<boolean> {
    const idColumn = this.queue.table.id;
    const id = Object.entries(definition.row ?? {}).find(([column]) => column.toLowerCase() === idColumn.toLowerCase())?.[1];
    if (id === undefined || id === null) return false;
    const found = await this.queue.inspectIds([id as JobId]).catch(() => null);
    return found !== null && found.rows.length > 0;
  }

  /** The guarded UPDATE that claims `tick` of schedule `name`, and where the INSERT finds the row it claimed. */
  private tickClaim(name: string, tick: string): { update: Statement; onlyWhere: (p: Params) => string } {
    const d = this.queue.store.dialect;
    const q = (n: string) => d.quoteIdentifier(n);
    const c = SCHEDULE_COLUMNS;
    const token = randomBytes(12).toString('hex');
    const table = q(this.scheduleTable);
    const p = new Params(d);
    const update = `UPDATE ${table} SET ${q(c.lastTick)} = ${p.add(tick)}, ${q(c.claimedBy)} = ${p.add(token)} WHERE ${q(c.queueTable)} = ${p.add(this.queue.table.table)} AND ${q(c.name)} = ${p.add(name)} AND ${q(c.lastTick)} < ${p.add(tick)}`;
    return {
      update: { sql: update, params: p.values },
      onlyWhere: (insert) =>
        `${table} WHERE ${q(c.queueTable)} = ${insert.add(this.queue.table.table)} AND ${q(c.name)} = ${insert.add(name)} AND ${q(c.claimedBy)} = ${insert.add(token)} AND ${q(c.lastTick)} = ${insert.add(tick)}`,
    };
  }

  /** The schedule's last tick as epoch ms; a schedule without a row gets one at `nowMs` (another scheduler may have made it first). */
  private async lastTick(name: string, nowMs: number): Promise<number> {
    const d = this.queue.store.dialect;
    const q = (n: string) => d.quoteIdentifier(n);
    const c = SCHEDULE_COLUMNS;
    const read = () =>
      withStoreRetry(
        () => this.queue.store.execute({ sql: `SELECT ${q(c.lastTick)} AS last_tick FROM ${q(this.scheduleTable)} WHERE ${q(c.queueTable)} = ${d.placeholder(1)} AND ${q(c.name)} = ${d.placeholder(2)}`, params: [this.queue.table.table, name] }),
        STORE_RETRY.write,
      );
    let { rows } = await read();
    if (rows.length === 0) {
      await insertSideRow(this.queue.store, this.scheduleTable, { [c.queueTable]: this.queue.table.table, [c.name]: name, [c.lastTick]: new Date(nowMs).toISOString() });
      ({ rows } = await read());
    }
    const text = rows[0]?.last_tick;
    const ms = typeof text === 'string' ? Date.parse(text) : Number.NaN;
    if (!Number.isFinite(ms)) throw new StoreError('Unknown', `schedule ${name}: ${this.scheduleTable} holds ${JSON.stringify(text)} as its last tick, which is not a time; delete that row to start the schedule afresh`);
    return ms;
  }
}

/** The schedule's row sets the id column itself. */
function givesId(queue: Queue, definition: ScheduleDefinition): boolean {
  return definition.row !== undefined && (idValueIn(queue.table, definition.row) ?? null) !== null;
}

/** What each row of `definition` is: its payload, or its column values, checked against the table now rather than at the first tick. */
function itemOf(queue: Queue, definition: ScheduleDefinition): unknown {
  const hasPayload = queue.table.columns.payload !== undefined;
  if (hasPayload && definition.row !== undefined) throw new ConfigError(`schedule ${definition.name}: table ${queue.table.table} takes a payload, not row values`);
  if (!hasPayload && definition.row === undefined) throw new ConfigError(`schedule ${definition.name}: table ${queue.table.table} has no payload column, so the schedule needs row (its column values)`);
  const id = queue.table.id;
  if (queue.idColumn.filledOnInsert === false && !givesId(queue, definition)) {
    // A payload table takes no row values, so there only a default helps.
    const fix = hasPayload ? 'the column needs a default' : `the schedule's row must give the ${id} (a fixed one: the schedule then fires once), or the column needs a default`;
    throw new ConfigError(`schedule ${definition.name}: ${queue.table.table}.${id} gets no value from the database (no AUTO_INCREMENT, identity, serial or DEFAULT), so ${fix}`);
  }
  return hasPayload ? (definition.payload ?? null) : definition.row;
}
