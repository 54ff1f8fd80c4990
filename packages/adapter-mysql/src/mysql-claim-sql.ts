import { CLAIM_CLOCK, splitTableName, type ClaimIdsOnServer, type NativeClaim, type ResolvedTable, type Statement } from '@statusq/core/adapter';
import { LIVE_KEY_COLUMN } from './mysql-dialect.js';

/**
 * MySQL 8.0.1+ and MariaDB 10.6+ native claim hooks for core's claim pipeline: one short transaction on one
 * connection (MysqlStore.transaction),
 *
 *   START TRANSACTION                                   (the session runs READ COMMITTED, see below)
 *   SELECT *, NOW(3) AS statusq_claim_clock FROM t WHERE <due> ORDER BY <order> LIMIT n FOR UPDATE SKIP LOCKED
 *   UPDATE t SET status = 9, claimed_at = <that clock>, worker_id = ? WHERE id IN (<ids, ascending>) AND <due>
 *   COMMIT
 *
 * The statements travel in two multi-statement packets where the server takes them, with the claim gate's
 * GET_LOCK and RELEASE_LOCK (mysql-pipeline.ts, mysql-claim-gate.ts): two round trips, not four. On a table
 * with an integer id, in one (mysqlClaimIdsOnServer).
 *
 * MariaDB has no UPDATE ... RETURNING, so the claimed rows are the locked candidates with the three values
 * the UPDATE wrote: nobody else can change a row between its lock and the commit, and claimed_at is the
 * server's clock read by the SELECT (never the worker host's). The rows are read back (SELECT * ... WHERE id
 * IN (...)) when the UPDATE changed fewer rows than it was given (it should not), or when the table makes
 * the server write more than that (mysqlClaimWritesQuery: ON UPDATE columns, triggers, ...). Reading the clock with the candidates instead of
 * reading the rows back after the UPDATE saves one of five round trips. Measured on MariaDB 10.11, 2 cores,
 * 20,000 no-op jobs, 16 slots per worker: 8 workers 5,850 -> 6,650 jobs/s; 32 workers 4,300-5,400 ->
 * 5,050-5,350 (the server is the limit there, at ~1.5 of the 2 cores).
 *
 * The candidate SQL is core's (TransitionSql.candidates, with aging through candidateStatements) with
 * FOR UPDATE SKIP LOCKED appended, and the UPDATE is core's guarded claimByIds (ids ascending), so the
 * claim's SQL is written once for every dialect.
 *
 * Why it does not deadlock: measured on MariaDB 10.11 (InnoDB, REPEATABLE READ, index (status, date)),
 * this same transaction ran 12,400 jobs/s with one worker, but 8 workers deadlocked 6,651 times in 60 s.
 * Under REPEATABLE READ a locking read through the secondary index takes next-key locks: each index
 * record it reads plus the gap before it, and the record just past the end of the NULL range (the
 * first row of another status). The claim's own UPDATE then moves each row from (NULL, date) to
 * (9, date) in that index, which is an insert into a gap another claimer's next-key lock may cover, while
 * that claimer waits on a gap this one holds: a lock-order inversion between two transactions that
 * each skipped the other's rows but not each other's gaps. Settles moving rows (9 -> 1) meet the same
 * gap locks at the boundary. Under READ COMMITTED InnoDB takes no gap locks for searches, only record
 * locks, and SKIP LOCKED skips every record another claimer holds, so claimers never wait on each other.
 * The UPDATE then goes by primary key, in ascending id order, only over rows this transaction already
 * locked, and the transaction is a few statements long. (Measured: READ COMMITTED made the deadlocks
 * vanish.) Deadlocks (1213) and lock wait timeouts (1205) that still happen are WriteConflict, counted on
 * the store (`stats.deadlocks`) and retried with backoff by core's claim policy (the store never retries).
 */
export const mysqlNativeClaim: NativeClaim = {
  lockCandidates: ' FOR UPDATE SKIP LOCKED',
  clockWithCandidates: true,
};

