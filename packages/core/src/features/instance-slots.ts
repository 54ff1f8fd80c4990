/**
 * A cluster-wide cap on the workers of one queue table (`work --max-instances N`): a worker started by cron or a
 * container platform while N others still run does not pile on. The cap is N rows of the instances table, one per
 * slot; an instance holds one by the same guarded UPDATE a job is claimed with (`holder IS NULL OR expires_at <
 * now`, affected rows = 1), renews it while it runs, and frees it when it stops. An instance that dies holds its
 * slot only until the lease runs out on the database's clock, so a crash never leaves the cap full for good.
 *
 * Why a table and not advisory locks: a lock lives on one connection (a server's advisory or named locks), so a
 * pooled store would have to pin one connection for the whole run and a file database has none; a lease row
 * works the same on every dialect and shows who holds what (`instanceHolders`).
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { ConfigError, describeError } from '../protocol/errors.js';
import { validateTableName } from '../protocol/identifiers.js';
import { STORE_RETRY, sleep, withStoreRetry } from '../store/retry.js';
import { INSTANCE_COLUMNS, ensureSideTable, insertSideRow } from '../sql/side-tables.js';
import type { Store } from '../store/store.js';
import type { TableConfig } from '../protocol/table.js';
import { Params } from '../sql/transition-sql.js';

export interface InstanceSlotOptions {
  store: Store;
  /** The queue table the cap is for (its name, or its TableConfig). */
  table: string | TableConfig;
  /** How many instances may hold a slot at once, 1 to MAX_INSTANCES. Every instance of a table should be given the same cap: one with a smaller cap only takes the lower slots. */
  max: number;
  /** Wait for a slot when all are held, instead of returning null at once. Default false. */
  wait?: boolean;
  /** Ends a wait: acquire then returns null. */
  signal?: AbortSignal;
  /** How long a slot stays held after its last renewal (it is renewed every third of this): 1 s to 1 h, default DEFAULT_INSTANCE_LEASE_MS. */
  leaseMs?: number;
  /** How often a waiting instance looks for a free slot; default a tenth of the lease, from 250 ms to 2 s. */
  pollMs?: number;
  /**
   * The slot was lost: a renewal found another holder (this process stalled past its lease and another instance
   * took the slot), or renewals failed for a whole lease. The instance is over the cap from then on and should
   * stop taking work. Called once.
   */
  onLost?: (reason: string) => void;
}

/** One held slot, as instanceHolders lists it. */
export interface InstanceHolder {
  slot: number;
  /** `host:pid` of the holder. */
  host: string | null;
  /** The holder's lease ran out on the database's clock: it died or stalled, and the slot is free to take. */
  expired: boolean;
}

export const MAX_INSTANCES = 1000;
export const DEFAULT_INSTANCE_LEASE_MS = 30_000;
const MIN_LEASE_MS = 1_000;
const MAX_LEASE_MS = 3_600_000;

/** A slot this process holds until release(); renewed on a timer that does not keep the process alive. */
export class InstanceSlot {
  private timer: NodeJS.Timeout | null = null;
  private renewing: Promise<void> | null = null;
  private lastRenewedAt = Date.now();
  /** Why the last renewal failed, for the message if the slot is lost for want of one. */
  private lastError: string | null = null;
  private lostReason: string | null = null;
  private released = false;

  private constructor(
    private readonly sql: SlotSql,
    /** The slot held, 1 to the cap. */
    readonly slot: number,
    private readonly holder: string,
    private readonly leaseMs: number,
    private readonly onLost: ((reason: string) => void) | undefined,
  ) {}

  /**
   * Takes a free slot of the table's cap (making the instances table and the cap's rows if missing), or returns
   * null when all `max` are held and `wait` is not set (or the wait was aborted).
   */
  static async acquire(options: InstanceSlotOptions): Promise<InstanceSlot | null> {
    const settings = checkOptions(options);
    const sql = await SlotSql.open(options.store, settings.table);
    await sql.ensureSlots(settings.max);
    const holder = randomBytes(12).toString('hex');
    const host = `${hostname()}:${process.pid}`.slice(0, 255);
    for (;;) {
      const slot = await sql.take(settings.max, holder, host, settings.leaseMs);
      if (slot !== null) {
        const held = new InstanceSlot(sql, slot, holder, settings.leaseMs, options.onLost);
        held.start();
        return held;
      }
      if (!options.wait || options.signal?.aborted) return null;
      await sleep(settings.pollMs, options.signal);
      if (options.signal?.aborted) return null;
    }
  }

  /** Why the slot was lost, or null while it is held. */
  get lost(): string | null {
    return this.lostReason;
  }

