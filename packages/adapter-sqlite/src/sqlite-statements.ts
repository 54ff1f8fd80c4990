import type { ExecResult, Row, SqlParam } from '@statusq/core/adapter';

/** The part of a better-sqlite3 statement runPrepared uses (the application's own copy of the driver may differ). */
export interface PreparedSqlite {
  readonly reader: boolean;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number };
}

/** Runs a prepared statement; RETURNING statements report their rows as affected. */
export function runPrepared(prepared: PreparedSqlite, params: readonly SqlParam[]): ExecResult {
  if (prepared.reader) {
    const rows = prepared.all(...params) as Row[];
    return { rows, affected: rows.length };
  }
  return { rows: [], affected: prepared.run(...params).changes };
}

/** The part of a better-sqlite3 statement the store's own cache uses: readers switch to arrays. */
export interface RawCapableSqlite extends PreparedSqlite {
  raw(toggle: boolean): unknown;
  columns(): Array<{ name: string }>;
}

/**
 * One of the store's own prepared statements. A reader whose column names are all plain runs in raw mode
 * (rows as arrays) and its row objects are built here by a function made for its column list (rowBuilder).
 * better-sqlite3 builds each row object in C++ one property at a time: measured on a managed table's 11
 * columns, 256 rows a call, 1.96 us a row with all(), 1.07 us with raw() and a loop assigning the names one
 * by one, and about 0.1 us with raw() and the built function, which a SQLite worker pays for every claimed
 * row (RETURNING *).
 *
 * The names are read again whenever the schema changed (PRAGMA schema_version, about 0.1 us): SQLite
 * prepares a statement again after ALTER TABLE, so `SELECT *` can gain, lose or rename columns, and the
 * statement's names are only current once it has run (checked on better-sqlite3 12).
 */
export interface CachedSqlite {
  readonly prepared: PreparedSqlite;
  /** The reader's column names in raw mode; null for a writer. */
  columns: readonly string[] | null;
  /** Builds one row object from the raw values, for `columns`. */
  build: RowBuilder;
  /** The schema_version the names were read under. */
  schemaVersion: number;
}

/** Reads the database's schema_version (a prepared `PRAGMA schema_version`, plucked). */
export type SchemaVersion = () => number;

type RowBuilder = (values: readonly unknown[]) => Row;

const unused: RowBuilder = () => ({});

/**
 * A function returning `{ "name0": values[0], "name1": values[1], ... }` for these names, made with the
 * Function constructor: an object literal of known keys gets one hidden class that V8 creates in one step,
 * where assigning computed keys one at a time is a megamorphic store per property (about 15 ns a row
 * against 150 ns for 11 columns, measured on Node 20). Each name enters the source only as a JSON string
 * literal. A `"__proto__": v` entry (or an assignment to it) would set the prototype instead of a column, so
 * that name alone is written as a computed key, which defines an own property like any other; where code
 * generation is disallowed (`--disallow-code-generation-from-strings`) Object.fromEntries does the same.
 */
export function rowBuilder(columns: readonly string[]): RowBuilder {
  const entry = (name: string, i: number) => `${name === '__proto__' ? `[${JSON.stringify(name)}]` : JSON.stringify(name)}: values[${i}]`;
  try {
    return new Function('values', `return { ${columns.map(entry).join(', ')} };`) as RowBuilder;
  } catch {
    return (values) => Object.fromEntries(columns.map((name, c) => [name, values[c]]));
  }
}

export function cacheable(prepared: RawCapableSqlite, schemaVersion: SchemaVersion): CachedSqlite {
  if (!prepared.reader) return { prepared, columns: null, build: unused, schemaVersion: 0 };
  const version = schemaVersion();
  const columns = prepared.columns().map((c) => c.name);
  prepared.raw(true);
  return { prepared, columns, build: rowBuilder(columns), schemaVersion: version };
}

/** runPrepared for the store's own statements (see CachedSqlite). */
export function runCached(cached: CachedSqlite, params: readonly SqlParam[], schemaVersion: SchemaVersion): ExecResult {
  if (cached.columns === null) return runPrepared(cached.prepared, params);
  const version = schemaVersion();
  const arrays = cached.prepared.all(...params) as unknown[][];
  if (version !== cached.schemaVersion || (arrays.length > 0 && arrays[0]!.length !== cached.columns.length)) {
    const columns = (cached.prepared as RawCapableSqlite).columns().map((c) => c.name);
    cached.columns = columns;
    cached.build = rowBuilder(columns);
    cached.schemaVersion = version;
  }
  const rows: Row[] = new Array(arrays.length);
  for (let r = 0; r < arrays.length; r++) rows[r] = cached.build(arrays[r]!);
  return { rows, affected: rows.length };
}
