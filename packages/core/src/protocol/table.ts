import { ConfigError, SchemaError } from './errors.js';
import { validateIdentifier, validateTableName } from './identifiers.js';
import { resolveStatusCodes, type StatusCodes } from './status.js';
import type { ColumnInfo, ColumnLimit } from './columns.js';

/** The optional columns. Each one present switches a feature on; with none, the queue is the seed's. */
export const OPTIONAL_COLUMNS = [
  'claimedAt',
  'workerId',
  'attemptCount',
  'nextAttemptAt',
  'lastError',
  'payload',
  'result',
  'finishedAt',
  'priority',
  'dedupeKey',
  'progress',
  'dispatchedAt',
  'kind',
  'group',
  'traceContext',
] as const;
export type OptionalColumn = (typeof OPTIONAL_COLUMNS)[number];

/**
 * The claim state a claims table can hold beside the application's table (`migrate --beside`), so that table
 * keeps exactly the columns it has: the lease, the token, the attempts, the next attempt's time, the last
 * failure and the end time. Every other optional column lives in the table itself.
 */
export const BESIDE_COLUMNS = ['claimedAt', 'workerId', 'attemptCount', 'nextAttemptAt', 'lastError', 'finishedAt'] as const satisfies readonly OptionalColumn[];
export type BesideColumn = (typeof BESIDE_COLUMNS)[number];

export function isBesideColumn(column: OptionalColumn): column is BesideColumn {
  return (BESIDE_COLUMNS as readonly string[]).includes(column);
}

/** Default names of the optional columns, as `migrate` and `init` create them. */
export const DEFAULT_OPTIONAL_COLUMN_NAMES: Readonly<Record<OptionalColumn, string>> = {
  claimedAt: 'claimed_at',
  workerId: 'worker_id',
  attemptCount: 'attempt_count',
  nextAttemptAt: 'next_attempt_at',
  lastError: 'last_error',
  payload: 'payload',
  result: 'result',
  finishedAt: 'finished_at',
  priority: 'priority',
  dedupeKey: 'dedupe_key',
  progress: 'progress',
  dispatchedAt: 'dispatched_at',
  kind: 'kind',
  group: 'group_key',
  traceContext: 'trace_context',
};

export type Order = 'newest' | 'oldest';

/** The id, status and order columns a TableConfig names when it leaves them out: the seed's. */
export const DEFAULT_COLUMN_NAMES = { id: 'id', status: 'status', order: 'date' } as const;

/** The id, status and order column names `config` asks for, defaults filled in (not yet checked against a table). */
export function configuredColumns(config: Pick<TableConfig, 'idColumn' | 'statusColumn' | 'orderColumn'>): { id: string; status: string; order: string } {
  return { id: config.idColumn ?? DEFAULT_COLUMN_NAMES.id, status: config.statusColumn ?? DEFAULT_COLUMN_NAMES.status, order: config.orderColumn ?? DEFAULT_COLUMN_NAMES.order };
}

/** How a table is described in configuration. Only `table` is required. */
export interface TableConfig {
  table: string;
  /** Primary key column. Default `id`. */
  idColumn?: string;
  /** The status column. Default `status`. */
  statusColumn?: string;
  /** The column the queue is ordered by. Default `date`. */
  orderColumn?: string;
  /** `newest` (default, the seed's `ORDER BY date DESC`) or `oldest` first. */
  order?: Order;
  /** Codes for the non-pending states; defaults are the seed's (9, 1, 2, 0). */
  statusCodes?: Partial<StatusCodes>;
  /**
   * Names of optional columns, when they differ from the defaults (`claimed_at`, ...). A name set to
   * `false` turns that column off even if it exists. Columns not named are looked up by default name.
   */
  columns?: Partial<Record<OptionalColumn, string | false>>;
  /**
   * The columns a claimed row carries to the handler (`job.row`), besides the ones statusq reads itself: the
   * id, status and order columns and every optional column in use (so `job.payload` and `job.attempt` stay
   * right). Default: every column of the table. Naming only what the handler reads makes each claim cheaper
   * and keeps wide columns (documents, blobs) out of the worker's memory: measured on one adapter's store, a claim of 256
   * rows returning all 11 columns of a managed table ran about 19% slower than one returning the id alone.
   * Every name must be a column of the table (SchemaError otherwise); an empty list adds nothing.
   */
  select?: readonly string[];
}

/** How the order column holds time, which matters only for the aging cutoff. */
export type OrderTimeEncoding = 'native' | 'epochMs' | 'text';