/**
 * The claim on a server that writes its binary log by statement, when statusq's sessions may not switch to
 * ROW (mysql-binlog.ts, fallback b): core's conditional-update claim with every session at REPEATABLE READ,
 *
 *   SELECT * FROM t WHERE <due> ORDER BY <order> LIMIT n                      (autocommit: a fresh snapshot, no lock)
 *   UPDATE t SET status = 9, claimed_at = NOW(3), worker_id = ? WHERE id = ? AND <due>   (one per candidate, autocommit)
 *
 * Why it is safe there. Statement logging refuses InnoDB writes at READ COMMITTED (1665), so REPEATABLE READ;
 * under it, the skip-locked batch claim's locking read through the (status, order) index takes next-key locks
 * and deadlocked 6,651 times in 60 s with 8 workers when first measured (the reasoning above; not reproduced
 * on this server, see the end of this comment). This claim takes no lock to find candidates, and each UPDATE finds its
 * row by primary key equality, which under REPEATABLE READ locks that one record and no gap; it re-reads the
 * row's latest version, so the guard decides who owns it and a row is claimed once. Its only insert into a
 * gap of the (status, order) index is the claimed row's new entry, which only the lease reaper's and an
 * operator's range UPDATEs ever lock (both rare, and the reaper runs only after a plain read found an expired
 * lease). Every statement statusq writes replicates as a statement: no UPDATE ... LIMIT, no UUID() or RAND();
 * NOW(3) is logged with the statement's timestamp; the settles (`WHERE id = ?` or `WHERE id IN (...) AND
 * status = 9 AND worker_id = ?`), retries, the reaper and requeue are deterministic on the replica's copy of
 * the rows; enqueue's one-row INSERTs log their AUTO_INCREMENT value. Checked, not assumed:
 * mysql.binlog.test.ts runs the state-machine, fencing, retries, leases and race groups there and finds no
 * "Unsafe statement" warning in the server's log.
 *
 * What it costs. Measured on MariaDB 10.11.19, 2 cores shared with other test runs, log_bin ON, 20,000 no-op
 * jobs, in-process workers each on its own pool; jobs/s (the fallback's lost candidates per 100):
 *
 *   workers x slots   native, sessions ROW, READ COMMITTED   conditional-update, READ COMMITTED   fallback (REPEATABLE READ)
 *   1 x 16            3,250                                  2,650                                2,190-2,440 (0)
 *   8 x 4             2,690                                  1,070                                920-1,220 (62)
 *   8 x 16            5,910                                  1,140                                740-910 (77)
 *   32 x 4            2,100                                  330                                  290-370 (89)
 *   32 x 16           2,270-3,560                            170                                  240-270 (95)
 *
 * No deadlock, no lock wait timeout, no job run twice and every row done, in every run. REPEATABLE READ costs
 * this claim little (0-35%, about the spread between runs on this shared machine); the claim itself costs the
 * rest: it loses most candidates to other workers, one round trip each. Against the native claim the fallback
 * is 1.3-1.5x slower with one worker, 2-8x with 8 and 6-15x with 32, which is why it is taken only when asked for
 * (binlogFallback) or when the store runs this claim anyway. Not settled yet: the native claim at REPEATABLE
 * READ on the same server (isolation=repeatable-read, which statement logging accepts) ran 4,640 jobs/s with
 * one worker and 2,040-5,560 with 8 (5 to 12 deadlocks a run, each retried), not the storm measured above
 * (6,651 in 60 s); it stays out of the fallback until that difference is understood.
 */
export const STATEMENT_BINLOG_FALLBACK = { claimStrategy: 'conditional-update', isolation: 'repeatable-read' } as const;

/**
 * Whether the claim's UPDATE leaves a row exactly as the locked candidate plus the three values it writes,
 * so the claimed rows need not be read back: the query counts `surprises`, and there are none unless the
 * table has a column the server changes on UPDATE (ON UPDATE CURRENT_TIMESTAMP, a generated column), an
 * UPDATE trigger, a status column that is not an integer, a claimed_at below millisecond precision (the
 * server rounds the clock), or a column named like the claim's clock. statusq's own key column (dedupe) is
 * generated but no surprise: it holds the key while the row is pending or processing, so a claim leaves it as
 * it was. Counting it made every claim on a managed table read its rows back, one more round trip of five
 * (MariaDB 20 ms away, 64 slots: 10 claims of 64 rows in 1.86 s, 5 round trips each before the settle).
 */
