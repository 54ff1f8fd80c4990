/**
 * What every adapter's `Store.runnerFor` shares: recognising a knex transaction by its shape (core imports no
 * knex), the ConfigError for a handle it does not take, and a runner whose errors go through the adapter's
 * error mapper.
 */
import { ConfigError } from '../protocol/errors.js';
import type { CallerRunner, ExecResult, JobId, Statement } from './store.js';

/** Runs one SQL text with positional `?` bindings on a knex transaction's connection (`trx.raw`). */
export type KnexRaw = (sql: string, bindings: readonly unknown[]) => Promise<unknown>;

/** knex numbers `?` placeholders itself on every database (even where the dialect's own is `$1`), so statements for it use `?`. */
export const KNEX_PLACEHOLDER = (): string => '?';

interface KnexShape {
  raw?: unknown;
  isTransaction?: unknown;
  client?: { dialect?: unknown } | null;
}

/**
 * `handle` as a knex transaction on `dialect` (knex's client dialect name, as the adapter passes it), or null when it
 * is not knex. A knex instance that is not a transaction is refused: each statement would commit on its own,
 * on whichever pooled connection knex picks, never with the application's writes.
 */
export function knexTransactionOf(handle: unknown, dialect: string): KnexRaw | null {
  if (typeof handle !== 'function') return null;
  const knex = handle as KnexShape;
  if (typeof knex.raw !== 'function' || typeof knex.client !== 'object' || knex.client === null) return null;
  if (knex.isTransaction !== true) {
    throw new ConfigError('enqueue: the knex instance given as transaction is not a transaction; pass the trx of knex.transaction(async (trx) => ...)');
  }
  if (knex.client.dialect !== dialect) {
    throw new ConfigError(`enqueue: the knex transaction is on ${String(knex.client.dialect)}, but this store is on ${dialect}`);
  }
  const raw = knex.raw as (sql: string, bindings: readonly unknown[]) => PromiseLike<unknown>;
  return async (sql, bindings) => raw.call(handle, sql, bindings);
}

/** The ConfigError for a `transaction` handle the store does not take; `accepted` lists what it does take. */
export function unrecognisedHandle(handle: unknown, accepted: string): ConfigError {
  return new ConfigError(`enqueue: transaction must be ${accepted}; got ${describeHandle(handle)}`);
}

function describeHandle(handle: unknown): string {
  if (handle === null || handle === undefined) return String(handle);
  if (typeof handle === 'function') return 'a function';
  if (typeof handle !== 'object') return `a ${typeof handle}`;
  const name = (handle as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== 'Object' ? `a ${name}` : 'an object';
}

/** What an adapter's runner adds to `callerRunner`'s: see CallerRunner. */
export interface CallerRunnerOptions {
  placeholder?: ((index: number) => string) | undefined;
  /** Resolves to false when the connection is not inside an open transaction (its failure goes through `mapError`). */
  inTransaction?: (() => Promise<boolean>) | undefined;
  /** Says, after "enqueue: ", what `inTransaction` found and what to do (`the client has no open transaction; ...`). */
  notInTransaction?: string | undefined;
}

/** A CallerRunner over `run`, rejecting with what `mapError` (the adapter's error mapper) makes of a failure. */
export function callerRunner(run: (statement: Statement) => Promise<ExecResult>, mapError: (error: unknown) => unknown, options: CallerRunnerOptions = {}): CallerRunner {
  const { inTransaction } = options;
  return {
    placeholder: options.placeholder,
    async execute(statement) {
      try {
        return await run(statement);
      } catch (error) {
        throw mapError(error);
      }
    },
    assertInTransaction: inTransaction
      ? async () => {
          let open: boolean;
          try {
            open = await inTransaction();
          } catch (error) {
            throw error instanceof ConfigError ? error : mapError(error);
          }
          if (!open) throw new ConfigError(`enqueue: ${options.notInTransaction ?? 'the connection has no open transaction; begin one first'}`);
        }
      : undefined,
  };
}

/**
 * An id the application gave for an integer id column ('17', 17n), typed as stores read ids: a number where
 * exact, else as given (a store reads such an id as a bigint or as a decimal string, whichever its driver gives).
 */
export function integerIdOf(value: string | bigint): JobId {
  if (typeof value === 'string' && !/^[-+]?\d+$/.test(value.trim())) return value;
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : value;
}
