import { ConfigError, SchemaError, StoreError } from '../protocol/errors.js';
import { derivedName, splitTableName, validateIdentifier, validateTableName } from '../protocol/identifiers.js';
import { resolveStatusCodes, type StatusCodes } from '../protocol/status.js';
import type { ColumnSpec, DispatchIndexSpec, GroupIndexSpec, KeyIndexSpec, KindIndexSpec, PriorityIndexSpec, SchemaSupport, Statement, Store } from '../store/store.js';
import { BESIDE_COLUMNS, DEFAULT_OPTIONAL_COLUMN_NAMES, isBesideColumn, type OptionalColumn, type Order, type ResolvedTable } from '../protocol/table.js';
import { type ColumnInfo } from '../protocol/columns.js';

/**
 * `initTable` and `migrateTable`: what a statusq table holds and when it changes, decided here once for every
 * database. How each database spells it is the adapter's `Store.schema` (see SchemaSupport).
 */

/** Column groups `migrate --with` adds to an existing table. */
export const COLUMN_GROUPS = {
  /** claimed_at + worker_id: crashed workers' rows return to the queue; a taken-over worker is fenced out. */
  leases: ['claimedAt', 'workerId'],
  /** attempt_count + next_attempt_at + last_error: retries with backoff, and the failure reason. */
  retries: ['attemptCount', 'nextAttemptAt', 'lastError'],
  /** result + finished_at: what the handler returned and when the job ended. */
  results: ['result', 'finishedAt'],
  /** next_attempt_at alone: delayed jobs (enqueue's delay or run time) on a table that wants no retries. */
  delays: ['nextAttemptAt'],
  /** priority: higher first, then the queue order; with its own index. Not on a table `init` makes unless asked. */
  priority: ['priority'],
  /** dedupe_key, with a unique index over live rows: enqueue with a key inserts nothing while that key is live. */
  dedupe: ['dedupeKey'],
  /** progress: what a running handler last reported through ctx.progress. Not in a table `init` makes unless asked. */
  progress: ['progress'],
  /**
   * dispatched_at, with its index: when a relay last published the row to a broker (statusq relay; every claim
   * sets it back to NULL). Consumers need leases too: a dead consumer's rows come back by lease.
   */
  dispatch: ['dispatchedAt'],
  /**
   * kind, with its index: many job types in one table, each row naming its kind; a worker with handlers by kind
   * claims those kinds only, through the index. Not in a table `init` makes unless asked.
   */
  kinds: ['kind'],
  /**
   * group_key, with an index of processing rows by group: fleet-wide limits per group (a URL's host, a tenant),
   * which count a group's processing rows at every claim. Not in a table `init` makes unless asked.
   */
  groups: ['group'],
  /**
   * trace_context: the enqueuer's W3C trace context (traceparent, then tracestate), so a job's run span joins
   * the trace of the request that enqueued it. Not in a table `init` makes unless asked.
   */
  tracing: ['traceContext'],
  /**
   * No column: a wake-up of each settle for Queue.waitFor and `enqueue --wait`, where the store's wake-ups are
   * triggers in the table (SchemaSupport.installWakeUps). Asked for, never made unasked: every settle then pays for
   * a notification at its commit (about a fifth of a no-op burn-down's throughput, docs/benchmarks.md). Without
   * it waitFor reads the row on its backoff.
   */
  await: [],
} as const satisfies Record<string, readonly OptionalColumn[]>;

/**
 * The groups a table `init` makes has (and adds to an older managed table): all but priority, whose index every
 * insert and settle pays for. The key index of dedupe costs a row without a key nothing where it is a partial
 * index (one the row never enters) and one NULL index entry where it is a unique index on a generated column,
 * and schedules need it.
 */
const MANAGED_GROUPS: readonly ColumnGroup[] = ['leases', 'retries', 'results', 'delays', 'dedupe'];

export type ColumnGroup = keyof typeof COLUMN_GROUPS;

