/**
 * The databases a bench run uses: one SQLite file, and a database named `statusq_bench` on the local
 * PostgreSQL and MariaDB/MySQL servers (created when missing). Every scenario makes its own table through
 * `statusq init` (what a user gets), fills it with one INSERT ... SELECT per chunk, and drops it afterwards.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as mysqlAdapter from '@statusq/adapter-mysql';
import * as postgresAdapter from '@statusq/adapter-postgres';
import { adminUrl as postgresAdminUrl, databaseUrl } from '@statusq/adapter-postgres/testing';
import * as sqliteAdapter from '@statusq/adapter-sqlite';
import { initTable, type Store } from '@statusq/core';
import { besideTableName, pendingIndexName, validateTableName } from '@statusq/core/tools';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { assertLocalUrl } from './limits.js';

export type Dialect = 'sqlite' | 'postgres' | 'mysql';
export const DIALECTS: readonly Dialect[] = ['sqlite', 'postgres', 'mysql'];

export const BENCH_DATABASE = 'statusq_bench';
const DEFAULT_MYSQL_URL = 'mysql://root@127.0.0.1:3306/test';

/** Rows per INSERT ... SELECT: big enough to load 10 million rows in minutes, small enough for one undo log. */
const FILL_CHUNK = 500_000;

export interface FillCounts {
  /** Rows left pending (status NULL), newest last so the newest-first claim starts at the top. */
  pending: number;
  /** Rows already done (status 1), older than every pending row: an application table's history. */
  finished: number;
  /** How much older than the pending rows the finished ones are (default 0: right before them). */
  finishedAgoMs?: number;
}

export interface TableOptions {
  /** A priority column (and its index) whose values run 0 .. levels-1 by id, mixed. */
  priorityLevels?: number;
  /** The dispatch column (`--with dispatch`) a relay and broker consumers need; the filled rows are not dispatched yet. */
  dispatch?: boolean;
  /** The claim state in a claims table beside the table (`migrate --beside`) instead of its own columns. */
  beside?: boolean;
  /** A kind column (`--with kinds`) whose values run '0' .. kinds-1 by id, mixed. */
  kinds?: number;
  /** A group column (`--with groups`) whose values run '0' .. groups-1 by id, mixed. */
  groups?: number;
  /** The settle wake-up for waitFor (`--with await`), where the store's wake-ups are triggers. */
  await?: boolean;
}

export interface BenchDatabase {
  readonly dialect: Dialect;
  /** What workers connect with (the URL the CLI would take). */
  readonly url: string;
  connect(options?: ConnectionOptions): Promise<Store>;
  /** A fresh managed table (`statusq init`) holding `counts` rows, with fresh planner statistics. */
  createTable(table: string, counts: FillCounts, options?: TableOptions): Promise<void>;
  /** Adds `count` more pending rows, newer than every row there. */
  addPending(table: string, count: number): Promise<void>;
  /** Adds `count` pending rows newer than every row there, not due for `delayMs` (next_attempt_at, the database's clock). */
  addDelayed(table: string, count: number, delayMs: number): Promise<void>;
  dropPendingIndex(table: string): Promise<void>;
  dropTable(table: string): Promise<void>;
  /** Server and version, for the report. */
  version(): Promise<string>;
  close(): Promise<void>;
}

/** Opens the bench database of `dialect`, creating it when missing. */
export async function openBenchDatabase(dialect: Dialect): Promise<BenchDatabase> {
  switch (dialect) {
    case 'sqlite':
      return SqliteBench.open();
    case 'postgres':
      return PostgresBench.open(postgresAdminUrl());
    case 'mysql':
      return MysqlBench.open(process.env.STATUSQ_MYSQL_URL || DEFAULT_MYSQL_URL);
  }
}