export function mysqlClaimWritesQuery(table: ResolvedTable): Statement {
  const [schema, name] = splitTableName(table.table);
  return {
    sql:
      'SELECT (SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND (' +
      "EXTRA LIKE '%on update%' OR (EXTRA LIKE '%GENERATED%' AND COLUMN_NAME <> ?) OR COLUMN_NAME = ? " +
      "OR (COLUMN_NAME = ? AND DATA_TYPE NOT IN ('tinyint', 'smallint', 'mediumint', 'int', 'bigint')) " +
      "OR (COLUMN_NAME = ? AND (DATA_TYPE NOT IN ('datetime', 'timestamp') OR DATETIME_PRECISION < 3)))) + " +
      "(SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = COALESCE(?, DATABASE()) AND EVENT_OBJECT_TABLE = ? AND EVENT_MANIPULATION = 'UPDATE') AS surprises",
    params: [schema, name, LIVE_KEY_COLUMN, CLAIM_CLOCK, table.status, table.columns.claimedAt ?? null, schema, name],
  };
}

/** The user variable a one-packet claim keeps its ids in (a session's own: claims on one connection run one at a time). */
const CLAIM_IDS_VARIABLE = '@statusq_claim_ids';

/**
 * The claim in one packet, one round trip (NativeClaim.idsOnServer), where the ids are integers:
 *
 *   START TRANSACTION; SELECT GET_LOCK(...);
 *   SELECT JSON_ARRAYAGG(id) INTO @statusq_claim_ids FROM (SELECT id FROM t WHERE <due> ORDER BY <order> LIMIT n FOR UPDATE SKIP LOCKED) c;
 *   UPDATE JSON_TABLE(@statusq_claim_ids, ...) claimed STRAIGHT_JOIN t FORCE INDEX (PRIMARY) ON t.id = claimed.statusq_claimed_id
 *     SET status = 9, ... WHERE <due>;
 *   SELECT t.* FROM JSON_TABLE(...) claimed STRAIGHT_JOIN t ...; DO RELEASE_LOCK(...); COMMIT
 *
 * The same locks in the same order as the two-packet claim (the candidates locked by the SELECT, the UPDATE
 * only over them, by primary key), so the same reasoning holds; the ids just stay on the server, and the rows
 * come back as the UPDATE left them (no clock to carry, no read-back to decide on). JSON_TABLE needs MySQL 8.0.4
 * or MariaDB 10.6, as SKIP LOCKED does (MySQL 8.0.1): every server with a native claim. Ids of other types (text,
 * binary, decimal) would be compared through a JSON string's collation, so they keep the two-packet claim.
 * Measured (one worker x 64 slots, MariaDB through the TCP proxy): docs/benchmarks.md, "Claim round trips".
 */
export function mysqlClaimIdsOnServer(id: string, unsigned: boolean): ClaimIdsOnServer {
  const column = 'statusq_claimed_id';
  return {
    collect: (candidates) => `SELECT JSON_ARRAYAGG(statusq_candidates.${id}) INTO ${CLAIM_IDS_VARIABLE} FROM (${candidates}) statusq_candidates`,
    // The ids lead and each row is read by primary key (STRAIGHT_JOIN, FORCE INDEX): left to choose, MariaDB 10.11
    // scanned a table of a few rows first, locking every row it read, and the UPDATE then waited on rows other
    // claims held while they waited on it (a deadlock in a race of four workers, clean-clone CI 2026-12-06).
    rowsOf: (table) =>
      `JSON_TABLE(${CLAIM_IDS_VARIABLE}, '$[*]' COLUMNS (${column} BIGINT${unsigned ? ' UNSIGNED' : ''} PATH '$')) statusq_claimed STRAIGHT_JOIN ${table} FORCE INDEX (PRIMARY) ON ${table}.${id} = statusq_claimed.${column}`,
  };
}

/** The id column's integer type, if it is one: `unsigned` or `signed` (one row), else no row or another type. */
export function mysqlIdTypeQuery(table: ResolvedTable): Statement {
  const [schema, name] = splitTableName(table.table);
  return {
    sql:
      "SELECT CASE WHEN DATA_TYPE IN ('tinyint', 'smallint', 'mediumint', 'int', 'bigint') THEN IF(COLUMN_TYPE LIKE '%unsigned%', 'unsigned', 'signed') ELSE DATA_TYPE END AS id_type " +
      'FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME = ?',
    params: [schema, name, table.id],
  };
}