/** The smallest group that adds `column`: what an error about its absence tells the user to migrate with. */
function columnGroupOf(column: OptionalColumn): ColumnGroup {
  const groups = Object.entries(COLUMN_GROUPS) as Array<[ColumnGroup, readonly OptionalColumn[]]>;
  return groups.filter(([, columns]) => columns.includes(column)).sort((a, b) => a[1].length - b[1].length)[0]![0];
}

/** `table` lacks the optional `column` that `what` needs: the SchemaError, naming the group that adds it. */
export function missingColumnError(table: string, column: OptionalColumn, what: string): SchemaError {
  return new SchemaError(`table ${table} has no ${DEFAULT_OPTIONAL_COLUMN_NAMES[column]} column, which ${what} needs (statusq migrate --with ${columnGroupOf(column)} adds it)`);
}

/**
 * The broker path's columns: dispatched_at (the relay's record of a publish), claimed_at (leases bring back a
 * dead consumer's rows) and worker_id (a fenced claim tells this consumer's rows from a stale message's). SchemaError naming the migration when one is missing.
 */
export function assertDispatchColumns(table: Pick<ResolvedTable, 'table' | 'features'>, what: string): void {
  for (const [column, feature] of [['dispatchedAt', 'dispatch'], ['claimedAt', 'leases'], ['workerId', 'fencing']] as const) {
    if (!table.features[feature]) throw missingColumnError(table.table, column, what);
  }
}

/** The optional columns `groups` add, each once (groups may share one: delays is part of retries). */
function columnsOf(groups: readonly ColumnGroup[]): OptionalColumn[] {
  return [...new Set(groups.flatMap((group) => COLUMN_GROUPS[group]))];
}

export function parseColumnGroups(list: string | readonly string[] | undefined): ColumnGroup[] {
  if (list === undefined) return [];
  const names = (typeof list === 'string' ? list.split(',') : [...list]).map((s) => s.trim()).filter(Boolean);
  for (const name of names) {
    if (!(name in COLUMN_GROUPS)) throw new ConfigError(`unknown column group ${JSON.stringify(name)}; use ${Object.keys(COLUMN_GROUPS).join(', ')}`);
  }
  return [...new Set(names)] as ColumnGroup[];
}

export interface MigrateOptions {
  table: string;
  statusColumn?: string;
  orderColumn?: string;
  /** Optional column groups to add. */
  with?: readonly ColumnGroup[];
  /**
   * The order the workers claim in (their `order` option), which the priority index is built for: the claim is
   * `ORDER BY priority DESC, <order column> DESC` newest first, `ASC` oldest first, and one index serves one of
   * the two without a sort. Default newest, the workers' default. Only matters with a priority column.
   */
  order?: Order;
  /**
   * The table's status codes, when they are not the seed's: the key index (group dedupe) holds the rows that are
   * pending or processing, so it is built for the processing code the workers will write.
   */
  statusCodes?: Partial<StatusCodes>;
  /**
   * Keep the claim state beside the table instead of in it: a claims table `<table>_statusq` (besideTableName),
   * keyed by the table's id (`idColumn`), holds claimed_at, worker_id, attempt_count, next_attempt_at, last_error
   * and finished_at, so leases, fencing, retries with backoff, failure reasons and end times work on a table that
   * gains no column (only the pending index). The groups of `with` that need other columns (results' result,
   * priority, dedupe, progress, dispatch) still add those to the table. A table with claim-state columns of its
   * own is a ConfigError: one home or the other.
   */
  beside?: boolean;
  /** The table's id column, which the claims table is keyed by (`beside`) and a settle wake-up names rows by. Default `id`. */
  idColumn?: string;
  /**
   * An application's own column that names each row's kind (a `type` column), for `with: ['kinds']`: the kind
   * index is built on it and no `kind` column is added. Default `kind`.
   */
  kindColumn?: string;
  /**
   * An application's own column that holds each row's group (a host column the application fills, a tenant id),
   * for `with: ['groups']`: the group index is built on it and no `group_key` column is added. Default `group_key`.
   */
  groupColumn?: string;
}

