/**
 * Every statement that changes a job's status, built once for all dialects. Each UPDATE is guarded by the
 * status it expects (and by the claim token when the table has a worker-id column): the affected-row count
 * says whether the transition happened, so a second worker, a late settle or a reaped lease changes nothing.
 * TransitionSql is one object per table with every statement on it; each operation's statements live in their
 * own file (claim, settle, recovery, dispatch, reads, inserts), over the parts they share (table-sql.ts).
 */
import { ClaimStatements } from './claim-sql.js';
import { DispatchStatements } from './dispatch-sql.js';
import { InsertStatements } from './insert-sql.js';
import { ReadStatements } from './read-sql.js';
import { RecoveryStatements } from './recovery-sql.js';
import { SettleStatements } from './settle-sql.js';
import { TableSql } from './table-sql.js';

export { MAX_ERROR_LENGTH, Params, quoteTable, truncateError, type QuotedTable } from './table-sql.js';
export { GIVE_UP_PAGE, type AttemptCharge } from './recovery-sql.js';
export { LOOK_AHEAD_ROWS } from './read-sql.js';
export type { NotBefore } from './insert-sql.js';

const OPERATIONS = [ClaimStatements, SettleStatements, RecoveryStatements, DispatchStatements, ReadStatements, InsertStatements];

// The TypeScript handbook's mixin pattern: the class takes the operations' methods, the interface their types.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class TransitionSql extends TableSql {}
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface TransitionSql extends ClaimStatements, SettleStatements, RecoveryStatements, DispatchStatements, ReadStatements, InsertStatements {}

for (const operation of OPERATIONS) {
  for (const name of Object.getOwnPropertyNames(operation.prototype)) {
    if (name === 'constructor') continue;
    if (Object.prototype.hasOwnProperty.call(TransitionSql.prototype, name)) throw new Error(`TransitionSql: two operations define ${name}`);
    Object.defineProperty(TransitionSql.prototype, name, Object.getOwnPropertyDescriptor(operation.prototype, name)!);
  }
}
