import { pathToFileURL } from 'node:url';
import { isAbsolute } from 'node:path';
import { connectBroker, type TableConfig } from '@statusq/core';
import type { Broker, BrokerModule } from '@statusq/core/adapter';

/** A broker a child process connects to itself: the package's built module, the URL and the queue. */
export interface ChildBroker {
  module: string;
  url: string;
  queue: string;
}

/** Opens the broker a child was given. */
export async function openChildBroker(table: TableConfig, broker: ChildBroker): Promise<Broker> {
  const module = (await import(isAbsolute(broker.module) ? pathToFileURL(broker.module).href : broker.module)) as BrokerModule;
  return connectBroker(broker.url, { table: table.table, queue: broker.queue, broker: module });
}