  /**
   * Frees the slot for the next instance at once, rather than at the lease's end: one try, bounded by the store's
   * own deadlines, not waiting on a renewal still in flight. False when it could not (the slot was lost, or the
   * database did not answer): the slot then frees itself when its lease runs out. Safe to call twice.
   */
  async release(): Promise<boolean> {
    if (this.released) return false;
    this.released = true;
    if (this.timer) clearInterval(this.timer);
    if (this.lostReason !== null) return false;
    try {
      await this.sql.free(this.slot, this.holder);
      return true;
    } catch {
      return false;
    }
  }

  private start(): void {
    this.timer = setInterval(() => {
      // Judged on every tick, not when a renewal returns: one stuck until the store's query deadline must not keep
      // this instance running past the moment another may take its slot.
      if (Date.now() - this.lastRenewedAt >= this.leaseMs) {
        this.lose(`no renewal of slot ${this.slot} succeeded for a whole lease (${this.leaseMs} ms)${this.lastError ? `: ${this.lastError}` : ''}`);
        return;
      }
      // A renewal still waiting on the database is not stacked on.
      this.renewing ??= this.renew().finally(() => (this.renewing = null));
    }, Math.max(100, Math.floor(this.leaseMs / 3)));
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    if (this.released || this.lostReason !== null) return;
    // The lease runs from when the UPDATE was sent, at the latest: the deadline above is never late.
    const sent = Date.now();
    try {
      const kept = await this.sql.renew(this.slot, this.holder, this.leaseMs);
      if (this.released) return;
      if (kept) this.lastRenewedAt = sent;
      else this.lose(`slot ${this.slot} was taken by another instance after its lease ran out`);
    } catch (error) {
      // Until the lease has run out no other instance can take the slot; the timer judges when it has.
      this.lastError = describeError(error);
    }
  }

  private lose(reason: string): void {
    if (this.lostReason !== null || this.released) return;
    this.lostReason = reason;
    if (this.timer) clearInterval(this.timer);
    try {
      this.onLost?.(reason);
    } catch {
      // The caller's callback failing must not become an unhandled rejection of a timer's promise.
    }
  }
}

/** The slots of the table's cap that are held now (by live or expired holders), lowest first. */
export async function instanceHolders(store: Store, table: string | TableConfig): Promise<InstanceHolder[]> {
  const sql = await SlotSql.open(store, validateTableName(typeof table === 'string' ? table : table.table));
  return sql.holders();
}

/** Checks a cap and its lease (ConfigError), for a caller that wants bad input refused before it opens the database. */
export function validateInstanceCap(max: unknown, leaseMs: unknown = DEFAULT_INSTANCE_LEASE_MS): void {
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 1 || max > MAX_INSTANCES) throw new ConfigError(`max instances must be a whole number from 1 to ${MAX_INSTANCES}, got ${JSON.stringify(max) ?? String(max)}`);
  if (typeof leaseMs !== 'number' || !Number.isInteger(leaseMs) || leaseMs < MIN_LEASE_MS || leaseMs > MAX_LEASE_MS) throw new ConfigError(`the instance lease must be from ${MIN_LEASE_MS} ms to ${MAX_LEASE_MS} ms, got ${JSON.stringify(leaseMs) ?? String(leaseMs)}`);
}

function checkOptions(options: InstanceSlotOptions): { table: string; max: number; leaseMs: number; pollMs: number } {
  if (!options || typeof options !== 'object') throw new ConfigError('instance slot options must be an object');
  const { max, leaseMs = DEFAULT_INSTANCE_LEASE_MS } = options;
  validateInstanceCap(max, leaseMs);
  const pollMs = options.pollMs ?? Math.min(2_000, Math.max(250, Math.floor(leaseMs / 10)));
  if (typeof pollMs !== 'number' || !Number.isInteger(pollMs) || pollMs < 10) throw new ConfigError(`the instance poll interval must be a whole number of milliseconds, at least 10, got ${JSON.stringify(pollMs)}`);
  const table = options.table;
  if (table === null || (typeof table !== 'string' && typeof table !== 'object')) throw new ConfigError('table must be a table name or a table config');
  return { table: validateTableName(typeof table === 'string' ? table : table.table), max, leaseMs, pollMs };
}

/** The statements on the instances table, each a guarded write on one slot's row. */
class SlotSql {
  private constructor(
    private readonly store: Store,
    private readonly instances: string,
    private readonly queueTable: string,
  ) {}

  static async open(store: Store, queueTable: string): Promise<SlotSql> {
    return new SlotSql(store, await ensureSideTable(store, queueTable, 'statusq_instances'), queueTable);
  }

  private q(name: string): string {
    return this.store.dialect.quoteIdentifier(name);
  }

  /** `queue_table = ? AND slot = ?`: one slot's row. */
  private where(p: Params, slot: number): string {
    const c = INSTANCE_COLUMNS;
    return `${this.q(c.queueTable)} = ${p.add(this.queueTable)} AND ${this.q(c.slot)} = ${p.add(slot)}`;
  }

