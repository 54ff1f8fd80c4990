import { Queue, connectBroker, type Store, type TableConfig } from '@statusq/core';
import { assertDispatchColumns, deadLetterFor, type Broker, type GivenUpRow } from '@statusq/core/tools';
import { errorFields, type Logger } from './log.js';

/** How long start-up waits for the broker before exit 1. */
export const BROKER_CONNECT_TIMEOUT_MS = 10_000;

/**
 * The broker for `table`, once the table is known to have the broker path's columns: a table without them is
 * bad input (exit 2) found before any connection to the broker.
 */
export async function openBroker(store: Store, config: TableConfig, url: string, what: string, brokerQueue: string | undefined): Promise<Broker> {
  const queue = await Queue.open(store, config);
  assertDispatchColumns(queue.table, what);
  return connectBroker(url, { table: queue.table.table, connectTimeoutMs: BROKER_CONNECT_TIMEOUT_MS, ...(brokerQueue !== undefined && { queue: brokerQueue }) });
}

/**
 * The launcher's dead letters for rows it gave up after a child died holding them (its children publish their
 * own). Rows are already failed, which is the record: a broker that cannot be reached is logged, not retried.
 */
export async function deadLetterGivenUp(to: { url: string; queue: string | undefined }, table: string, rows: readonly GivenUpRow[], log: Logger): Promise<void> {
  try {
    const broker = await connectBroker(to.url, { table, connectTimeoutMs: BROKER_CONNECT_TIMEOUT_MS, ...(to.queue !== undefined && { queue: to.queue }) });
    try {
      for (const row of rows) await broker.deadLetter(deadLetterFor(table, row));
    } finally {
      await broker.close();
    }
  } catch (error) {
    log.error({ err: errorFields(error), rows: rows.length }, `could not dead-letter ${rows.length} given-up row${rows.length === 1 ? '' : 's'} (they are failed in the table): ${errorFields(error).message as string}`);
  }
}