export interface MigrateReport {
  table: string;
  /** Columns added, by name; empty when the table already had them all. */
  addedColumns: string[];
  /** Name of the pending-row index created, or null when it existed. */
  createdIndex: string | null;
  /** Name of the priority index created (a table with a priority column), or null when it existed or there is none. */
  createdPriorityIndex: string | null;
  /** Name of the key index created (a table with a dedupe_key column), or null when it existed or there is none. */
  createdKeyIndex: string | null;
  /** Name of the relay's index created (`with: ['dispatch']`), or null when it existed, was not asked for or the store has none. */
  createdDispatchIndex: string | null;
  /** Name of the kind index created (`with: ['kinds']`), or null when it existed, was not asked for or the store has none. */
  createdKindIndex: string | null;
  /** Name of the group index created (`with: ['groups']`), or null when it existed, was not asked for or the store has none. */
  createdGroupIndex: string | null;
  /** True when the status column itself was added: every existing row is now pending. */
  addedStatus: boolean;
  /** The claims table (`beside`): its name, whether this call created it, and the columns it added to it. Null without `beside`. */
  beside: { table: string; created: boolean; addedColumns: string[] } | null;
}

export interface InitReport {
  table: string;
  created: boolean;
  /** What migrate added when the table already existed (init on an older managed table). */
  migrated: MigrateReport | null;
}

/** Index names must be valid identifiers too; long table names are shortened with a stable hash. */
export function pendingIndexName(table: string): string {
  return derivedName(`${table.replace('.', '_')}_statusq_pending`, table);
}

/**
 * The claims table of `table` (ResolvedTable.beside): `<table>_statusq` in the table's schema, within the
 * identifier limit (derivedName).
 */
export function besideTableName(table: string): string {
  const [schema, name] = splitTableName(table);
  const beside = derivedName(`${name}_statusq`, table);
  return schema === null ? beside : `${schema}.${beside}`;
}

/** The key index's name (KeyIndexSpec): unique over the keys of live rows. */
export function keyIndexName(table: string): string {
  return derivedName(`${table.replace('.', '_')}_statusq_key`, table);
}

/** The dispatch index's name (DispatchIndexSpec): pending rows by dispatched_at, for the relay. */
export function dispatchIndexName(table: string): string {
  return derivedName(`${table.replace('.', '_')}_statusq_dispatch`, table);
}

/** The kind index's name (KindIndexSpec): pending rows by kind, then the order column. */
export function kindIndexName(table: string): string {
  return derivedName(`${table.replace('.', '_')}_statusq_kind`, table);
}

/** The group index's name (GroupIndexSpec): processing rows by group, which a group's limit counts. */
export function groupIndexName(table: string): string {
  return derivedName(`${table.replace('.', '_')}_statusq_group`, table);
}

/** The priority index's name: one per table, built for the order given at migrate time (PriorityIndexSpec). */
export function priorityIndexName(table: string): string {
  return derivedName(`${table.replace('.', '_')}_statusq_priority`, table);
}

const OPTIONAL_COLUMN_SPECS: Readonly<Record<OptionalColumn, Omit<ColumnSpec, 'name'>>> = {
  claimedAt: { kind: 'time', nullable: true },
  workerId: { kind: 'token', nullable: true },
  attemptCount: { kind: 'integer', nullable: false, default: 0 },
  nextAttemptAt: { kind: 'time', nullable: true },
  lastError: { kind: 'text', nullable: true },
  payload: { kind: 'longText', nullable: true },
  result: { kind: 'longText', nullable: true },
  finishedAt: { kind: 'time', nullable: true },
  priority: { kind: 'integer', nullable: false, default: 0 },
  dedupeKey: { kind: 'token', nullable: true },
  progress: { kind: 'text', nullable: true },
  dispatchedAt: { kind: 'time', nullable: true },
  kind: { kind: 'token', nullable: true },
  group: { kind: 'token', nullable: true },
  // Text, not a 255-character token: a tracestate alone may be 512 characters.
  traceContext: { kind: 'text', nullable: true },
};