/** A table checked against the database: every name validated, every optional column known present or absent. */
export interface ResolvedTable {
  readonly table: string;
  readonly id: string;
  readonly status: string;
  readonly order: string;
  readonly direction: Order;
  readonly codes: StatusCodes;
  readonly columns: Readonly<Partial<Record<OptionalColumn, string>>>;
  readonly orderTime: OrderTimeEncoding;
  readonly features: QueueFeatures;
  /**
   * The most a text column statusq writes can hold, for those whose catalog says they are bounded (absent:
   * no bound worth checking). A value that does not fit would fail its UPDATE every time, so it is
   * checked first (see `columnOverflow`).
   */
  readonly limits: Readonly<Partial<Record<TextColumn, ColumnLimit>>>;
  /**
   * The columns a claim returns (TableConfig.select with statusq's own columns, as the catalog spells them,
   * each once), or null for every column.
   */
  readonly returned: readonly string[] | null;
  /**
   * The kinds a claim through this view takes (a worker's handlers by kind), or null for every row. Every
   * statement that asks which rows are claimable (the claim, its guards, an idle worker's look-ahead and probe)
   * then asks for these kinds only: rows of other kinds stay pending for the workers that have them.
   */
  readonly claimKinds: readonly string[] | null;
  /**
   * The claims table (`<table>_statusq`) when the table keeps its claim state beside it (BESIDE_COLUMNS: every
   * one of them present in `columns` is that table's column, keyed by the same id); null when every column is
   * the table's own. See TransitionSql for how each move writes both.
   */
  readonly beside: string | null;
}

/** The optional columns statusq fills with text: JSON payloads and results, failure reasons, deduplication keys. */
export type TextColumn = 'payload' | 'result' | 'lastError' | 'dedupeKey' | 'progress' | 'kind' | 'group' | 'traceContext';
const TEXT_COLUMNS: readonly TextColumn[] = ['payload', 'result', 'lastError', 'dedupeKey', 'progress', 'kind', 'group', 'traceContext'];

/**
 * Features follow from the columns present:
 * - leases: `claimed_at` -> heartbeats while a job runs and a reaper for expired claims.
 * - fencing: `worker_id` -> every claim writes a fresh token and every settle requires it, so a worker
 *   whose lease was taken over changes nothing.
 * - retries: `attempt_count` -> a failed attempt may be retried (up to maxAttempts).
 * - backoff: `next_attempt_at` -> retries wait an exponentially growing, jittered delay.
 * - errorHistory: `last_error` -> the latest failure reason is kept on the row.
 * - priority: `priority` (an integer column) -> higher priorities are claimed first, then the queue order.
 * - dedupe: `dedupe_key` -> enqueue with a key inserts nothing while a row with that key is pending or processing.
 * - progress: `progress` -> a handler's ctx.progress(value) is kept on the row while it runs.
 * - dispatch: `dispatched_at` -> a relay hands due rows to a message broker (relay.ts); with leases and fencing.
 * - kinds: `kind` (a text column) -> many job types in one table: enqueue names a row's kind, and a worker with
 *   handlers by kind claims only the kinds it has handlers for.
 * - groups: `group_key` (text or integer: a host, a tenant) -> fleet-wide limits per group (a serial group, at
 *   most N at once, a pace per group: limits/group-limits.ts). Rows without a group are not limited by it.
 * - tracing: `trace_context` -> enqueue writes the enqueuer's W3C trace context on each row, and a worker's run
 *   span of that row continues the enqueuer's trace (queue/trace-context.ts, worker/tracing.ts).
 */
export interface QueueFeatures {
  leases: boolean;
  fencing: boolean;
  retries: boolean;
  backoff: boolean;
  errorHistory: boolean;
  priority: boolean;
  dedupe: boolean;
  progress: boolean;
  dispatch: boolean;
  kinds: boolean;
  groups: boolean;
  tracing: boolean;
}

/**
 * The value a row of column values gives the table's id column (its key matched without case, as the catalog's
 * names are), or undefined when it gives none. For rows to insert: an enqueued item, a schedule's row.
 */
export function idValueIn(table: Pick<ResolvedTable, 'id'>, row: Readonly<Record<string, unknown>>): unknown {
  const id = table.id.toLowerCase();
  const key = Object.keys(row).find((name) => name.toLowerCase() === id);
  return key === undefined ? undefined : row[key];
}

