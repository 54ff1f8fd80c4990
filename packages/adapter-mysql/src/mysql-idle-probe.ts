import type { Connection } from 'mysql2/promise';
import { Params, TransitionSql, raceDeadline, sleep, untilAborted, type ResolvedTable, type Row, type Statement } from '@statusq/core/adapter';
import { mysqlDialect } from './mysql-dialect.js';
import { deadlineError } from './mysql-pool.js';

/**
 * How an idle worker learns of a new row on MySQL/MariaDB, which have no LISTEN/NOTIFY: the store's
 * `waitForWork` asks the server, on a connection of its own, one statement per round,
 *
 *   SELECT SLEEP(0.08) AS statusq_slept, EXISTS(<the claim's own candidate SELECT, LIMIT 1>) AS statusq_due
 *
 * and returns to the worker (which then claims) as soon as a round says a row is due. The server does the
 * waiting: SLEEP runs before the EXISTS (the select list is evaluated in order, and the EXISTS reads a fresh
 * snapshot: checked on MariaDB 10.11, a row inserted 1 s into a SLEEP(2) is seen by that same statement), so
 * each round is one round trip and one wake-up of the worker's process, with no timer of its own. The EXISTS
 * is the claim's candidate SELECT (core's TransitionSql), so it sees exactly the rows a claim would take:
 * pending and due, served by the pending index.
 *
 * Why not the worker's own polling: an idle claim is a transaction of three statements, three wake-ups of
 * the process, and on a small virtual machine each wake-up from idle is costly. Measured on this project's
 * 2-core VM (MariaDB 10.11, Node 20), CPU of the worker's process per round, after 12 s idle:
 *
 *   the worker's idle claim (START TRANSACTION, SELECT ... FOR UPDATE SKIP LOCKED, COMMIT), 80 ms timer   2.9 ms
 *   SELECT ... LIMIT 1 through the store's pool, 80 ms timer                                               1.4 ms
 *   SELECT SLEEP(0.08), EXISTS(...) through the store's pool (pool checkout, deadline per call)             1.3 ms
 *   the same on a connection of its own                                                                    0.77 ms
 *
 * The last is what this does: about 1-1.5% of a core at the default 80 ms (0.77 ms a round in a small process, 1.1-1.2 ms in a worker's), against 3.6% for the idle claim
 * polled as often. A row then waits at most one round (80 ms) plus the claim, without NOTIFY.
 *
 * What it costs the server: one sleeping connection per idle store (not taken from the pool), and one index
 * probe per round. A probe that fails (connection lost, a deadline) drops its connection and the wait falls
 * back to a plain timer of at most a second, so the worker's next claim meets the outage and its retry policy
 * handles it; the next wait opens a new connection.
 */
export const DEFAULT_IDLE_PROBE_MS = 80;

/** How long a wait whose probe failed sleeps before handing back to the worker (polling, as without a probe). */
const AFTER_FAILED_PROBE_MS = 1_000;

export class MysqlIdleProbe {
  private connection: Promise<Connection> | null = null;
  private readonly built = new WeakMap<ResolvedTable, Statement>();
  private closed = false;

  constructor(
    private readonly open: () => Promise<Connection>,
    private readonly intervalMs: number,
    /** Beyond the round's own sleep, how long its answer may take before the connection counts as lost. */
    private readonly queryTimeoutMs: number,
    private readonly stats: { idleProbes: number; idleProbeFailures: number },
  ) {}

  /** Resolves once a round saw a due row in `table`, after `timeoutMs`, or at once when `signal` aborts. */
  async wait(table: ResolvedTable, timeoutMs: number, signal: AbortSignal): Promise<void> {
    const until = performance.now() + timeoutMs;
    while (!signal.aborted && !this.closed) {
      const left = until - performance.now();
      if (left <= 0) return;
      let due: boolean | 'aborted';
      try {
        due = await untilAborted(this.round(table, Math.min(this.intervalMs, left)), signal);
      } catch {
        await sleep(Math.min(left, AFTER_FAILED_PROBE_MS), signal);
        return;
      }
      if (due !== false) return;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const connection = this.connection;
    this.connection = null;
    // A round may be sleeping on the server: the socket is cut rather than waited for.
    (await connection?.catch(() => null))?.destroy();
  }

  /** One round: sleep `sleepMs` on the server, then whether a row is due. */
  private async round(table: ResolvedTable, sleepMs: number): Promise<boolean> {
    const opening = (this.connection ??= this.open());
    let connection: Connection | null = null;
    try {
      connection = await opening;
      const statement = this.statementFor(table, sleepMs);
      const deadlineMs = sleepMs + this.queryTimeoutMs;
      const [rows] = await raceDeadline(connection.query(statement.sql, statement.params), deadlineMs, () => deadlineError(deadlineMs));
      this.stats.idleProbes++;
      return Number((rows as Row[])[0]?.statusq_due) === 1;
    } catch (error) {
      this.stats.idleProbeFailures++;
      if (this.connection === opening) this.connection = null;
      connection?.destroy();
      throw error;
    }
  }

  /** The round's statement for `table`, with `sleepMs` bound (the rest is built once per table). */
  private statementFor(table: ResolvedTable, sleepMs: number): Statement {
    let built = this.built.get(table);
    if (built === undefined) {
      const p = new Params(mysqlDialect);
      const seconds = p.add(0);
      const candidates = new TransitionSql(table, mysqlDialect).candidates(p, { limit: 1, columns: 'id' });
      built = { sql: `SELECT SLEEP(${seconds}) AS statusq_slept, EXISTS(${candidates}) AS statusq_due`, params: p.values };
      this.built.set(table, built);
    }
    return { sql: built.sql, params: [sleepMs / 1000, ...built.params.slice(1)] };
  }
}