const optionalColumn = (column: OptionalColumn): ColumnSpec => ({ name: DEFAULT_OPTIONAL_COLUMN_NAMES[column], ...OPTIONAL_COLUMN_SPECS[column] });
/** Null is pending: a status column added to a table with rows makes every row pending. */
const statusColumnSpec = (name: string): ColumnSpec => ({ name, kind: 'integer', nullable: true });

/** A managed table's own columns: the seed's id, date and status, and a payload; its column groups follow them. */
const MANAGED_BASE_COLUMNS: readonly ColumnSpec[] = [
  { name: 'id', kind: 'serialKey', nullable: false },
  { name: 'date', kind: 'time', nullable: false, default: 'now' },
  statusColumnSpec('status'),
  optionalColumn('payload'),
];

export function schemaSupportOf(store: Store): SchemaSupport {
  if (!store.schema) throw new ConfigError(`the ${store.dialect.name} store cannot create or change tables (it has no schema support); create the table yourself`);
  return store.schema;
}

/** Groups whose column is only safe with its index: a store that cannot build the index cannot add the group. */
function assertIndexable(store: Store, schema: SchemaSupport, groups: readonly ColumnGroup[]): void {
  if (groups.includes('priority') && !schema.createPriorityIndex) {
    throw new ConfigError(`the ${store.dialect.name} store cannot create the priority index (its schema support has no createPriorityIndex); without it every claim would sort the pending rows`);
  }
  if (groups.includes('dedupe') && !schema.createKeyIndex) {
    throw new ConfigError(`the ${store.dialect.name} store cannot create the key index (its schema support has no createKeyIndex); without it two enqueuers of one key could both insert`);
  }
}

export async function runAll(store: Store, statements: Promise<Statement[]>): Promise<void> {
  for (const statement of await statements) await store.execute(statement);
}

/** What `init` adds beyond the managed table's own columns. */
export interface InitOptions {
  /** Column groups beyond the managed ones (leases, retries, results, delays, dedupe): `priority`, `progress`. */
  with?: readonly ColumnGroup[];
  /** The order the priority index is built for (MigrateOptions.order). */
  order?: Order;
  /** The claim state in a claims table beside the new table instead of its own columns (MigrateOptions.beside). */
  beside?: boolean;
}

/**
 * Creates a statusq-managed table (id, date, status, payload, the optional columns of leases, retries,
 * results, delays and dedupe, and those of `options.with`; the pending index, the key index, and the priority
 * index with a priority column). Running it on an existing table creates nothing and adds whatever of those it lacks.
 */
