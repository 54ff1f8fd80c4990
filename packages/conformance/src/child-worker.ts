/**
 * A worker in its own OS process, for the multi-process tests:
 *
 *   node child-worker.js '{"adapterModule": "/abs/adapter/dist/index.js", "url": "db://host/test",
 *                          "table": {"table": "table_a"}, "handlerPath": "/abs/handler.mjs",
 *                          "concurrency": 4, "worker": {"maxAttempts": 3}}'
 *
 * It imports the adapter, opens its own connection with `connect(url)`, loads the handler with
 * loadHandler, runs a Worker with exitWhenEmpty, and prints one JSON line with its counters on stdout.
 * SIGTERM drains (stop) and still prints the counters. Anything else goes to stderr; failure exits 1.
 *
 * Under a Supervisor nobody reads a child's stdout, so when STATUSQ_WORKER_LOG names a file the child also
 * appends to it how each job it ran ended ("id attempt outcome pid": completed | retried | failed | abused
 * once its settle committed, claim-lost when the settle or a heartbeat found the claim gone) and, at the
 * end, its result as one JSON line.
 */
import { appendFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { isAbsolute } from 'node:path';
import { StoreError, Worker, describeError, loadHandler, type Job, type Store, type TableConfig, type WorkerOptions } from '@statusq/core';
import { openChildBroker, type ChildBroker } from './child-broker.js';

export interface ChildWorkerArgs {
  adapterModule: string;
  url: string;
  table: TableConfig;
  handlerPath: string;
  concurrency?: number;
  /** Any other WorkerOptions that survive JSON (no store, table, handler, isAbuse or random). */
  worker?: Omit<WorkerOptions, 'store' | 'table' | 'handler' | 'isAbuse' | 'random' | 'concurrency' | 'from'>;
  /** Take jobs from this broker (WorkerOptions.from) instead of polling. */
  broker?: ChildBroker;
}

export interface ChildWorkerResult {
  pid: number;
  workerId: string;
  counters: Record<string, number>;
  /** `error` events the worker survived, by `during`. */
  errors: Record<string, number>;
  /** The same errors by StoreError kind (`ConnectionLost`, ...), or by error name for anything else. */
  errorKinds: Record<string, number>;
  errorSamples: string[];
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2] ?? '{}') as ChildWorkerArgs;
  const specifier = isAbsolute(args.adapterModule) ? pathToFileURL(args.adapterModule).href : args.adapterModule;
  const adapter = (await import(specifier)) as { connect(url: string): Promise<Store> };
  const store = await adapter.connect(args.url);
  const from = args.broker ? await openChildBroker(args.table, args.broker) : undefined;
  try {
    const { handler, handlers, isAbuse } = await loadHandler(args.handlerPath);
    const worker = await Worker.create({
      ...args.worker,
      from,
      store,
      table: args.table,
      handler,
      handlers,
      isAbuse,
      concurrency: args.concurrency ?? 4,
      exitWhenEmpty: args.worker?.exitWhenEmpty ?? true,
    });
    const errors: Record<string, number> = {};
    const errorKinds: Record<string, number> = {};
    const errorSamples: string[] = [];
    worker.on('error', ({ error, during }) => {
      errors[during] = (errors[during] ?? 0) + 1;
      const kind = error instanceof StoreError ? error.kind : error instanceof Error ? error.name : typeof error;
      errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
      if (errorSamples.length < 5) errorSamples.push(`${during}: ${describeError(error)}`);
    });
    const log = process.env.STATUSQ_WORKER_LOG;
    if (log) {
      const settled = (outcome: string) => ({ job }: { job: Job }) => appendFileSync(log, `${String(job.id)} ${job.attempt} ${outcome} ${process.pid}\n`);
      worker.on('completed', settled('completed'));
      worker.on('retried', settled('retried'));
      worker.on('failed', settled('failed'));
      worker.on('abused', settled('abused'));
      worker.on('claim-lost', settled('claim-lost'));
    }
    process.once('SIGTERM', () => void worker.stop(5000));
    const counters = await worker.run();
    const result: ChildWorkerResult = { pid: process.pid, workerId: worker.workerId, counters: { ...counters }, errors, errorKinds, errorSamples };
    process.stdout.write(`${JSON.stringify(result)}\n`);
    if (log) appendFileSync(log, `${JSON.stringify(result)}\n`);
  } finally {
    await from?.close();
    await store.close();
  }
}

main().then(
  // A drained worker may leave timers behind (see Worker.stop); the result is printed, so leave now.
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`child-worker failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
