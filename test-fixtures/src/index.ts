/**
 * Fixtures shared by the conformance suite, the demo and the benchmark: the seed's `table_a` per dialect,
 * a deterministic row generator with poison and abuse rows mixed in, and plain `.mjs` handlers in
 * `handlers/` that import nothing from statusq.
 */
import { fileURLToPath } from 'node:url';

export type FixtureDialect = 'sqlite' | 'postgres' | 'mysql';

/**
 * The seed's application table: business rows with a `date` and a `status` column. `kind` drives the
 * fixture handlers: `ok` succeeds, `poison` always throws, `abuse` is judged abusive, `flaky` fails its
 * first attempt only.
 */
export function tableASchema(dialect: FixtureDialect, table = 'table_a'): string[] {
  switch (dialect) {
    case 'sqlite':
      return [
        `CREATE TABLE "${table}" (id INTEGER PRIMARY KEY, date TEXT NOT NULL, url TEXT NOT NULL, kind TEXT NOT NULL, status INTEGER NULL)`,
        `CREATE INDEX "${table}_status_date" ON "${table}" (status, date)`,
      ];
    case 'postgres':
      return [
        `CREATE TABLE "${table}" (id BIGINT PRIMARY KEY, date TIMESTAMPTZ(3) NOT NULL, url TEXT NOT NULL, kind TEXT NOT NULL, status SMALLINT NULL)`,
        `CREATE INDEX "${table}_pending" ON "${table}" (date) WHERE status IS NULL`,
      ];
    case 'mysql':
      return [
        `CREATE TABLE \`${table}\` (id BIGINT PRIMARY KEY, date DATETIME(3) NOT NULL, url VARCHAR(255) NOT NULL, kind VARCHAR(16) NOT NULL, status TINYINT NULL, INDEX \`${table}_status_date\` (status, date)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
      ];
  }
}

/**
 * Tables the start-up checks must judge, in each dialect's own DDL. Every one has `id`, `date` and `status`
 * (and `k` where the key is wider than id); rows go in with `(id, k, date)` or `(id, date)`.
 * - sharedId: PRIMARY KEY (id, k), so two rows may share an id: refused.
 * - uniqueId: the same key plus a unique index on id alone: accepted.
 * - partialUniqueId: the same key plus a unique index on id that covers only some rows (SQLite and
 *   PostgreSQL; MySQL has no partial index, so null there): refused.
 * - textStatus: a VARCHAR status column: refused.
 * - untypedStatus: a status column declared without a type, which SQLite allows and which keeps the
 *   integers statusq writes (null elsewhere): accepted.
 * - bounded: payload, result and last_error of bounded size (VARCHAR(10), VARCHAR(10), VARCHAR(20); SQLite
 *   does not enforce the size), and an id and a date the database fills, for enqueue: accepted, with the bounds reported.
 */
export type CheckedTable = 'sharedId' | 'uniqueId' | 'partialUniqueId' | 'textStatus' | 'untypedStatus' | 'bounded';

export function checkedTableSchema(dialect: FixtureDialect, kind: CheckedTable, table = kind.toLowerCase()): string[] | null {
  const q = dialect === 'mysql' ? (n: string) => `\`${n}\`` : (n: string) => `"${n}"`;
  const [bigint, serial, time, now, small, tail] =
    dialect === 'sqlite'
      ? ['INTEGER', 'INTEGER PRIMARY KEY', 'TEXT', `(strftime('%Y-%m-%d %H:%M:%f', 'now'))`, 'INTEGER', '']
      : dialect === 'postgres'
        ? ['BIGINT', 'BIGSERIAL PRIMARY KEY', 'TIMESTAMPTZ(3)', 'now()', 'SMALLINT', '']
        : ['BIGINT', 'BIGINT AUTO_INCREMENT PRIMARY KEY', 'DATETIME(3)', 'CURRENT_TIMESTAMP(3)', 'TINYINT', ' ENGINE=InnoDB DEFAULT CHARSET=utf8mb4'];
  const pair = `CREATE TABLE ${q(table)} (id ${bigint} NOT NULL, k ${small} NOT NULL, date ${time} NOT NULL, status ${small} NULL, PRIMARY KEY (id, k))${tail}`;
  switch (kind) {
    case 'sharedId':
      return [pair];
    case 'uniqueId':
      return [pair, `CREATE UNIQUE INDEX ${q(`${table}_id`)} ON ${q(table)} (id)`];
    case 'partialUniqueId':
      return dialect === 'mysql' ? null : [pair, `CREATE UNIQUE INDEX ${q(`${table}_id`)} ON ${q(table)} (id) WHERE k = 1`];
    case 'textStatus':
      return [`CREATE TABLE ${q(table)} (id ${bigint} PRIMARY KEY, date ${time} NOT NULL, status VARCHAR(8) NULL)${tail}`];
    case 'untypedStatus':
      return dialect === 'sqlite' ? [`CREATE TABLE ${q(table)} (id INTEGER PRIMARY KEY, date TEXT NOT NULL, status)`] : null;
    case 'bounded':
      return [
        `CREATE TABLE ${q(table)} (id ${serial}, date ${time} NOT NULL DEFAULT ${now}, status ${small} NULL, payload VARCHAR(10) NULL, result VARCHAR(10) NULL, last_error VARCHAR(20) NULL)${tail}`,
      ];
  }
}

export type RowKind = 'ok' | 'poison' | 'abuse' | 'flaky';

export interface TableARow {
  id: number;
  /** SQLite's text format 'YYYY-MM-DD HH:MM:SS.SSS' (UTC), which also parses on PostgreSQL and MySQL. */
  date: string;
  url: string;
  kind: RowKind;
}

export interface GenerateOptions {
  /** Every n-th row is poison (always throws). 0 for none. Default 50. */
  poisonEvery?: number;
  /** Every n-th row (offset by one) is abusive. 0 for none. Default 40. */
  abuseEvery?: number;
  /** Every n-th row (offset by two) fails its first attempt only. 0 for none. Default 0. */
  flakyEvery?: number;
  /** Newest row's time; rows go back one second each. Default now. */
  newest?: Date;
  firstId?: number;
}

export function formatSqliteTime(date: Date): string {
  return date.toISOString().replace('T', ' ').replace('Z', '');
}

/** Deterministic rows: the same options always give the same rows. */
export function generateTableARows(count: number, options: GenerateOptions = {}): TableARow[] {
  const poisonEvery = options.poisonEvery ?? 50;
  const abuseEvery = options.abuseEvery ?? 40;
  const flakyEvery = options.flakyEvery ?? 0;
  const newest = (options.newest ?? new Date()).getTime();
  const firstId = options.firstId ?? 1;
  const rows: TableARow[] = [];
  for (let i = 0; i < count; i++) {
    const id = firstId + i;
    let kind: RowKind = 'ok';
    if (poisonEvery > 0 && id % poisonEvery === 0) kind = 'poison';
    else if (abuseEvery > 0 && id % abuseEvery === 1) kind = 'abuse';
    else if (flakyEvery > 0 && id % flakyEvery === 2) kind = 'flaky';
    rows.push({ id, date: formatSqliteTime(new Date(newest - (count - i) * 1000)), url: `https://example.test/item/${id}`, kind });
  }
  return rows;
}

/** Expected terminal status name of a row of this kind, given whether retries are on. */
export function expectedStatus(kind: RowKind, retries: boolean): 'done' | 'abuse' | 'failed' {
  if (kind === 'poison') return 'failed';
  if (kind === 'abuse') return 'abuse';
  if (kind === 'flaky') return retries ? 'done' : 'failed';
  return 'done';
}

/** Absolute path of a fixture handler in `handlers/`. */
export function handlerPath(name: 'table-a.mjs' | 'noop.mjs' | 'no-default.mjs' | 'not-a-function.mjs'): string {
  return fileURLToPath(new URL(`../handlers/${name}`, import.meta.url));
}