/** Validates names without touching the database; fails fast on bad config. */
export function validateTableConfig(config: TableConfig): void {
  if (config === null || typeof config !== 'object') throw new ConfigError('table config must be an object');
  validateTableName(config.table);
  const names = configuredColumns(config);
  validateIdentifier(names.id, 'id column');
  validateIdentifier(names.status, 'status column');
  validateIdentifier(names.order, 'order column');
  if (config.order !== undefined && config.order !== 'newest' && config.order !== 'oldest') {
    throw new ConfigError(`order must be "newest" or "oldest", got ${JSON.stringify(config.order)}`);
  }
  for (const [key, name] of Object.entries(config.columns ?? {})) {
    if (!(OPTIONAL_COLUMNS as readonly string[]).includes(key)) {
      throw new ConfigError(`unknown optional column ${JSON.stringify(key)}; known: ${OPTIONAL_COLUMNS.join(', ')}`);
    }
    if (name !== false) validateIdentifier(name, `${key} column`);
  }
  if (config.select !== undefined) {
    if (!Array.isArray(config.select)) throw new ConfigError(`select must be a list of column names, got ${JSON.stringify(config.select)}`);
    for (const name of config.select) validateIdentifier(name, 'select column');
  }
  resolveStatusCodes(config.statusCodes);
}

/**
 * Checks the configuration against the table's real columns (from `Store.describeTable`) and decides which
 * features are on. A missing table or a missing required column is a SchemaError here, at start-up, rather
 * than an SQL error in the middle of a run.
 */
export function resolveTable(
  config: TableConfig,
  columns: readonly ColumnInfo[] | null,
  orderTimeOf: (column: ColumnInfo) => OrderTimeEncoding,
  beside: { readonly table: string; readonly columns: readonly ColumnInfo[] } | null = null,
): ResolvedTable {
  validateTableConfig(config);
  if (columns === null) throw new SchemaError(`table ${JSON.stringify(config.table)} does not exist`);
  const byName = new Map(columns.map((c) => [c.name.toLowerCase(), c]));
  const require = (name: string, role: string): ColumnInfo => {
    const column = byName.get(name.toLowerCase());
    if (!column) {
      throw new SchemaError(
        `table ${JSON.stringify(config.table)} has no ${role} column ${JSON.stringify(name)} (columns: ${columns.map((c) => c.name).join(', ')})`,
      );
    }
    return column;
  };
  const names = configuredColumns(config);
  const idColumn = require(names.id, 'id');
  const statusColumn = require(names.status, 'status');
  const orderColumn = require(names.order, 'order');
  const id = idColumn.name;
  const status = statusColumn.name;
  // Every settle is `WHERE id = ?`: with an id shared by two rows, one job's outcome lands on the other.
  if (!idColumn.unique) {
    throw new SchemaError(
      `table ${JSON.stringify(config.table)}: id column ${JSON.stringify(id)} is not unique: it must be the primary key or have a unique index of its own (PRIMARY KEY (${id}, k) does not make ${id} unique)`,
    );
  }
  // The codes are written and compared as integers; a strictly typed server refuses `varchar = integer`, so a text
  // status column would let claims through and then fail every settle.
  if (!statusColumn.integer) {
    throw new SchemaError(
      `table ${JSON.stringify(config.table)}: status column ${JSON.stringify(status)} is ${statusColumn.type}, not an integer type: statusq stores its codes (NULL, 9, 1, 2, 0 by default) as integers; change the column to SMALLINT or INTEGER, or name an integer column as the status column`,
    );
  }

  const optional: Partial<Record<OptionalColumn, string>> = {};
  const besideByName = new Map((beside?.columns ?? []).map((c) => [c.name.toLowerCase(), c]));
  if (beside) {
    // One home per column: a lease in the table and another beside it would each fence only half the moves.
    const inTable = BESIDE_COLUMNS.filter((key) => config.columns?.[key] !== false && byName.has((config.columns?.[key] || DEFAULT_OPTIONAL_COLUMN_NAMES[key]).toLowerCase()));
    if (inTable.length > 0) {
      throw new SchemaError(
        `table ${JSON.stringify(config.table)} has claim-state columns of its own (${inTable.map((key) => DEFAULT_OPTIONAL_COLUMN_NAMES[key]).join(', ')}) and a claims table beside it (${beside.table}): keep one or the other (drop ${beside.table}, or those columns)`,
      );
    }
    const key = besideByName.get(id.toLowerCase());
    if (!key?.unique) throw new SchemaError(`claims table ${beside.table} has no unique column ${JSON.stringify(id)} to match ${config.table}.${id}; recreate it with statusq migrate --beside`);
  }
  for (const key of OPTIONAL_COLUMNS) {
    if (beside && isBesideColumn(key)) {
      const found = config.columns?.[key] === false ? undefined : besideByName.get(DEFAULT_OPTIONAL_COLUMN_NAMES[key]);
      if (found) optional[key] = found.name;
      continue;
    }
    const configured = config.columns?.[key];
    if (configured === false) continue;
    if (configured !== undefined) {
      const column = require(configured, key);
      if (key === 'priority' && !column.integer) {
        throw new SchemaError(`table ${JSON.stringify(config.table)}: priority column ${JSON.stringify(column.name)} is ${column.type}, not an integer type`);
      }
      if (key === 'kind' && column.integer) {
        throw new SchemaError(`table ${JSON.stringify(config.table)}: kind column ${JSON.stringify(column.name)} is ${column.type}; kinds are names, so it must be a text type (VARCHAR)`);
      }
      optional[key] = column.name;
    } else {
      const found = byName.get(DEFAULT_OPTIONAL_COLUMN_NAMES[key]);
      // An application's own `priority` that holds text (low/high) is its business, not a claim order; so is
      // an integer `kind` (a code of its own), which names no handler.
      if (found && (key !== 'priority' || found.integer) && (key !== 'kind' || !found.integer)) optional[key] = found.name;
    }
  }
  const limits: Partial<Record<TextColumn, ColumnLimit>> = {};
  for (const key of TEXT_COLUMNS) {
    const name = optional[key];
    const home = beside && isBesideColumn(key) ? besideByName : byName;
    const limit = name === undefined ? null : home.get(name.toLowerCase())?.maxLength;
    if (limit) limits[key] = limit;
  }
  let returned: string[] | null = null;
  if (config.select !== undefined) {
    // A claims table's columns are not the table's: the claim reads them beside it (TransitionSql.rowColumns).
    const own = [id, status, orderColumn.name, ...Object.entries(optional).filter(([key]) => !(beside && isBesideColumn(key as OptionalColumn))).map(([, name]) => name)];
    const chosen = config.select.map((name) => require(name, 'select'));
    returned = [...new Set([...own, ...chosen.map((c) => c.name)])];
  }
  return {
    table: config.table,
    id,
    status,
    order: orderColumn.name,
    direction: config.order ?? 'newest',
    codes: resolveStatusCodes(config.statusCodes),
    columns: optional,
    orderTime: orderTimeOf(orderColumn),
    features: {
      leases: optional.claimedAt !== undefined,
      fencing: optional.workerId !== undefined,
      retries: optional.attemptCount !== undefined,
      backoff: optional.nextAttemptAt !== undefined,
      errorHistory: optional.lastError !== undefined,
      priority: optional.priority !== undefined,
      dedupe: optional.dedupeKey !== undefined,
      progress: optional.progress !== undefined,
      dispatch: optional.dispatchedAt !== undefined,
      kinds: optional.kind !== undefined,
      groups: optional.group !== undefined,
      tracing: optional.traceContext !== undefined,
    },
    limits,
    returned,
    claimKinds: null,
    beside: beside?.table ?? null,
  };
}

