/**
 * The raw-protocol ceiling: the claim and settle SQL of statusq's native claim, written out by hand with no
 * worker around it (no handler, no slots, no events, no lease columns), over the same table statusq's
 * burn-down uses. One connection per "worker", each looping claim a batch -> settle that batch as one grouped
 * UPDATE, until a claim comes back empty. Whatever statusq runs slower than this on the same dialect, table
 * and worker count is the cost of its machinery, which issue 14 asks to keep under 20%.
 *
 * - PostgreSQL: `UPDATE t SET status = 9 WHERE id = ANY(ARRAY(SELECT id ... ORDER BY date DESC LIMIT n FOR
 *   UPDATE SKIP LOCKED)) RETURNING id` (one autocommitted statement), then `UPDATE t SET status = 1 WHERE
 *   id = ANY($1) AND status = 9`.
 * - MariaDB/MySQL: a READ COMMITTED transaction of `SELECT id ... FOR UPDATE SKIP LOCKED` and `UPDATE ...
 *   SET status = 9 WHERE id IN (...)`, then the grouped settle autocommitted.
 * A deadlock (MariaDB's 1213, from either loop) re-runs the claim or the settle, at most MAX_DEADLOCK_RETRIES times
 * in a row, and the run counts them: at 32 workers one came every few hundred thousand jobs, and without the
 * retry it ended the whole bench.
 * - SQLite: `BEGIN IMMEDIATE; UPDATE t SET status = 9 WHERE id IN (SELECT id ... LIMIT n) RETURNING id;
 *   COMMIT`, then the grouped settle; WAL, synchronous NORMAL and a busy timeout, as statusq's store opens it.
 *   better-sqlite3 is synchronous, so N connections in this one thread take turns (each yields between
 *   statements), as statusq's N in-process SQLite workers do.
 *
 * `statements: 'statusq'` runs the same loop on statusq's own store and SQL instead (Queue.claim with the
 * native claim, then Queue.sql.completeMany under the claim's token, as the worker's grouped settle sends it):
 * the lease and token columns written, the due condition, RETURNING * and the store's connection handling,
 * with no worker around them. statusq over this row is the cost of its worker (slots, handler calls, events,
 * settle grouping); this row over the minimal one is the cost of the protocol's features.
 *
 * Timed like every other run here: from the first claim that returned rows to the last settle committed. The
 * run then counts the rows at status 1, which must equal the rows loaded.
 */
import * as mysqlAdapter from '@statusq/adapter-mysql';
import { filenameFromUrl } from '@statusq/adapter-sqlite';
import Database from 'better-sqlite3';
import { Queue, StoreError } from '@statusq/core';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { connectUrl, type Dialect } from './databases.js';
import { assertLocalUrl } from './limits.js';

/** The batch the raw script claimed (and settled) per round trip. */
export const RAW_BATCH = 50;

const MAX_DEADLOCK_RETRIES = 20;
const SQLITE_BUSY_TIMEOUT_MS = 5_000;

export interface RawOptions {
  dialect: Dialect;
  url: string;
  table: string;
  /** Rows pending in the table when the run starts. */
  jobs: number;
  workers: number;
  batch: number;
  timeoutMs: number;
  /** `minimal`: the hand-written SQL (the default); `statusq`: statusq's store and statements. */
  statements?: RawStatements;
}

export type RawStatements = 'minimal' | 'statusq';

export interface RawResult {
  handled: number;
  seconds: number;
  timedOut: boolean;
  /** Deadlocks retried (MariaDB/MySQL; 0 elsewhere). */
  deadlocks: number;
}

/** One connection's two statements. `claim` resolves to the claimed ids (none: the queue looked empty). */
interface RawConnection {
  claim(): Promise<number[]>;
  settle(ids: readonly number[]): Promise<void>;
  /** Rows at status 1 (done). */
  done(): Promise<number>;
  close(): Promise<void>;
}

/** Table names come from the bench's own scenario names; still, nothing but [a-z0-9_] reaches the SQL. */
function safeTable(table: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(table)) throw new Error(`raw protocol: unexpected table name ${JSON.stringify(table)}`);
  return table;
}

