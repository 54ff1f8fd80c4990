import type { Connection } from 'mysql2/promise';
import { Params, SERVER_CONNECTION, TransitionSql, raceDeadline, settlesWithin, sleep, untilAborted, type ResolvedTable, type Row, type Statement } from '@statusq/core/adapter';
import { mysqlDialect } from './mysql-dialect.js';
import { deadlineError, versionAtLeast, type MysqlServerInfo } from './mysql-pool.js';

/**
 * How an idle worker learns of a new row on MySQL/MariaDB, which have no LISTEN/NOTIFY: the store's
 * `waitForWork` sends one statement that does the waiting on the server, on a connection of its own,
 *
 *   SELECT steps.n, (<the claim's candidate SELECT, LIMIT 1, AND steps.n > 0>) IS NOT NULL AS statusq_due
 *   FROM (SELECT 1 AS n UNION ALL SELECT 2 ... UNION ALL SELECT 40) AS steps
 *   WHERE SLEEP(0.05) = 0 HAVING statusq_due = 1 LIMIT 1
 *
 * For each step row the server sleeps `idleProbeMs` (the WHERE runs per row: SLEEP is not constant), then
 * checks whether a row is due (the dependent subquery runs per step: `steps.n > 0` ties it to the step, so
 * neither MariaDB's subquery cache nor a constant-subquery rewrite reuses an old answer), and LIMIT 1 ends
 * the statement at the first step that saw one. A statement that finds nothing ends after ROUND_MS. The
 * worker's process wakes once per round (2 s) or once a row is due, not once per check.
 *
 * The check is the claim's own candidate SELECT (core's TransitionSql, ORDER BY the order column, LIMIT 1,
 * its due time judged by SYSDATE(3), which moves within the statement) as a scalar subquery, not an EXISTS over the due condition: it sees exactly the rows a claim would take,
 * and its ORDER BY ... LIMIT keeps it on the pending index. An EXISTS lets the optimizer stop ordering, and
 * on a table whose finished rows left delete-marked entries in the pending index (every row a queue
 * finished, until purge) MariaDB 10.11 chose a full scan for it, once per step (checked by EXPLAIN in
 * mysql.idle-probe.test.ts).
 *
 * The connection reads at READ UNCOMMITTED: under READ COMMITTED one statement keeps one snapshot, so its
 * later steps would never see a row committed after it began (checked on MariaDB 10.11: an INSERT 1 s into
 * the statement is seen at the step after it under READ UNCOMMITTED, and not at all under READ COMMITTED).
 * Reading uncommitted rows only costs a claim that finds nothing: a row inserted by a transaction that is
 * still open wakes the worker, whose claim (READ COMMITTED, SKIP LOCKED) does not see it, and it waits
 * again; while that transaction stays open, that is one empty claim per step. The probe writes nothing.
 *
 * Why not a round trip per check (the earlier design: `SELECT SLEEP(0.08), EXISTS(...)` every 80 ms): on a
 * small VM each wake-up of an idle process is what costs. Measured on this project's 2-core VM (MariaDB
 * 10.11, Node 20), CPU of the worker's process per wake-up: a bare Node timer 0.5 ms, a SLEEP round trip
 * through mysql2 1.0-1.2 ms, the worker's idle claim (three statements) 2.9 ms. At one wake every 80 ms
 * that was 1.2-1.9% of a core; at one every ROUND_MS it is under 0.1%, and the server's side (a sleeping
 * thread that wakes per step for one index probe) is what remains (see docs/benchmarks.md).
 *
 * A round in flight is shared: a wait on the same table while one is running (the worker woken by wake()
 * and idle again, or a second worker on this store) awaits that statement instead of starting another, so
 * an aborted wait leaves nothing to cancel. What it costs the server: one connection per idle table per
 * store (not from the pool), sleeping. A round that fails (connection lost, a deadline) drops its connection
 * and the wait falls back to a plain timer of at most a second, so the worker's next claim meets the outage
 * and its retry policy handles it; the next wait opens a new connection. close() kills the rounds'
 * server threads through the pool, so nothing keeps sleeping on the server after the store is gone.
 */
export const DEFAULT_IDLE_PROBE_MS = 50;

/** How long one statement waits on the server when no row comes: one wake-up of the worker per ROUND_MS. */
export const ROUND_MS = 2_000;

/** Step rows per statement at most (an idleProbeMs of 1 ms makes 100-step rounds, not 2,000-row ones). */
const MAX_STEPS = 100;

/** How long a wait whose probe failed sleeps before handing back to the worker (polling, as without a probe). */
const AFTER_FAILED_PROBE_MS = 1_000;

/**
 * The probe connection's own session set-up, after the pool's: READ UNCOMMITTED (see above), and no
 * statement time limit from the server's configuration cutting a round short (it would count as a failure).
 */
export function idleProbeSetup(server: MysqlServerInfo): string[] {
  const setup = ['SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED'];
  if (server.flavor === 'mariadb') setup.push('SET SESSION max_statement_time = 0');
  // MySQL's limit (SELECTs only) came in 5.7.8; statusq supports 5.7.7, which has none to lift.
  else if (versionAtLeast([server.major, server.minor, server.patch], [5, 7, 8])) setup.push('SET SESSION max_execution_time = 0');
  return setup;
}

/** The connection and the round in flight for one table. */
interface TableProbe {
  connection: Promise<Connection> | null;
  /** Resolves to whether the round saw a due row; null between rounds. */
  round: Promise<boolean> | null;
}

