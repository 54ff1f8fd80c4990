import { ConfigError, SchemaError } from './errors.js';
import { derivedName, splitTableName, validateIdentifier, validateTableName } from './identifiers.js';
import type { ColumnSpec, SchemaSupport, Statement, Store } from './store.js';
import { DEFAULT_OPTIONAL_COLUMN_NAMES, type OptionalColumn } from './table.js';

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
} as const satisfies Record<string, readonly OptionalColumn[]>;

export type ColumnGroup = keyof typeof COLUMN_GROUPS;

/** The smallest group that adds `column`: what an error about its absence tells the user to migrate with. */
export function columnGroupOf(column: OptionalColumn): ColumnGroup {
  const groups = Object.entries(COLUMN_GROUPS) as Array<[ColumnGroup, readonly OptionalColumn[]]>;
  return groups.filter(([, columns]) => columns.includes(column)).sort((a, b) => a[1].length - b[1].length)[0]![0];
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
}

export interface MigrateReport {
  table: string;
  /** Columns added, by name; empty when the table already had them all. */
  addedColumns: string[];
  /** Name of the pending-row index created, or null when it existed. */
  createdIndex: string | null;
  /** True when the status column itself was added: every existing row is now pending. */
  addedStatus: boolean;
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

const OPTIONAL_COLUMN_SPECS: Readonly<Record<OptionalColumn, Omit<ColumnSpec, 'name'>>> = {
  claimedAt: { kind: 'time', nullable: true },
  workerId: { kind: 'token', nullable: true },
  attemptCount: { kind: 'integer', nullable: false, default: 0 },
  nextAttemptAt: { kind: 'time', nullable: true },
  lastError: { kind: 'text', nullable: true },
  payload: { kind: 'longText', nullable: true },
  result: { kind: 'longText', nullable: true },
  finishedAt: { kind: 'time', nullable: true },
};

const optionalColumn = (column: OptionalColumn): ColumnSpec => ({ name: DEFAULT_OPTIONAL_COLUMN_NAMES[column], ...OPTIONAL_COLUMN_SPECS[column] });
/** Null is pending: a status column added to a table with rows makes every row pending. */
const statusColumnSpec = (name: string): ColumnSpec => ({ name, kind: 'integer', nullable: true });

/** A managed table: the seed's id, date and status, a payload, and every optional column group. */
const MANAGED_COLUMNS: readonly ColumnSpec[] = [
  { name: 'id', kind: 'serialKey', nullable: false },
  { name: 'date', kind: 'time', nullable: false, default: 'now' },
  statusColumnSpec('status'),
  optionalColumn('payload'),
  ...[...new Set(Object.values(COLUMN_GROUPS).flat())].map(optionalColumn),
];

function schemaSupportOf(store: Store): SchemaSupport {
  if (!store.schema) throw new ConfigError(`the ${store.dialect.name} store cannot create or change tables (it has no schema support); create the table yourself`);
  return store.schema;
}

async function runAll(store: Store, statements: Promise<Statement[]>): Promise<void> {
  for (const statement of await statements) await store.execute(statement);
}

/**
 * Creates a statusq-managed table (id, date, status, payload, every optional column, the pending index).
 * Running it on an existing table creates nothing and adds whatever optional columns it lacks.
 */
export async function initTable(store: Store, table = 'jobs'): Promise<InitReport> {
  validateTableName(table);
  const schema = schemaSupportOf(store);
  if (await store.describeTable(table)) {
    const migrated = await migrateTable(store, { table, with: Object.keys(COLUMN_GROUPS) as ColumnGroup[] });
    return { table, created: false, migrated };
  }
  await runAll(store, schema.createTable(table, MANAGED_COLUMNS));
  await ensurePendingIndex(store, schema, table, 'status', 'date');
  await schema.installWakeUps?.(store, table, 'status');
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
  const schema = schemaSupportOf(store);
  const columns = await store.describeTable(table);
  if (!columns) throw new SchemaError(`table ${JSON.stringify(table)} does not exist; migrate prepares an existing table (statusq init creates a new one)`);
  const present = new Set(columns.map((c) => c.name.toLowerCase()));
  if (!present.has(orderColumn.toLowerCase())) {
    throw new SchemaError(`table ${JSON.stringify(table)} has no order column ${JSON.stringify(orderColumn)} (columns: ${columns.map((c) => c.name).join(', ')})`);
  }
  const addedStatus = !present.has(statusColumn.toLowerCase());
  // Groups may share a column (delays is part of retries): each is added once.
  const wanted = [...new Set(groups.flatMap((g) => COLUMN_GROUPS[g]))].map(optionalColumn).filter((c) => !present.has(c.name));
  const added = addedStatus ? [statusColumnSpec(statusColumn), ...wanted] : wanted;
  if (added.length > 0) await runAll(store, schema.addColumns(table, added));
  const createdIndex = await ensurePendingIndex(store, schema, table, statusColumn, orderColumn);
  await schema.installWakeUps?.(store, table, statusColumn);
  return { table, addedColumns: added.map((c) => c.name), createdIndex, addedStatus };
}

async function ensurePendingIndex(store: Store, schema: SchemaSupport, table: string, statusColumn: string, orderColumn: string): Promise<string | null> {
  const name = pendingIndexName(table);
  const { rows } = await store.execute(schema.indexNames(...splitTableName(table)));
  if (rows.some((r) => String(r.name).toLowerCase() === name.toLowerCase())) return null;
  await runAll(store, schema.createPendingIndex(table, { name, statusColumn, orderColumn }));
  return name;
}