/** The bench database on a server given by its administrator URL (a scale run's own database host), created when missing. */
export function openBenchDatabaseAt(dialect: 'postgres' | 'mysql', adminUrl: string): Promise<BenchDatabase> {
  return dialect === 'postgres' ? PostgresBench.open(adminUrl) : MysqlBench.open(adminUrl);
}

/** The PostgreSQL bench database's URL (the peers run there too), created when missing. */
export async function postgresBenchUrl(): Promise<string> {
  return PostgresBench.ensureDatabase(postgresAdminUrl());
}

export interface ConnectionOptions {
  /** The store's own wake-up (default true): PostgreSQL LISTEN/NOTIFY, MySQL's idle probe; off means polling only. */
  listen?: boolean;
  /** Most pooled connections the store may open (maxConnections on every server adapter). */
  connections?: number;
}

/** A store on `url` (127.0.0.1 only). */
export function connectUrl(dialect: Dialect, url: string, options: ConnectionOptions = {}): Promise<Store> {
  assertLocalUrl(url);
  switch (dialect) {
    case 'sqlite':
      return sqliteAdapter.connect(url);
    case 'postgres':
      return postgresAdapter.connect(url, { listen: options.listen ?? true, ...(options.connections && { maxConnections: options.connections }) });
    case 'mysql':
      return mysqlAdapter.connect(url, { ...(options.listen === false && { idleProbeMs: 0 }), ...(options.connections && { maxConnections: options.connections }) });
  }
}

/** Splits `total` into FILL_CHUNK-sized [offset, count) pieces. */
function chunks(total: number): Array<[number, number]> {
  const pieces: Array<[number, number]> = [];
  for (let offset = 0; offset < total; offset += FILL_CHUNK) pieces.push([offset, Math.min(FILL_CHUNK, total - offset)]);
  return pieces;
}

/**
 * Shared shape of the three: a store for DDL and fills, and a per-dialect INSERT ... SELECT. Rows are dated
 * one millisecond apart counting back from `newestMs`, finished rows before pending ones.
 */
abstract class BaseBench implements BenchDatabase {
  abstract readonly dialect: Dialect;
  protected constructor(
    readonly url: string,
    protected readonly admin: Store,
  ) {}

  connect(options: ConnectionOptions = {}): Promise<Store> {
    return connectUrl(this.dialect, this.url, options);
  }

  abstract version(): Promise<string>;
  /** Inserts `count` rows with `status` (null = pending), dated `endMs - offset - i` ms for i in [1, count]. */
  protected abstract fill(table: string, count: number, status: 1 | null, endMs: number): Promise<void>;
  protected abstract analyze(table: string): Promise<void>;

  private nextEndMs = new Map<string, number>();

  async createTable(table: string, counts: FillCounts, options: TableOptions = {}): Promise<void> {
    validateTableName(table);
    await this.dropTable(table);
    const groups = [
      ...(options.priorityLevels ? (['priority'] as const) : []),
      ...(options.dispatch ? (['dispatch'] as const) : []),
      ...(options.kinds ? (['kinds'] as const) : []),
      ...(options.groups ? (['groups'] as const) : []),
      ...(options.await ? (['await'] as const) : []),
    ];
    await initTable(this.admin, table, { ...(groups.length > 0 && { with: groups }), ...(options.beside && { beside: true }) });
    // Finished rows are older than pending ones: the claim's newest-first walk meets pending rows first
    // only because of the pending index, not because the history happens to sit behind them.
    const now = Date.now();
    const finishedEnd = now - counts.pending - 1 - (counts.finishedAgoMs ?? 0);
    for (const [offset, count] of chunks(counts.finished)) await this.fill(table, count, 1, finishedEnd - offset);
    for (const [offset, count] of chunks(counts.pending)) await this.fill(table, count, null, now - offset);
    // Spread by id, so every value is mixed through the queue order. An integer into a text column is an
    // assignment every dialect converts ('0', '1', ...): digits are valid kinds and groups.
    const spread = { priority: options.priorityLevels, kind: options.kinds, group_key: options.groups };
    for (const [column, values] of Object.entries(spread)) {
      if (!values) continue;
      const q = (name: string) => this.admin.dialect.quoteIdentifier(name);
      await this.admin.execute({ sql: `UPDATE ${q(table)} SET ${q(column)} = ${q('id')} % ${Math.floor(values)}`, params: [] });
    }
    this.nextEndMs.set(table, now);
    await this.analyze(table);
  }

