import { pathToFileURL } from 'node:url';
import { isAbsolute } from 'node:path';
import { connectBroker, type TableConfig } from '@statusq/core';
import type { Broker, BrokerModule } from '@statusq/core/adapter';

/** A broker a child process connects to itself: the package's built module, the URL and the queue. */
export interface ChildBroker {
  module: string;
  url: string;
  queue: string;
  /** How long a lost connection is retried before the child gives up (every broker package takes it); default the package's. */
  reconnectWindowMs?: number;
}

/** Opens the broker a child was given. */
export async function openChildBroker(table: TableConfig, broker: ChildBroker): Promise<Broker> {
  const module = (await import(isAbsolute(broker.module) ? pathToFileURL(broker.module).href : broker.module)) as BrokerModule;
  // A broker package's own options travel beside the common ones (connectBroker passes them on).
  const options = { table: table.table, queue: broker.queue, broker: module, ...(broker.reconnectWindowMs !== undefined && { reconnectWindowMs: broker.reconnectWindowMs }) };
  return connectBroker(broker.url, options);
}