export async function initTable(store: Store, table = 'jobs', options: InitOptions = {}): Promise<InitReport> {
  validateTableName(table);
  const extra = parseColumnGroups(options.with ?? []);
  const schema = schemaSupportOf(store);
  // An adapter that cannot build the key index gets managed tables without keys, rather than no tables.
  const managedGroups = MANAGED_GROUPS.filter((group) => group !== 'dedupe' || schema.createKeyIndex);
  const groups = [...new Set([...managedGroups, ...extra])];
  assertIndexable(store, schema, extra);
  if (await store.describeTable(table)) {
    const migrated = await migrateTable(store, { table, with: groups, ...(options.order && { order: options.order }), ...(options.beside && { beside: true }) });
    return { table, created: false, migrated };
  }
  const own = columnsOf(groups).filter((column) => !(options.beside && isBesideColumn(column)));
  await runAll(store, schema.createTable(table, [...MANAGED_BASE_COLUMNS, ...own.map(optionalColumn)]));
  if (options.beside) await ensureBesideTable(store, schema, table, (await store.describeTable(table)) ?? [], 'id');
  await ensurePendingIndex(store, schema, table, 'status', 'date');
  if (groups.includes('dedupe')) await ensureKeyIndex(store, schema, table, { statusColumn: 'status', keyColumn: DEFAULT_OPTIONAL_COLUMN_NAMES.dedupeKey, processingCode: resolveStatusCodes(undefined).processing });
  if (groups.includes('priority')) {
    await ensurePriorityIndex(store, schema, table, { statusColumn: 'status', orderColumn: 'date', priorityColumn: DEFAULT_OPTIONAL_COLUMN_NAMES.priority, direction: options.order ?? 'newest' });
  }
  if (groups.includes('dispatch')) await ensureDispatchIndex(store, schema, table, { statusColumn: 'status', orderColumn: 'date', dispatchedColumn: DEFAULT_OPTIONAL_COLUMN_NAMES.dispatchedAt });
  if (groups.includes('kinds')) await ensureKindIndex(store, schema, table, { statusColumn: 'status', orderColumn: 'date', kindColumn: DEFAULT_OPTIONAL_COLUMN_NAMES.kind, processingCode: resolveStatusCodes(undefined).processing });
  if (groups.includes('groups')) await ensureGroupIndex(store, schema, table, { statusColumn: 'status', groupColumn: DEFAULT_OPTIONAL_COLUMN_NAMES.group, processingCode: resolveStatusCodes(undefined).processing });
  await schema.installWakeUps?.(store, table, 'status', groups.includes('await') ? { idColumn: 'id', processingCode: resolveStatusCodes(undefined).processing } : null);
  return { table, created: true, migrated: null };
}

/**
 * Prepares an existing (application) table: adds the status column if missing (every existing row then
 * becomes pending), the chosen optional column groups, and the pending-row index. Data is untouched;
 * running it twice changes nothing the second time.
 */