  async addPending(table: string, count: number): Promise<void> {
    const end = Math.max(Date.now(), (this.nextEndMs.get(table) ?? 0) + count);
    await this.fill(table, count, null, end);
    this.nextEndMs.set(table, end);
  }

  async addDelayed(table: string, count: number, delayMs: number): Promise<void> {
    if (count === 0) return;
    const d = this.admin.dialect;
    const q = (name: string) => d.quoteIdentifier(name);
    const { rows } = await this.admin.execute({ sql: `SELECT MAX(${q('id')}) AS id FROM ${q(table)}`, params: [] });
    const last = Number(rows[0]?.id ?? 0);
    for (const [, n] of chunks(count)) await this.addPending(table, n);
    await this.admin.execute({ sql: `UPDATE ${q(table)} SET ${q('next_attempt_at')} = ${d.nowPlusMs(d.placeholder(1))} WHERE ${q('id')} > ${d.placeholder(2)}`, params: [delayMs, last] });
    await this.analyze(table);
  }

  async dropPendingIndex(table: string): Promise<void> {
    const q = this.admin.dialect.quoteIdentifier(pendingIndexName(table));
    await this.admin.execute({ sql: this.dialect === 'mysql' ? `DROP INDEX ${q} ON ${this.admin.dialect.quoteIdentifier(table)}` : `DROP INDEX ${q}`, params: [] });
    await this.analyze(table);
  }

  async dropTable(table: string): Promise<void> {
    for (const name of [validateTableName(table), besideTableName(table)]) await this.admin.execute({ sql: `DROP TABLE IF EXISTS ${this.admin.dialect.quoteIdentifier(name)}`, params: [] });
  }

  async close(): Promise<void> {
    await this.admin.close();
  }
}

class SqliteBench extends BaseBench {
  readonly dialect = 'sqlite' as const;
  private constructor(
    url: string,
    admin: Store,
    private readonly dir: string,
  ) {
    super(url, admin);
  }

  static async open(): Promise<SqliteBench> {
    const dir = mkdtempSync(join(tmpdir(), 'statusq-bench-'));
    const url = `sqlite:${join(dir, 'bench.db')}`;
    return new SqliteBench(url, await sqliteAdapter.connect(url), dir);
  }

  async version(): Promise<string> {
    const { rows } = await this.admin.execute({ sql: 'SELECT sqlite_version() AS v', params: [] });
    return `SQLite ${String(rows[0]?.v)} (better-sqlite3, WAL)`;
  }

  protected async fill(table: string, count: number, status: 1 | null, endMs: number): Promise<void> {
    const q = this.admin.dialect.quoteIdentifier(table);
    await this.admin.execute({
      sql: `WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ?) INSERT INTO ${q} (date, status) SELECT ? - n, ? FROM seq`,
      params: [count, endMs, status],
    });
  }

  protected async analyze(table: string): Promise<void> {
    await this.admin.execute({ sql: `ANALYZE ${this.admin.dialect.quoteIdentifier(table)}`, params: [] });
  }