export class MysqlIdleProbe {
  private readonly tables = new Map<ResolvedTable, TableProbe>();
  private readonly built = new WeakMap<ResolvedTable, Statement>();
  private readonly closing = new AbortController();
  /** Checks per statement: ROUND_MS / intervalMs. */
  readonly steps: number;

  constructor(
    private readonly open: () => Promise<Connection>,
    private readonly intervalMs: number,
    /** Beyond the round's own length, how long its answer may take before the connection counts as lost. */
    private readonly queryTimeoutMs: number,
    private readonly stats: { idleProbes: number; idleProbeFailures: number },
    /** Ends a server thread (KILL through the store's pool); failures are the caller's to ignore. */
    private readonly kill: (threadId: number) => Promise<void>,
    roundMs = ROUND_MS,
  ) {
    this.steps = Math.min(MAX_STEPS, Math.max(1, Math.round(roundMs / intervalMs)));
  }

  /** Resolves once a round saw a due row in `table`, after `timeoutMs`, or at once when `signal` aborts. */
  async wait(table: ResolvedTable, timeoutMs: number, signal: AbortSignal): Promise<void> {
    const until = performance.now() + timeoutMs;
    while (!signal.aborted && !this.closing.signal.aborted) {
      const left = until - performance.now();
      if (left <= 0) return;
      const probe = this.probeOf(table);
      const round = (probe.round ??= this.startRound(table, probe));
      // Ends this wait at `until` or on `signal`; the round itself goes on for the next wait to share.
      const leave = new AbortController();
      const timer = setTimeout(() => leave.abort(), left);
      const onAbort = () => leave.abort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.closing.signal.addEventListener('abort', onAbort, { once: true });
      let due: boolean | 'aborted';
      try {
        due = await untilAborted(round, leave.signal);
      } catch {
        // Closing kills the rounds: the waits end with them.
        if (!this.closing.signal.aborted) await sleep(Math.min(left, AFTER_FAILED_PROBE_MS), signal);
        return;
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.closing.signal.removeEventListener('abort', onAbort);
      }
      if (due !== false) return;
    }
  }

  /** Ends every wait at once, then each round: its server thread killed, its connection closed. */
  async close(): Promise<void> {
    this.closing.abort();
    const probes = [...this.tables.values()];
    this.tables.clear();
    await Promise.all(
      probes.map(async ({ connection: opening, round }) => {
        const connection = await opening?.catch(() => null);
        if (!connection) return;
        // A round may be sleeping on the server. KILL ends it there, and its query fails here, which clears
        // its deadline timer; destroy() alone would leave the query unanswered until that deadline.
        await this.kill(connection.threadId).catch(() => undefined);
        if (round) await settlesWithin(round, SERVER_CONNECTION.closeGraceMs);
        connection.destroy();
      }),
    );
  }

  private probeOf(table: ResolvedTable): TableProbe {
    let probe = this.tables.get(table);
    if (probe === undefined) {
      probe = { connection: null, round: null };
      this.tables.set(table, probe);
    }
    return probe;
  }

  /** One round: up to `steps` checks, `intervalMs` apart, on the server; whether one saw a due row. */
  private async startRound(table: ResolvedTable, probe: TableProbe): Promise<boolean> {
    const opening = (probe.connection ??= this.open());
    let connection: Connection | null = null;
    try {
      connection = await opening;
      const statement = this.statementFor(table);
      const deadlineMs = this.steps * this.intervalMs + this.queryTimeoutMs;
      const [rows] = await raceDeadline(connection.query(statement.sql, statement.params), deadlineMs, () => deadlineError(deadlineMs));
      this.stats.idleProbes++;
      return (rows as Row[]).length > 0;
    } catch (error) {
      this.stats.idleProbeFailures++;
      if (probe.connection === opening) probe.connection = null;
      connection?.destroy();
      throw error;
    } finally {
      probe.round = null;
    }
  }

  /** The round's statement for `table` (built once per table: the steps and the sleep are fixed per store). */
  statementFor(table: ResolvedTable): Statement {
    let built = this.built.get(table);
    if (built === undefined) {
      // Placeholders are positional: the candidate's LIMIT comes before the SLEEP in the text.
      const p = new Params(mysqlDialect);
      // SYSDATE, not NOW: NOW(3) is the time the statement began, the same at every step, so a row whose
      // next_attempt_at fell within a round was not due to any of its checks, and waited for the next round
      // (delayed rows picked up 0.1-1.8 s late, issue 40). SYSDATE(3) is read at each step.
      const candidate = new TransitionSql(table, mysqlDialect).candidates(p, { limit: 1, columns: 'id', alsoWhere: 'statusq_steps.n > 0', now: 'SYSDATE(3)' });
      const sleepSeconds = p.add(this.intervalMs / 1000);
      const steps = Array.from({ length: this.steps }, (_, i) => (i === 0 ? 'SELECT 1 AS n' : `SELECT ${i + 1}`)).join(' UNION ALL ');
      built = {
        sql:
          `SELECT statusq_steps.n AS statusq_step, (${candidate}) IS NOT NULL AS statusq_due ` +
          `FROM (${steps}) AS statusq_steps WHERE SLEEP(${sleepSeconds}) = 0 HAVING statusq_due = 1 LIMIT 1`,
        params: p.values,
      };
      this.built.set(table, built);
    }
    return built;
  }
}