export async function migrateTable(store: Store, options: MigrateOptions): Promise<MigrateReport> {
  const table = validateTableName(options.table);
  const statusColumn = validateIdentifier(options.statusColumn ?? 'status', 'status column');
  const orderColumn = validateIdentifier(options.orderColumn ?? 'date', 'order column');
  const groups = parseColumnGroups(options.with ?? []);
  const order = options.order ?? 'newest';
  if (order !== 'newest' && order !== 'oldest') throw new ConfigError(`order must be "newest" or "oldest", got ${JSON.stringify(order)}`);
  const schema = schemaSupportOf(store);
  assertIndexable(store, schema, groups);
  const processingCode = resolveStatusCodes(options.statusCodes).processing;
  const columns = await store.describeTable(table);
  if (!columns) throw new SchemaError(`table ${JSON.stringify(table)} does not exist; migrate prepares an existing table (statusq init creates a new one)`);
  const present = new Set(columns.map((c) => c.name.toLowerCase()));
  if (!present.has(orderColumn.toLowerCase())) {
    throw new SchemaError(`table ${JSON.stringify(table)} has no order column ${JSON.stringify(orderColumn)} (columns: ${columns.map((c) => c.name).join(', ')})`);
  }
  // Workers claim by an integer `priority` column whenever the table has one (resolveTable), asked for or not:
  // the index follows the column, so such a claim never sorts.
  const ownPriority = columns.find((c) => c.name.toLowerCase() === DEFAULT_OPTIONAL_COLUMN_NAMES.priority);
  if (ownPriority && !ownPriority.integer && groups.includes('priority')) {
    throw new SchemaError(`table ${JSON.stringify(table)} has a column ${JSON.stringify(ownPriority.name)} of type ${ownPriority.type}; a priority column holds integers`);
  }
  const addedStatus = !present.has(statusColumn.toLowerCase());
  const beside = options.beside === true ? await ensureBesideTable(store, schema, table, columns, options.idColumn ?? 'id') : null;
  if (beside === null) {
    const claimState = columnsOf(groups).filter(isBesideColumn).filter((column) => !present.has(DEFAULT_OPTIONAL_COLUMN_NAMES[column]));
    if (claimState.length > 0 && (await store.describeTable(besideTableName(table)))) {
      throw new ConfigError(
        `table ${JSON.stringify(table)} keeps its claim state in ${besideTableName(table)} (migrate --beside): adding ${claimState.map((column) => DEFAULT_OPTIONAL_COLUMN_NAMES[column]).join(', ')} to the table would give it two; run migrate --beside for those groups`,
      );
    }
  }
  // An application's own kind or group column (kindColumn, groupColumn) stands in for statusq's: it gets the
  // index, and no `kind` or `group_key` is added.
  const ownKindInfo = ownColumnFor(table, columns, groups, options.kindColumn, 'kinds', 'kind');
  if (ownKindInfo?.integer) throw new SchemaError(`table ${JSON.stringify(table)}: kind column ${JSON.stringify(ownKindInfo.name)} is ${ownKindInfo.type}; kinds are names, so it must be a text type (VARCHAR)`);
  const ownGroupInfo = ownColumnFor(table, columns, groups, options.groupColumn, 'groups', 'group');
  const wanted = columnsOf(groups)
    .filter((column) => column !== 'kind' || ownKindInfo === undefined)
    .filter((column) => column !== 'group' || ownGroupInfo === undefined)
    .filter((column) => beside === null || !isBesideColumn(column))
    .map(optionalColumn)
    .filter((c) => !present.has(c.name));
  const added = addedStatus ? [statusColumnSpec(statusColumn), ...wanted] : wanted;
  if (added.length > 0) await runAll(store, schema.addColumns(table, added));
  const createdIndex = await ensurePendingIndex(store, schema, table, statusColumn, orderColumn);
  const priorityColumn = ownPriority?.integer ? ownPriority.name : added.some((c) => c.name === DEFAULT_OPTIONAL_COLUMN_NAMES.priority) ? DEFAULT_OPTIONAL_COLUMN_NAMES.priority : null;
  const createdPriorityIndex = priorityColumn === null ? null : await ensurePriorityIndex(store, schema, table, { statusColumn, orderColumn, priorityColumn, direction: order });
  // A dedupe_key column the table already had gets its index only when asked (--with dedupe): it may be the
  // application's own, holding values that repeat among live rows.
  const keyColumn = groups.includes('dedupe') ? (columns.find((c) => c.name.toLowerCase() === DEFAULT_OPTIONAL_COLUMN_NAMES.dedupeKey)?.name ?? DEFAULT_OPTIONAL_COLUMN_NAMES.dedupeKey) : null;
  const createdKeyIndex = keyColumn === null ? null : await ensureKeyIndex(store, schema, table, { statusColumn, keyColumn, processingCode });
  const dispatchedColumn = groups.includes('dispatch') ? (columns.find((c) => c.name.toLowerCase() === DEFAULT_OPTIONAL_COLUMN_NAMES.dispatchedAt)?.name ?? DEFAULT_OPTIONAL_COLUMN_NAMES.dispatchedAt) : null;
  const createdDispatchIndex = dispatchedColumn === null ? null : await ensureDispatchIndex(store, schema, table, { statusColumn, orderColumn, dispatchedColumn });
  const kindColumn = groups.includes('kinds') ? (ownKindInfo?.name ?? columns.find((c) => c.name.toLowerCase() === DEFAULT_OPTIONAL_COLUMN_NAMES.kind)?.name ?? DEFAULT_OPTIONAL_COLUMN_NAMES.kind) : null;
  const createdKindIndex = kindColumn === null ? null : await ensureKindIndex(store, schema, table, { statusColumn, orderColumn, kindColumn, processingCode });
  const groupColumn = groups.includes('groups') ? (ownGroupInfo?.name ?? columns.find((c) => c.name.toLowerCase() === DEFAULT_OPTIONAL_COLUMN_NAMES.group)?.name ?? DEFAULT_OPTIONAL_COLUMN_NAMES.group) : null;
  const createdGroupIndex = groupColumn === null ? null : await ensureGroupIndex(store, schema, table, { statusColumn, groupColumn, processingCode });
  const idColumn = options.idColumn ?? 'id';
  const settles = groups.includes('await') ? { idColumn: columns.find((c) => c.name.toLowerCase() === idColumn.toLowerCase())?.name ?? null, processingCode } : null;
  await schema.installWakeUps?.(store, table, statusColumn, settles);
  return { table, addedColumns: added.map((c) => c.name), createdIndex, createdPriorityIndex, createdKeyIndex, createdDispatchIndex, createdKindIndex, createdGroupIndex, addedStatus, beside };
}

