/**
 * Enqueue in the application's own PostgreSQL transaction (Store.runnerFor): on a knex transaction, or on the
 * pg Client or PoolClient that ran BEGIN. Recognised by shape, so an application's own copy of pg or knex
 * works too.
 */
import { ConfigError, KNEX_PLACEHOLDER, callerRunner, knexTransactionOf, unrecognisedHandle, type CallerRunner, type ExecResult, type Row } from '@statusq/core/adapter';
import { toStoreError } from './postgres-errors.js';
import { INT8_OID, parseInt8 } from './postgres-types.js';

const ACCEPTED = 'a knex transaction (trx) on PostgreSQL, or the pg Client or PoolClient that ran BEGIN';

interface PgResult {
  rows?: Row[];
  rowCount?: number | null;
  fields?: Array<{ name: string; dataTypeID: number }>;
}

interface PgClient {
  query(config: { text: string; values: unknown[] }): Promise<PgResult>;
}

function isPgClient(handle: unknown): handle is PgClient {
  if (typeof handle !== 'object' || handle === null) return false;
  const client = handle as Record<string, unknown>;
  return typeof client.query === 'function' && typeof client.connection === 'object' && 'processID' in client;
}

function isPgPool(handle: unknown): boolean {
  if (typeof handle !== 'object' || handle === null) return false;
  const pool = handle as Record<string, unknown>;
  return typeof pool.connect === 'function' && typeof pool.query === 'function' && 'totalCount' in pool;
}

/** See the file comment; anything else is a ConfigError. */
export function postgresRunnerFor(handle: unknown): CallerRunner {
  const raw = knexTransactionOf(handle, 'postgresql');
  if (raw) return callerRunner(async (statement) => fromPg((await raw(statement.sql, statement.params)) as PgResult), toStoreError, KNEX_PLACEHOLDER);
  if (isPgPool(handle)) throw new ConfigError('enqueue: a pg Pool runs each query on any of its connections, outside any transaction; pass the client of pool.connect() that ran BEGIN');
  if (!isPgClient(handle)) throw unrecognisedHandle(handle, ACCEPTED);
  const client = handle;
  return callerRunner(async (statement) => fromPg(await client.query({ text: statement.sql, values: statement.params })), toStoreError);
}

/**
 * The application's connection parses with its own type parsers, where int8 is text by default; ids come
 * back as this store reads them (postgresTypes): a number, or a bigint past 2^53.
 */
function fromPg(result: PgResult): ExecResult {
  const rows = result.rows ?? [];
  for (const field of result.fields ?? []) {
    if (field.dataTypeID !== INT8_OID) continue;
    for (const row of rows) {
      const value = row[field.name];
      if (typeof value === 'string') row[field.name] = parseInt8(value);
    }
  }
  return { rows, affected: result.rowCount ?? 0 };
}