/**
 * What a kind may be called: letters, digits and `_ . : / -`, 1 to 100 characters. Kinds name handlers (a
 * module file per kind on the CLI) and appear in SQL as literals of this alphabet, which nothing can break out of.
 */
const KIND_NAME = /^[A-Za-z0-9_.:/-]{1,100}$/;

/** A kind name, checked (see KIND_NAME); anything else is a ConfigError saying the form. */
export function validateKind(kind: unknown, what = 'kind'): string {
  if (typeof kind !== 'string' || !KIND_NAME.test(kind)) {
    throw new ConfigError(`${what} must be 1 to 100 letters, digits or _ . : / - (email, report.daily), got ${JSON.stringify(kind)}`);
  }
  return kind;
}

/** The longest text a group may be: it is kept in a side table's key column when the group is paced. */
export const MAX_GROUP_LENGTH = 255;

/**
 * A row's group, checked: text of 1 to MAX_GROUP_LENGTH characters (a host name, a tenant's key) or a safe
 * integer (a tenant id). Groups travel as bound parameters, never as SQL text, so any characters may appear.
 */
export function validateGroup(group: unknown, what = 'group'): string | number {
  if (typeof group === 'number' && Number.isSafeInteger(group)) return group;
  if (typeof group === 'string' && group.length >= 1 && group.length <= MAX_GROUP_LENGTH) return group;
  throw new ConfigError(`${what} must be text of 1 to ${MAX_GROUP_LENGTH} characters or a whole number (a host, a tenant), got ${JSON.stringify(group) ?? String(group)}`);
}

/**
 * `table` as a worker with handlers for `kinds` claims it: only rows of those kinds (ResolvedTable.claimKinds).
 * A table without a kind column is a SchemaError naming the migration.
 */
export function scopeToKinds(table: ResolvedTable, kinds: readonly string[]): ResolvedTable {
  if (kinds.length === 0) throw new ConfigError('handlers by kind need at least one kind');
  for (const kind of kinds) validateKind(kind, 'a handler\'s kind');
  if (!table.features.kinds) {
    throw new SchemaError(`table ${table.table} has no kind column, which handlers by kind need (statusq migrate --with kinds adds it; an application's own column: columns.kind, --kind-column)`);
  }
  return { ...table, claimKinds: [...new Set(kinds)].sort() };
}