/** The application's own column named for `group`'s column (MigrateOptions.kindColumn, groupColumn), checked to exist; undefined when none is named. */
function ownColumnFor(table: string, columns: readonly ColumnInfo[], groups: readonly ColumnGroup[], name: string | undefined, group: 'kinds' | 'groups', role: 'kind' | 'group'): ColumnInfo | undefined {
  if (name === undefined) return undefined;
  const own = validateIdentifier(name, `${role} column`);
  if (!groups.includes(group)) throw new ConfigError(`a ${role} column (${own}) is for migrate --with ${group}`);
  const found = columns.find((c) => c.name.toLowerCase() === own.toLowerCase());
  if (!found) throw new SchemaError(`table ${JSON.stringify(table)} has no ${role} column ${JSON.stringify(own)} (columns: ${columns.map((c) => c.name).join(', ')})`);
  return found;
}

/**
 * The claims table of `table` (MigrateOptions.beside), created or completed: keyed by a copy of the table's id
 * (a 64-bit integer for an integer id of any width, text of up to 255 characters for a text id), then every
 * column of BESIDE_COLUMNS. Refused where the table keeps claim state of its own.
 */
async function ensureBesideTable(store: Store, schema: SchemaSupport, table: string, columns: readonly ColumnInfo[], idName: string): Promise<{ table: string; created: boolean; addedColumns: string[] }> {
  validateIdentifier(idName, 'id column');
  const own = BESIDE_COLUMNS.map((key) => DEFAULT_OPTIONAL_COLUMN_NAMES[key]).filter((name) => columns.some((c) => c.name.toLowerCase() === name));
  if (own.length > 0) {
    throw new ConfigError(
      `table ${JSON.stringify(table)} already keeps claim state in columns of its own (${own.join(', ')}): --beside keeps it in a claims table instead, so use one or the other (migrate without --beside, or drop those columns first)`,
    );
  }
  const id = columns.find((c) => c.name.toLowerCase() === idName.toLowerCase());
  if (!id) throw new SchemaError(`table ${JSON.stringify(table)} has no id column ${JSON.stringify(idName)} to key its claims table by (columns: ${columns.map((c) => c.name).join(', ')})`);
  if (!id.unique) throw new SchemaError(`table ${JSON.stringify(table)}: id column ${JSON.stringify(id.name)} is not unique, so it cannot key a claims table`);
  const textId = /char|text|string/.test(id.type);
  if (!id.integer && !textId) {
    throw new ConfigError(`table ${JSON.stringify(table)}: its id column ${JSON.stringify(id.name)} is ${id.type}; a claims table is kept for integer and text ids only`);
  }
  const name = besideTableName(table);
  const specs: ColumnSpec[] = [{ name: id.name, kind: id.integer ? 'bigInteger' : 'token', nullable: false, primaryKey: true }, ...BESIDE_COLUMNS.map(optionalColumn)];
  const existing = await store.describeTable(name);
  if (existing === null) {
    try {
      await runAll(store, schema.createTable(name, specs));
    } catch (error) {
      // Two migrations at once: the one that lost finds the table made.
      if (!(error instanceof StoreError) || !(await store.describeTable(name))) throw error;
    }
    return { table: name, created: true, addedColumns: [] };
  }
  const have = new Set(existing.map((c) => c.name.toLowerCase()));
  if (!have.has(id.name.toLowerCase())) throw new SchemaError(`claims table ${name} exists without the key column ${JSON.stringify(id.name)}; drop it and migrate again`);
  const missing = specs.filter((spec) => !have.has(spec.name.toLowerCase()));
  if (missing.length > 0) await runAll(store, schema.addColumns(name, missing));
  return { table: name, created: false, addedColumns: missing.map((c) => c.name) };
}

