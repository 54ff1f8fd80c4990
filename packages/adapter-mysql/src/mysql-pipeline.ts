import { StoreError, fitsStatementLimit, type ExecResult, type Statement, type StatementLimit, type StatementRunner } from '@statusq/core/adapter';
import { bindValue, mysqlExecResult } from './mysql-results.js';

/**
 * The native claim in two round trips (issue 41): statements the claim can send ahead (StatementRunner.defer)
 * travel in one multi-statement packet with the next statement whose answer it waits for, and the last ones
 * with the COMMIT. With the claim gate (mysql-claim-gate.ts):
 *
 *   round trip 1   START TRANSACTION; SELECT GET_LOCK(...); SELECT ... FOR UPDATE SKIP LOCKED
 *   round trip 2   UPDATE ... WHERE id IN (...); DO RELEASE_LOCK(...); COMMIT
 *
 * instead of six (four without the gate). The row locks are held from the first answer to the second, as
 * before: nothing about the claim's safety changes, only how many times the client waits for the network. Far
 * from the server the wait is most of a claim: one worker of 64 slots, MariaDB 5 ms further away (the TCP
 * proxy): 1,547 jobs/s with the four-round-trip claim, 1,138 with the gate's six, 2,232 with these two; 20 ms
 * away 557, 405, 872 (docs/benchmarks.md, "Claim round trips").
 *
 * Multi-statement packets need the connection's CLIENT_MULTI_STATEMENTS flag (mysql2 `multipleStatements`),
 * which statusq's pool sets: every value statusq sends is bound (mysql2 escapes it) and every identifier is
 * validated and quoted, so no input of a user's can add a statement. No privilege is needed. A proxy that
 * refuses such packets (or a server that answers them with a syntax error) is found at open (probePipeline):
 * the store then sends one statement per round trip, as before, says so once (onWarning, code
 * `multi-statements-refused`) and the doctor shows it. A Galera node never gets them (probePipeline says why).
 *
 * A packet that fails stops at the failing statement (the server runs none after it) and rejects every
 * statement of the packet; the transaction then rolls back, as one that failed statement by statement would,
 * and the session's named locks go with the rollback (a failed packet may have taken the gate's and never
 * reached its release).
 */
export interface PipelineConnection {
  query(options: { sql: string; values: unknown[] }): Promise<[unknown, unknown]>;
}

interface Queued {
  statement: Statement;
  resolve(result: ExecResult): void;
  reject(error: unknown): void;
}

/** START TRANSACTION, `body`, COMMIT on `conn`, sending the body's deferred statements with its next one. */
export async function pipelinedTransaction<T>(
  conn: PipelineConnection,
  body: (tx: StatementRunner) => Promise<T>,
  options: { isLost(error: unknown): boolean; statementLimit: StatementLimit | undefined; check(statement: Statement): void },
): Promise<T> {
  const pending: Queued[] = [];
  const queue = (statement: Statement): Promise<ExecResult> => {
    options.check(statement);
    const result = new Promise<ExecResult>((resolve, reject) => pending.push({ statement, resolve, reject }));
    // Settled with its packet; a caller that never reads it (the claim failed first) leaves no unhandled rejection.
    result.catch(() => undefined);
    return result;
  };
  const flush = async (): Promise<void> => {
    while (pending.length > 0) await send(conn, takePacket(pending, options.statementLimit));
  };
  let sent = false;
  const sendNow = async (statement: Statement): Promise<ExecResult> => {
    const result = queue(statement);
    sent = true;
    await flush();
    return result;
  };
  void queue({ sql: 'START TRANSACTION', params: [] });
  try {
    const result = await body({ execute: sendNow, defer: queue });
    await sendNow({ sql: 'COMMIT', params: [] });
    return result;
  } catch (error) {
    for (const q of pending.splice(0)) q.reject(error);
    if (!sent || options.isLost(error)) throw error;
    // A named lock outlives its transaction (the claim gate's GET_LOCK): a packet that failed may have taken
    // it and never reached its RELEASE_LOCK, so the rollback frees every named lock of the session. statusq's
    // pooled sessions hold none but the gate's.
    const rollbackError = await conn.query({ sql: 'ROLLBACK;\nDO RELEASE_ALL_LOCKS()', values: [] }).then(
      () => null,
      (e: unknown) => e,
    );
    throw rollbackError !== null && options.isLost(rollbackError) ? rollbackError : error;
  }
}

/** The first queued statements that fit one packet together (at least one). */
function takePacket(pending: Queued[], limit: StatementLimit | undefined): Queued[] {
  let count = 1;
  while (count < pending.length && fitsStatementLimit(joined(pending.slice(0, count + 1)), limit)) count++;
  return pending.splice(0, count);
}

function joined(batch: readonly Queued[]): Statement {
  return { sql: batch.map((q) => q.statement.sql).join(';\n'), params: batch.flatMap((q) => q.statement.params) };
}

async function send(conn: PipelineConnection, batch: readonly Queued[]): Promise<void> {
  const packet = joined(batch);
  try {
    const [results] = await conn.query({ sql: packet.sql, values: packet.params.map(bindValue) });
    // One statement answers with its own result; several with one result each, in order.
    const each = batch.length === 1 ? [results] : (results as unknown[]);
    if (!Array.isArray(each) || each.length !== batch.length) {
      throw new StoreError('Unknown', `a packet of ${batch.length} statements came back with ${Array.isArray(each) ? each.length : 'no list of'} results`, 'PACKET_RESULTS');
    }
    batch.forEach((q, i) => q.resolve(mysqlExecResult(each[i])));
  } catch (error) {
    for (const q of batch) q.reject(error);
    throw error;
  }
}

/** What the probe at open found: packets in use, or why not (a refusal is warned of; a Galera node is not). */
export type PipelineProbe = { verdict: 'use' } | { verdict: 'refused' | 'galera'; why: string };

/**
 * Asks, in one round trip, whether the connection runs multi-statement packets and whether the server is a
 * Galera node (MariaDB Galera, Percona XtraDB Cluster: wsrep_on ON), where the claim must not travel in them.
 * Galera aborts a local transaction when another node's write to the same rows is applied first (a brute-force
 * abort), at any moment, and a transaction aborted between two statements of one packet is rolled back while
 * the rest of the packet runs: its COMMIT then answers OK with nothing committed, and the claim hands out rows
 * another node's claim owns. Measured with `pnpm scale --quick --only galera` (three nodes, workers spread over
 * them): 8 rows of 1,000 ran twice in packets, none statement by statement, where Galera's 1213 reaches the
 * statement after the abort. A refusal is the probe's error (a syntax error where the flag did not reach the
 * server); a lost connection is not an answer: it is thrown.
 */
export async function probePipeline(conn: PipelineConnection, isLost: (error: unknown) => boolean): Promise<PipelineProbe> {
  let results: unknown;
  try {
    [results] = await conn.query({ sql: "SHOW VARIABLES LIKE 'wsrep_on';\nSELECT 1 AS statusq_probe", values: [] });
  } catch (error) {
    if (isLost(error)) throw error;
    return { verdict: 'refused', why: error instanceof Error ? error.message : String(error) };
  }
  if (!Array.isArray(results) || results.length !== 2) return { verdict: 'refused', why: 'the server answered two statements with one result' };
  const wsrep = results[0] as Array<{ Value?: unknown }>;
  if (String(wsrep[0]?.Value ?? '').toUpperCase() === 'ON') {
    return { verdict: 'galera', why: 'a Galera node (wsrep_on): an abort between two statements of a packet would go unreported, so each statement is sent alone' };
  }
  return { verdict: 'use' };
}
