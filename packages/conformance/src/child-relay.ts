/**
 * A relay in its own OS process, for the broker path's cases:
 *
 *   node child-relay.js '{"adapterModule": "/abs/adapter/dist/index.js", "url": "db://host/test",
 *                         "table": {"table": "jobs"}, "broker": {"module": "/abs/broker/dist/index.js",
 *                         "url": "amqp://...", "queue": "statusq.t1"}, "relay": {"redispatchMs": 5000}}'
 *
 * It prints `published <n>` after each confirmed batch (the total so far), so a test can kill it mid-run,
 * and on SIGTERM stops after the batch in flight and prints its counters as one JSON line.
 */
import { pathToFileURL } from 'node:url';
import { isAbsolute } from 'node:path';
import { Relay, type RelayOptions, type Store, type TableConfig } from '@statusq/core';
import { openChildBroker, type ChildBroker } from './child-broker.js';

export interface ChildRelayArgs {
  adapterModule: string;
  url: string;
  table: TableConfig;
  broker: ChildBroker;
  relay?: Pick<RelayOptions, 'batch' | 'redispatchMs' | 'pollMinMs' | 'pollMaxMs'>;
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2] ?? '{}') as ChildRelayArgs;
  const adapter = (await import(isAbsolute(args.adapterModule) ? pathToFileURL(args.adapterModule).href : args.adapterModule)) as { connect(url: string): Promise<Store> };
  const store = await adapter.connect(args.url);
  const broker = await openChildBroker(args.table, args.broker);
  try {
    const relay = await Relay.create({ pollMinMs: 2, pollMaxMs: 20, ...args.relay, store, table: args.table, to: broker });
    relay.on('published', () => process.stdout.write(`published ${relay.counters.published}\n`));
    relay.on('error', ({ error, during }) => process.stderr.write(`relay error during ${during}: ${String(error)}\n`));
    process.once('SIGTERM', () => void relay.stop());
    const counters = await relay.run();
    process.stdout.write(`${JSON.stringify({ pid: process.pid, counters })}\n`);
  } finally {
    await broker.close();
    await store.close();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`child-relay failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