async function postgresConnection(url: string, table: string, batch: number): Promise<RawConnection> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench-raw-protocol' });
  await client.connect();
  const t = `"${table}"`;
  const claimSql = `UPDATE ${t} SET status = 9 WHERE id = ANY(ARRAY(SELECT id FROM ${t} WHERE status IS NULL ORDER BY date DESC LIMIT ${batch} FOR UPDATE SKIP LOCKED)) RETURNING id`;
  const settleSql = `UPDATE ${t} SET status = 1 WHERE id = ANY($1::bigint[]) AND status = 9`;
  return {
    claim: async () => (await client.query<{ id: string | number }>(claimSql)).rows.map((r) => Number(r.id)),
    settle: async (ids) => void (await client.query(settleSql, [ids])),
    done: async () => Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${t} WHERE status = 1`)).rows[0]?.n ?? 0),
    close: () => client.end(),
  };
}

async function mysqlConnection(url: string, table: string, batch: number): Promise<RawConnection> {
  const { host, port, user, password, database } = mysqlAdapter.optionsFromUrl(url);
  const conn = await mysql.createConnection({ host, port, user, password, database });
  await conn.query('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED');
  const t = `\`${table}\``;
  const claimOnce = async (): Promise<number[]> => {
    await conn.query('START TRANSACTION');
    try {
      const [rows] = await conn.query<mysql.RowDataPacket[]>(`SELECT id FROM ${t} WHERE status IS NULL ORDER BY date DESC LIMIT ${batch} FOR UPDATE SKIP LOCKED`);
      const ids = rows.map((r) => Number(r.id));
      if (ids.length > 0) await conn.query(`UPDATE ${t} SET status = 9 WHERE id IN (${ids.join(',')})`);
      await conn.query('COMMIT');
      return ids;
    } catch (error) {
      await conn.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  };
  return {
    claim: claimOnce,
    settle: async (ids) => void (await conn.query(`UPDATE ${t} SET status = 1 WHERE id IN (${ids.map(Number).join(',')}) AND status = 9`)),
    done: async () => Number((await conn.query<mysql.RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${t} WHERE status = 1`))[0][0]?.n ?? 0),
    close: () => conn.end(),
  };
}

function sqliteConnection(url: string, table: string, batch: number): RawConnection {
  const db = new Database(filenameFromUrl(url));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
  const t = `"${table}"`;
  const claim = db.prepare<[], { id: number }>(`UPDATE ${t} SET status = 9 WHERE id IN (SELECT id FROM ${t} WHERE status IS NULL ORDER BY date DESC LIMIT ${batch}) RETURNING id`);
  const claimTx = db.transaction(() => claim.all().map((r) => r.id));
  const settleTx = db.transaction((ids: readonly number[]) => db.prepare(`UPDATE ${t} SET status = 1 WHERE id IN (${ids.map(() => '?').join(',')}) AND status = 9`).run(...ids));
  // Yield between statements so the other connections of this thread get their turn.
  const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
  return {
    claim: async () => {
      await turn();
      return claimTx.immediate();
    },
    settle: async (ids) => {
      await turn();
      settleTx.immediate(ids);
    },
    done: async () => Number(db.prepare<[], { n: number }>(`SELECT COUNT(*) AS n FROM ${t} WHERE status = 1`).get()?.n ?? 0),
    close: async () => void db.close(),
  };
}

/** statusq's store and statements in the raw loop; one store (one connection) per loop, as the workers have. */
async function statusqConnection(options: RawOptions, loop: number): Promise<RawConnection> {
  const store = await connectUrl(options.dialect, options.url, { listen: false, connections: 1 });
  try {
    const queue = await Queue.open(store, { table: options.table });
    const token = `raw-${loop}`;
    return {
      claim: async () => (await queue.claim({ limit: options.batch, token }, 'native')).rows.map((row) => Number(row[queue.table.id])),
      settle: async (ids) => void (await queue.apply([queue.sql.completeMany(ids, token)])),
      done: async () => (await queue.counts()).done,
      close: () => store.close(),
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/** MariaDB/MySQL's deadlock, from mysql2 (the minimal loop) or from statusq's store (its statements). */
function isDeadlock(error: unknown): boolean {
  return (error as { errno?: number }).errno === 1213 || (error instanceof StoreError && error.kind === 'WriteConflict');
}

function connect(options: RawOptions, loop: number): Promise<RawConnection> {
  if (options.statements === 'statusq') return statusqConnection(options, loop);
  const table = safeTable(options.table);
  switch (options.dialect) {
    case 'postgres':
      return postgresConnection(options.url, table, options.batch);
    case 'mysql':
      return mysqlConnection(options.url, table, options.batch);
    case 'sqlite':
      return Promise.resolve(sqliteConnection(options.url, table, options.batch));
  }
}

/** Drains the table with `workers` raw loops; see the file's header. */
export async function rawBurnDown(options: RawOptions): Promise<RawResult> {
  assertLocalUrl(options.url);
  const connections: RawConnection[] = [];
  try {
    for (let i = 0; i < options.workers; i++) connections.push(await connect(options, i));
    let handled = 0;
    let first: number | undefined;
    let last: number | undefined;
    const deadline = performance.now() + options.timeoutMs;
    let deadlocks = 0;
    // A deadlock rolled the statement's transaction back (InnoDB), so running it again is the whole retry.
    const retrying = async <T>(statement: () => Promise<T>): Promise<T> => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await statement();
        } catch (error) {
          if (!isDeadlock(error) || attempt >= MAX_DEADLOCK_RETRIES) throw error;
          deadlocks++;
        }
      }
    };
    // Each loop ends on an empty claim or at the deadline; a claim is at most `batch` rows, so it is bounded
    // by jobs / batch + 1 turns when nothing else writes the table.
    await Promise.all(
      connections.map(async (conn) => {
        while (performance.now() < deadline) {
          const ids = await retrying(() => conn.claim());
          if (ids.length === 0) return;
          first ??= performance.now();
          await retrying(() => conn.settle(ids));
          last = performance.now();
          handled += ids.length;
        }
      }),
    );
    const timedOut = handled < options.jobs;
    if (!timedOut) {
      const done = await connections[0]!.done();
      if (done !== options.jobs) throw new Error(`raw protocol (${options.dialect}) settled ${done} of ${options.jobs} rows (counted ${handled})`);
    }
    return { handled, seconds: first === undefined || last === undefined ? Number.NaN : (last - first) / 1000, timedOut, deadlocks };
  } finally {
    await Promise.allSettled(connections.map((c) => c.close()));
  }
}