  override async close(): Promise<void> {
    await super.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

class PostgresBench extends BaseBench {
  readonly dialect = 'postgres' as const;

  static async ensureDatabase(adminUrl: string): Promise<string> {
    assertLocalUrl(adminUrl);
    const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
    await client.connect();
    try {
      const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [BENCH_DATABASE]);
      if (rowCount === 0) await client.query(`CREATE DATABASE ${BENCH_DATABASE}`);
    } finally {
      await client.end();
    }
    return databaseUrl(BENCH_DATABASE, adminUrl);
  }

  static async open(adminUrl: string): Promise<PostgresBench> {
    const url = await PostgresBench.ensureDatabase(adminUrl);
    return new PostgresBench(url, await postgresAdapter.connect(url));
  }

  async version(): Promise<string> {
    const { rows } = await this.admin.execute({ sql: 'SHOW server_version', params: [] });
    return `PostgreSQL ${String(rows[0]?.server_version)}`;
  }

  protected async fill(table: string, count: number, status: 1 | null, endMs: number): Promise<void> {
    const q = this.admin.dialect.quoteIdentifier(table);
    await this.admin.execute({
      sql: `INSERT INTO ${q} (date, status) SELECT to_timestamp(($1::bigint - g) / 1000.0), $2::int FROM generate_series(1, $3::int) AS g`,
      params: [endMs, status, count],
    });
  }

  /**
   * A freshly filled table has no statistics; without them the planner sorts every pending row per claim.
   * The checkpoint writes the fill (and the previous run's updates) out now rather than during the measured
   * run: without it, 50,000-job runs on one table varied by ±15% from round to round. Needs superuser or
   * pg_checkpoint; without either the runs are only noisier.
   *
   * The catalog tables are vacuumed too: each run creates and drops its tables (and a peer its schema), and
   * where autovacuum is off (as on this project's machines) their dead rows pile up over a full run: 72,000
   * in pg_attribute against 485 live after one, when statusq's PostgreSQL share of the raw loop read 78%
   * where, the catalogs vacuumed, the next run read 87%. A harness should not depend on the server's upkeep.
   */
  protected async analyze(table: string): Promise<void> {
    await this.admin.execute({ sql: `VACUUM ANALYZE ${this.admin.dialect.quoteIdentifier(table)}`, params: [] });
    await this.admin.execute({ sql: `VACUUM ${CATALOG_TABLES.map((t) => `pg_catalog.${t}`).join(', ')}`, params: [] });
    await this.admin.execute({ sql: 'CHECKPOINT', params: [] }).catch(() => undefined);
  }
}

/** The catalogs a table's CREATE and DROP write to. */
const CATALOG_TABLES = ['pg_class', 'pg_attribute', 'pg_depend', 'pg_type', 'pg_index', 'pg_trigger', 'pg_proc', 'pg_constraint', 'pg_attrdef', 'pg_statistic'];

class MysqlBench extends BaseBench {
  readonly dialect = 'mysql' as const;

  static async open(adminUrl: string): Promise<MysqlBench> {
    assertLocalUrl(adminUrl);
    const { host, port, user, password } = mysqlAdapter.optionsFromUrl(adminUrl);
    const conn = await mysql.createConnection({ host, port, user, password, connectTimeout: 5000 });
    try {
      await conn.query(`CREATE DATABASE IF NOT EXISTS ${BENCH_DATABASE} CHARACTER SET utf8mb4`);
    } finally {
      await conn.end();
    }
    const url = new URL(adminUrl);
    url.pathname = `/${BENCH_DATABASE}`;
    return new MysqlBench(url.toString(), await mysqlAdapter.connect(url.toString()));
  }

  async version(): Promise<string> {
    const { rows } = await this.admin.execute({ sql: 'SELECT VERSION() AS v', params: [] });
    return `MariaDB/MySQL ${String(rows[0]?.v)} (InnoDB)`;
  }

  /** No generate_series: a cross join of digit tables numbers the rows (no recursion limit to raise). */
  protected async fill(table: string, count: number, status: 1 | null, endMs: number): Promise<void> {
    const q = this.admin.dialect.quoteIdentifier(table);
    const digits = '(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
    const places = Math.max(1, Math.ceil(Math.log10(count + 1)));
    const from = Array.from({ length: places }, (_, i) => `${digits} AS d${i}`).join(' CROSS JOIN ');
    const n = Array.from({ length: places }, (_, i) => `d${i}.d * ${10 ** i}`).join(' + ');
    await this.admin.execute({
      sql: `INSERT INTO ${q} (date, status) SELECT FROM_UNIXTIME((? - (${n}) - 1) / 1000), ? FROM ${from} WHERE ${n} < ?`,
      params: [endMs, status, count],
    });
  }

