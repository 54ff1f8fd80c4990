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
  query(text: string): Promise<unknown>;
  /** pg 8.21 and later: the status of the last ReadyForQuery, `I` idle, `T` in a transaction, `E` in a failed one; null on the native client. */
  getTransactionStatus?(): string | null;
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
  if (raw) return callerRunner(async (statement) => fromPg((await raw(statement.sql, statement.params)) as PgResult), toStoreError, { placeholder: KNEX_PLACEHOLDER });
  if (isPgPool(handle)) throw new ConfigError('enqueue: a pg Pool runs each query on any of its connections, outside any transaction; pass the client of pool.connect() that ran BEGIN');
  if (!isPgClient(handle)) throw unrecognisedHandle(handle, ACCEPTED);
  const client = handle;
  return callerRunner(async (statement) => fromPg(await client.query({ text: statement.sql, values: statement.params })), toStoreError, {
    inTransaction: () => inTransactionBlock(client),
    notInTransaction: 'the pg client has no open transaction, so each row would commit on its own; run BEGIN on it first (and COMMIT after enqueue)',
  });
}

/**
 * Whether `client` is inside a transaction block (a failed one too: its INSERT is then refused by the server).
 * pg 8.21+ tracks the status every ReadyForQuery carries, at no cost. Older pg and the native client do not:
 * a SAVEPOINT, which PostgreSQL refuses outside a block (25P01), tells, in one round trip with its RELEASE.
 */
async function inTransactionBlock(client: PgClient): Promise<boolean> {
  const status = typeof client.getTransactionStatus === 'function' ? client.getTransactionStatus() : null;
  if (status === 'T' || status === 'E') return true;
  if (status === 'I') return false;
  try {
    await client.query('SAVEPOINT statusq_in_transaction; RELEASE SAVEPOINT statusq_in_transaction');
    return true;
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (code === NO_ACTIVE_SQL_TRANSACTION) return false;
    if (code === IN_FAILED_SQL_TRANSACTION) return true;
    throw error;
  }
}
const NO_ACTIVE_SQL_TRANSACTION = '25P01';
const IN_FAILED_SQL_TRANSACTION = '25P02';

/**
 * The application's connection parses with its own type parsers: int8 is text by default, a bigint where the
 * application set its own parser. Ids come back as this store reads them (postgresTypes): a number, or a bigint
 * past 2^53.
 */
function fromPg(result: PgResult): ExecResult {
  const rows = result.rows ?? [];
  for (const field of result.fields ?? []) {
    if (field.dataTypeID !== INT8_OID) continue;
    for (const row of rows) {
      const value = row[field.name];
      if (typeof value === 'string' || typeof value === 'bigint') row[field.name] = parseInt8(String(value));
    }
  }
  return { rows, affected: result.rowCount ?? 0 };
}
