/**
 * ctx.transaction: a handler's database writes and its job's move to done in one transaction, guarded by the
 * claim token (River's JobCompleteTx, with an exact guard: a token is written by one claim only, so a worker whose
 * claim was rescued and claimed again elsewhere matches no row, where "the job is still running" would).
 */
import { ClaimLostError, JobTransactionError, isStoreError } from '../protocol/errors.js';
import type { Queue } from '../queue/queue.js';
import { runStatement } from '../sql/side-writes.js';
import { TransitionSql } from '../sql/transition-sql.js';
import { KNEX_PLACEHOLDER } from '../store/caller-transaction.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import type { StatementRunner } from '../store/store.js';
import { storedResult, type InFlight, type Outcome, type TransactionLender } from './job-run.js';

/** Opens a transaction, runs `body` in it with the application's handle, core's runner and the statements for that runner, and commits. */
type Lender = <T>(body: (handle: unknown, runner: StatementRunner, sql: TransitionSql) => Promise<T>) => Promise<T>;

interface KnexShape {
  transaction?: unknown;
  isTransaction?: unknown;
}

export class JobTransactions implements TransactionLender {
  /** The table's statements with knex's `?` placeholders, made when a knex transaction is first lent. */
  private knexSql: TransitionSql | null = null;

  constructor(private readonly queue: Queue) {}

  async run<T>(flight: InFlight, body: (tx: never) => T | Promise<T>, options: { readonly knex?: unknown } | undefined): Promise<Awaited<T>> {
    const id = String(flight.job.id);
    if (flight.lendings > 0) throw new JobTransactionError(`job ${id}: ctx.transaction was already called; a job settles in one transaction`);
    if (flight.ranMs !== null) throw new JobTransactionError(`job ${id}: ctx.transaction was called after its handler returned; await it inside the handler`);
    const lend = this.lenderFor(id, options);
    refuseUnlessHeld(flight);
    flight.lendings++;
    let ended!: () => void;
    flight.lent = new Promise((resolve) => (ended = resolve));
    // Set once the settle matched the row: a COMMIT that fails after it may still have landed.
    let settled: { value: Awaited<T> } | null = null;
    try {
      const value = await lend(async (handle, runner, sql) => {
        const value = await (body as (tx: unknown) => T | Promise<T>)(handle);
        const outcome: Outcome = { kind: 'complete', result: value, stored: storedResult(this.queue.table, value) };
        refuseUnlessHeld(flight);
        // From here a heartbeat that finds the row gone may be finding this very settle: the transaction decides.
        flight.state = 'committing';
        const { affected } = await runStatement(runner, sql.complete(flight.job.id, flight.token, outcome.stored));
        if (affected !== 1) {
          throw new ClaimLostError(`job ${id}: its claim was gone when ctx.transaction settled it (lease taken over, requeued or cancelled); everything it wrote was rolled back`);
        }
        flight.outcome = outcome;
        settled = { value };
        return value;
      }).catch(async (error: unknown) => {
        if (settled !== null && isStoreError(error) && error.kind === 'ConnectionLost' && (await this.landed(flight))) return settled.value;
        throw error;
      });
      flight.state = 'committed';
      return value;
    } catch (error) {
      if (flight.state === 'committing') {
        // Not committed (or not known to be): the handler's outcome settles the row, guarded as ever, so a
        // commit that did land before its answer was lost makes that settle match nothing.
        flight.state = 'running';
        flight.outcome = null;
      }
      throw error;
    } finally {
      flight.lent = null;
      ended();
    }
  }

  /**
   * Whether the row is done under this claim's token: after a connection lost around COMMIT, the commit may have
   * landed with its answer lost. Read with the settle's retries; a read that cannot be made says no (the handler's
   * own settle then meets the row as it is, guarded).
   */
  private async landed(flight: InFlight): Promise<boolean> {
    try {
      const { rows } = await withStoreRetry(() => this.queue.store.execute(this.queue.sql.completedUnder([flight.job.id], flight.token)), STORE_RETRY.settle);
      return rows.length === 1;
    } catch {
      return false;
    }
  }

  private lenderFor(id: string, options: { readonly knex?: unknown } | undefined): Lender {
    const { store } = this.queue;
    const knex = options?.knex;
    if (knex !== undefined) {
      const shape = knex as KnexShape | null;
      if (typeof knex !== 'function' || typeof shape!.transaction !== 'function') throw new JobTransactionError(`job ${id}: ctx.transaction's knex option is not a knex instance`);
      if (shape!.isTransaction === true) throw new JobTransactionError(`job ${id}: ctx.transaction's knex option is a transaction; pass the knex instance, statusq begins and commits the job's own`);
      if (!store.runnerFor) throw new JobTransactionError(`job ${id}: this ${store.dialect.name} store cannot run statements on a knex transaction`);
      const runnerFor = store.runnerFor.bind(store);
      const sql = (this.knexSql ??= new TransitionSql(this.queue.table, { ...store.dialect, placeholder: KNEX_PLACEHOLDER }));
      const transaction = shape!.transaction as (body: (trx: unknown) => Promise<unknown>) => Promise<unknown>;
      return <T>(body: (handle: unknown, runner: StatementRunner, sql: TransitionSql) => Promise<T>) => transaction.call(knex, (trx) => body(trx, runnerFor(trx), sql)) as Promise<T>;
    }
    if (!store.lendTransaction) throw new JobTransactionError(`job ${id}: this ${store.dialect.name} store cannot lend a transaction; pass ctx.transaction(body, { knex }) with the application's knex`);
    return (body) => store.lendTransaction!((tx) => body(tx.handle, tx.runner, this.queue.sql));
  }
}

/** The claim must still be this job's, and its time not run out, before anything of the transaction commits. */
function refuseUnlessHeld(flight: InFlight): void {
  const id = String(flight.job.id);
  if (flight.timedOut) throw new ClaimLostError(`job ${id} ran past its timeout; ctx.transaction rolled back what it wrote`);
  if (flight.state !== 'running') {
    const why = flight.abortReason?.message ?? 'the claim is no longer held';
    throw new ClaimLostError(`job ${id}: ${why}; ctx.transaction rolled back what it wrote`);
  }
}