  protected async analyze(table: string): Promise<void> {
    await this.admin.execute({ sql: `ANALYZE TABLE ${this.admin.dialect.quoteIdentifier(table)}`, params: [] });
    await this.checkpoint();
  }

  /**
   * MariaDB's counterpart of the CHECKPOINT PostgresBench sends: every run starts with the redo log empty and
   * the purge done. Filling 500,000 rows leaves the redo log 50-75% full (Innodb_checkpoint_age 48-71 MB of
   * the default 96 MB), so a run started at once met InnoDB's furious flushing within seconds and one started
   * later did not: the target check's MariaDB rounds fell into two bands (12-13k and 17-20k jobs/s, on both
   * sides) by timing alone. MariaDB has no CHECKPOINT statement; a zero dirty-page limit with the I/O
   * capacity raised flushes everything (about 3 s here, against 15 s of the idle page cleaner at the default
   * 200 IOPS). The server's settings are put back before this returns; where SET GLOBAL is not allowed, the
   * wait is the idle flush's.
   */
  private async checkpoint(): Promise<void> {
    const { rows } = await this.admin.execute({ sql: 'SELECT @@GLOBAL.innodb_max_dirty_pages_pct AS pct, @@GLOBAL.innodb_io_capacity AS io, @@GLOBAL.innodb_io_capacity_max AS ioMax', params: [] });
    const saved = rows[0]!;
    const set = (name: string, value: unknown) => this.admin.execute({ sql: `SET GLOBAL ${name} = ?`, params: [value as number] });
    let forced = false;
    try {
      await set('innodb_io_capacity_max', CHECKPOINT_IO_CAPACITY);
      await set('innodb_io_capacity', CHECKPOINT_IO_CAPACITY);
      await set('innodb_max_dirty_pages_pct', 0);
      forced = true;
    } catch {
      // No SUPER/SYSTEM_VARIABLES_ADMIN: the idle page cleaner gets there too, only slower.
    }
    try {
      const deadline = performance.now() + CHECKPOINT_BOUND_MS;
      while (performance.now() < deadline) {
        const { rows: state } = await this.admin.execute({
          sql: "SELECT (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_CHECKPOINT_AGE') AS age, (SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len') AS history",
          params: [],
        });
        // MySQL has neither counter under these names; there the ANALYZE is all the preparation there is.
        const age = state[0]?.age == null ? 0 : Number(state[0].age);
        const history = state[0]?.history == null ? 0 : Number(state[0].history);
        if (age <= CHECKPOINT_QUIET_BYTES && history <= CHECKPOINT_QUIET_HISTORY) return;
        await new Promise((resolve) => setTimeout(resolve, CHECKPOINT_POLL_MS));
      }
    } finally {
      if (forced) {
        await set('innodb_max_dirty_pages_pct', saved.pct);
        await set('innodb_io_capacity', saved.io);
        await set('innodb_io_capacity_max', saved.ioMax);
      }
    }
  }
}

/** Page flushes a second while the bench forces a checkpoint (MysqlBench.checkpoint). */
const CHECKPOINT_IO_CAPACITY = 50_000;
/** Redo bytes not yet checkpointed, and undo records not yet purged, that count as a quiet server. */
const CHECKPOINT_QUIET_BYTES = 1_000_000;
const CHECKPOINT_QUIET_HISTORY = 1_000;
const CHECKPOINT_POLL_MS = 100;
/** A server that does not get quiet in this long is left as it is: the run goes ahead. */
const CHECKPOINT_BOUND_MS = 120_000;
