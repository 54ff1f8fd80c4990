import type { NativeClaim } from '@statusq/core/adapter';

/**
 * SQLite's native claim hooks for core's claim pipeline. Without aging, one statement:
 * `UPDATE ... WHERE id IN (SELECT id ... ORDER BY ... LIMIT n) RETURNING *`. SQLite has one writer at a
 * time and a write statement takes the write lock before it reads, so the candidate selection and the
 * update cannot interleave with another claimer: no claim is ever lost and a batch of n costs one statement
 * and one commit. (Measured on a 2-core machine: a 50-row claim-and-complete loop reached about 19,000
 * jobs/s, against about 4,000 single-row commits/s.)
 *
 * With aging the candidates come from two selections (aged rows oldest first, then the configured order),
 * claimed by id in one BEGIN IMMEDIATE transaction (SqliteStore.transaction). Its write lock is what keeps
 * other claimers out, so the candidate SELECTs need no locking clause.
 */
export const sqliteNativeClaim: NativeClaim = {
  lockCandidates: '',
  oneStatement: ({ table, id, set, candidates, returning }) => `UPDATE ${table} SET ${set} WHERE ${id} IN (${candidates}) RETURNING ${returning}`,
};