async function ensureKeyIndex(store: Store, schema: SchemaSupport, table: string, spec: Omit<KeyIndexSpec, 'name'>): Promise<string | null> {
  if (!schema.createKeyIndex) return null;
  const name = keyIndexName(table);
  if (await hasIndex(store, schema, table, name)) return null;
  try {
    await runAll(store, schema.createKeyIndex(table, { name, ...spec }));
  } catch (error) {
    if (!(error instanceof StoreError) || error.kind !== 'UniqueViolation') throw error;
    throw new SchemaError(
      `table ${JSON.stringify(table)}: two or more pending or processing rows share a value of ${spec.keyColumn}, so the key index cannot be made unique; let them finish or clear their keys, then migrate again (${error.message})`,
      { cause: error },
    );
  }
  return name;
}

/** Whether `table` has an index called `name` (index names compare without case, as some servers' do). */
export async function hasIndex(store: Store, schema: SchemaSupport, table: string, name: string): Promise<boolean> {
  const { rows } = await store.execute(schema.indexNames(...splitTableName(table)));
  return rows.some((r) => String(r.name).toLowerCase() === name.toLowerCase());
}

/**
 * Creates the index `name` on `table` with `create` unless the table has it; null when it had it, or when the
 * store cannot build that index (`create` absent). A store without the relay's index still relays, and one
 * without the kind index still claims by kind, each reading the pending index instead.
 */
async function ensureIndex<Spec extends { name: string }>(
  store: Store,
  schema: SchemaSupport,
  table: string,
  spec: Spec,
  create: ((table: string, spec: Spec) => Promise<Statement[]>) | undefined,
): Promise<string | null> {
  if (!create) return null;
  if (await hasIndex(store, schema, table, spec.name)) return null;
  await runAll(store, create.call(schema, table, spec));
  return spec.name;
}

const ensureDispatchIndex = (store: Store, schema: SchemaSupport, table: string, spec: Omit<DispatchIndexSpec, 'name'>) =>
  ensureIndex(store, schema, table, { name: dispatchIndexName(table), ...spec }, schema.createDispatchIndex);

const ensureKindIndex = (store: Store, schema: SchemaSupport, table: string, spec: Omit<KindIndexSpec, 'name'>) =>
  ensureIndex(store, schema, table, { name: kindIndexName(table), ...spec }, schema.createKindIndex);

const ensureGroupIndex = (store: Store, schema: SchemaSupport, table: string, spec: Omit<GroupIndexSpec, 'name'>) =>
  ensureIndex(store, schema, table, { name: groupIndexName(table), ...spec }, schema.createGroupIndex);

const ensurePriorityIndex = (store: Store, schema: SchemaSupport, table: string, spec: Omit<PriorityIndexSpec, 'name'>) =>
  ensureIndex(store, schema, table, { name: priorityIndexName(table), ...spec }, schema.createPriorityIndex);

const ensurePendingIndex = (store: Store, schema: SchemaSupport, table: string, statusColumn: string, orderColumn: string) =>
  ensureIndex(store, schema, table, { name: pendingIndexName(table), statusColumn, orderColumn }, schema.createPendingIndex);
