import type { NativeClaim } from '@statusq/core/adapter';

/**
 * PostgreSQL's native claim hooks for core's claim pipeline. Without aging, one statement and one round trip
 * per batch:
 *
 *   UPDATE t SET status = 9, claimed_at = now, worker_id = $token
 *   WHERE id = ANY(ARRAY(SELECT id FROM t WHERE <due> ORDER BY date DESC LIMIT n FOR UPDATE SKIP LOCKED))
 *   RETURNING *
 *
 * The subquery locks the candidates it finds and skips rows other claimers hold, so concurrent claimers never
 * wait on each other and never lose a claim; a row committed by someone else between the snapshot and the
 * lock is re-checked against <due> by the lock itself. That locked re-check is the claim's guard: from the
 * lock to the UPDATE nobody else can change the row, so the outer WHERE needs only the ids (and finds them by
 * primary key; an outer `status IS NULL` tempts the planner into scanning the whole pending index). The
 * candidate SELECT is core's, served by the partial pending index.
 *
 * `= ANY(ARRAY(subquery))` rather than `IN (subquery)`: ARRAY() is an init plan, run exactly once. A plain
 * `IN` may be planned as a nested-loop semi join that re-runs the locking subquery for every outer row
 * (seen with a freshly filled table, whose statistics promise one row); each re-run skips the rows the
 * previous one locked and hands out more, so one claim took 110 rows with LIMIT 5.
 *
 * With aging, core runs the aged and the ordered selection, each with FOR UPDATE SKIP LOCKED, then one
 * guarded UPDATE ... RETURNING of the merged ids, in one transaction (PostgresStore.transaction).
 */
export const postgresNativeClaim: NativeClaim = {
  lockCandidates: ' FOR UPDATE SKIP LOCKED',
  oneStatement: ({ table, id, set, candidates, returning }) => `UPDATE ${table} SET ${set} WHERE ${id} = ANY(ARRAY(${candidates})) RETURNING ${returning}`,
};