  /** A slot nobody holds, or whose holder's lease ran out. */
  private get unheld(): string {
    const c = INSTANCE_COLUMNS;
    return `(${this.q(c.holder)} IS NULL OR ${this.q(c.expiresAt)} < ${this.store.dialect.now})`;
  }

  private async run(sql: string, p: Params) {
    return withStoreRetry(() => this.store.execute({ sql, params: p.values }), STORE_RETRY.write);
  }

  /** Makes the rows of slots 1..max that are missing (another instance may make them first). */
  async ensureSlots(max: number): Promise<void> {
    const c = INSTANCE_COLUMNS;
    const p = new Params(this.store.dialect);
    const { rows } = await this.run(`SELECT ${this.q(c.slot)} AS slot FROM ${this.q(this.instances)} WHERE ${this.q(c.queueTable)} = ${p.add(this.queueTable)} AND ${this.q(c.slot)} <= ${p.add(max)}`, p);
    const present = new Set(rows.map((row) => Number(row.slot)));
    for (let slot = 1; slot <= max; slot++) {
      if (!present.has(slot)) await insertSideRow(this.store, this.instances, { [c.queueTable]: this.queueTable, [c.slot]: slot });
    }
  }

  /** Finds the free slots up to `max` and takes the first one whose guarded UPDATE changes its row; null when none did. */
  async take(max: number, holder: string, host: string, leaseMs: number): Promise<number | null> {
    const c = INSTANCE_COLUMNS;
    const find = new Params(this.store.dialect);
    const { rows } = await this.run(
      `SELECT ${this.q(c.slot)} AS slot FROM ${this.q(this.instances)} WHERE ${this.q(c.queueTable)} = ${find.add(this.queueTable)} AND ${this.q(c.slot)} <= ${find.add(max)} AND ${this.unheld} ORDER BY ${this.q(c.slot)}`,
      find,
    );
    for (const row of rows) {
      const slot = Number(row.slot);
      const p = new Params(this.store.dialect);
      const set = `${this.q(c.holder)} = ${p.add(holder)}, ${this.q(c.host)} = ${p.add(host)}, ${this.q(c.expiresAt)} = ${this.store.dialect.nowPlusMs(p.add(leaseMs))}`;
      // Or already ours: a retry after a commit whose answer was lost must not count the slot as taken by another.
      const { affected } = await this.run(`UPDATE ${this.q(this.instances)} SET ${set} WHERE ${this.where(p, slot)} AND (${this.unheld} OR ${this.q(c.holder)} = ${p.add(holder)})`, p);
      if (affected === 1) return slot;
    }
    return null;
  }

  /** Moves the slot's lease on; false when the slot is no longer `holder`'s. One try: the next renewal is the retry. */
  async renew(slot: number, holder: string, leaseMs: number): Promise<boolean> {
    const c = INSTANCE_COLUMNS;
    const p = new Params(this.store.dialect);
    const set = `${this.q(c.expiresAt)} = ${this.store.dialect.nowPlusMs(p.add(leaseMs))}`;
    const { affected } = await this.store.execute({ sql: `UPDATE ${this.q(this.instances)} SET ${set} WHERE ${this.where(p, slot)} AND ${this.q(c.holder)} = ${p.add(holder)}`, params: p.values });
    return affected === 1;
  }

  async free(slot: number, holder: string): Promise<void> {
    const c = INSTANCE_COLUMNS;
    const p = new Params(this.store.dialect);
    await this.store.execute({
      sql: `UPDATE ${this.q(this.instances)} SET ${this.q(c.holder)} = NULL, ${this.q(c.host)} = NULL, ${this.q(c.expiresAt)} = NULL WHERE ${this.where(p, slot)} AND ${this.q(c.holder)} = ${p.add(holder)}`,
      params: p.values,
    });
  }

  async holders(): Promise<InstanceHolder[]> {
    const c = INSTANCE_COLUMNS;
    const p = new Params(this.store.dialect);
    const { rows } = await this.run(
      `SELECT ${this.q(c.slot)} AS slot, ${this.q(c.host)} AS host, CASE WHEN ${this.q(c.expiresAt)} < ${this.store.dialect.now} THEN 1 ELSE 0 END AS expired FROM ${this.q(this.instances)} WHERE ${this.q(c.queueTable)} = ${p.add(this.queueTable)} AND ${this.q(c.holder)} IS NOT NULL ORDER BY ${this.q(c.slot)}`,
      p,
    );
    return rows.map((row) => ({ slot: Number(row.slot), host: typeof row.host === 'string' ? row.host : null, expired: Number(row.expired) === 1 }));
  }
}
