import knexFactory, { type Knex } from 'knex';
import {
  ConfigError,
  DEFAULT_OPTIONAL_COLUMN_NAMES,
  SchemaError,
  validateIdentifier,
  validateTableName,
  type OptionalColumn,
  type Store,
} from '@statusq/core/adapter';
import { ddlFor, type DialectDdl } from './dialect-ddl.js';

/** Column groups `migrate --with` adds to an existing table. */
export const COLUMN_GROUPS = {
  /** claimed_at + worker_id: crashed workers' rows return to the queue; a taken-over worker is fenced out. */
  leases: ['claimedAt', 'workerId'],
  /** attempt_count + next_attempt_at + last_error: retries with backoff, and the failure reason. */
  retries: ['attemptCount', 'nextAttemptAt', 'lastError'],
  /** result + finished_at: what the handler returned and when the job ended. */
  results: ['result', 'finishedAt'],
} as const satisfies Record<string, readonly OptionalColumn[]>;

export type ColumnGroup = keyof typeof COLUMN_GROUPS;

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

function ddlKnex(ddl: DialectDdl): Knex {
  return knexFactory({ client: ddl.knexClient, useNullAsDefault: true });
}

/** Index names must be valid identifiers too; long table names are shortened with a stable hash. */
export function pendingIndexName(table: string): string {
  const base = `${table.replace('.', '_')}_statusq_pending`;
  if (base.length <= 63) return base;
  let hash = 0;
  for (const ch of table) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return `${base.slice(0, 50)}_${hash.toString(36)}`;
}

async function runAll(store: Store, statements: Array<{ sql: string; bindings: readonly unknown[] }>): Promise<void> {
  for (const s of statements) await store.execute({ sql: s.sql, params: s.bindings as never[] });
}

function addOptionalColumn(t: Knex.CreateTableBuilder | Knex.AlterTableBuilder, column: OptionalColumn, ddl: DialectDdl, knex: Knex): void {
  const name = DEFAULT_OPTIONAL_COLUMN_NAMES[column];
  switch (column) {
    case 'claimedAt':
    case 'nextAttemptAt':
    case 'finishedAt':
      ddl.timeColumn(t, name, knex).nullable();
      break;
    case 'workerId':
      t.string(name, 255).nullable();
      break;
    case 'attemptCount':
      t.integer(name).notNullable().defaultTo(0);
      break;
    case 'lastError':
      // MAX_ERROR_LENGTH characters take at most 6000 bytes in utf8mb4: MySQL's TEXT (65535 bytes) holds them.
      t.text(name).nullable();
      break;
    case 'payload':
    case 'result':
      // Any JSON text: LONGTEXT on MySQL (TEXT stops at 64 KB there), not JSON, which would re-serialise it
      // (MySQL reorders keys); the other dialects' text ignores the size.
      t.text(name, 'longtext').nullable();
      break;
  }
}

/**
 * Creates a statusq-managed table (id, date, status, payload, every optional column, the pending index).
 * Running it on an existing table creates nothing and adds whatever optional columns it lacks.
 */
export async function initTable(store: Store, table = 'jobs'): Promise<InitReport> {
  validateTableName(table);
  const ddl = ddlFor(store);
  if (await store.describeTable(table)) {
    const migrated = await migrateTable(store, { table, with: Object.keys(COLUMN_GROUPS) as ColumnGroup[] });
    return { table, created: false, migrated };
  }
  const knex = ddlKnex(ddl);
  const builder = knex.schema.createTable(table, (t) => {
    t.bigIncrements('id');
    ddl.timeColumn(t, 'date', knex).notNullable().defaultTo(ddl.nowDefault(knex));
    t.integer('status').nullable();
    addOptionalColumn(t, 'payload', ddl, knex);
    for (const group of Object.values(COLUMN_GROUPS)) for (const column of group) addOptionalColumn(t, column, ddl, knex);
  });
  await runAll(store, builder.toSQL());
  await ensurePendingIndex(store, ddl, knex, table, 'status', 'date');
  await ddl.notifyTrigger?.(store, table, 'status');
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
  const ddl = ddlFor(store);
  const columns = await store.describeTable(table);
  if (!columns) throw new SchemaError(`table ${JSON.stringify(table)} does not exist; migrate prepares an existing table (statusq init creates a new one)`);
  const present = new Set(columns.map((c) => c.name.toLowerCase()));
  if (!present.has(orderColumn.toLowerCase())) {
    throw new SchemaError(`table ${JSON.stringify(table)} has no order column ${JSON.stringify(orderColumn)} (columns: ${columns.map((c) => c.name).join(', ')})`);
  }
  const knex = ddlKnex(ddl);
  const wanted = groups.flatMap((g) => COLUMN_GROUPS[g]).filter((c) => !present.has(DEFAULT_OPTIONAL_COLUMN_NAMES[c]));
  const addedStatus = !present.has(statusColumn.toLowerCase());
  const addedColumns: string[] = [];
  if (addedStatus || wanted.length > 0) {
    const builder = knex.schema.alterTable(table, (t) => {
      if (addedStatus) t.integer(statusColumn).nullable();
      for (const column of wanted) addOptionalColumn(t, column, ddl, knex);
    });
    await runAll(store, builder.toSQL());
    if (addedStatus) addedColumns.push(statusColumn);
    addedColumns.push(...wanted.map((c) => DEFAULT_OPTIONAL_COLUMN_NAMES[c]));
  }
  const createdIndex = await ensurePendingIndex(store, ddl, knex, table, statusColumn, orderColumn);
  await ddl.notifyTrigger?.(store, table, statusColumn);
  return { table, addedColumns, createdIndex, addedStatus };
}

async function ensurePendingIndex(store: Store, ddl: DialectDdl, knex: Knex, table: string, statusColumn: string, orderColumn: string): Promise<string | null> {
  const name = pendingIndexName(table);
  const existing = await ddl.listIndexes(store, table);
  if (existing.some((n) => n.toLowerCase() === name.toLowerCase())) return null;
  const builder = knex.schema.alterTable(table, (t) => {
    if (ddl.pendingIndex === 'partial') t.index([orderColumn], name, { predicate: knex.whereNull(statusColumn) });
    else t.index([statusColumn, orderColumn], name);
  });
  await runAll(store, builder.toSQL());
  return name;
}
