/**
 * A second connection in its own process that runs some statements, holds its session open until told to
 * go on, then runs the rest: the Busy test uses it to hold the database's write lock (the adapter's
 * `writeLock.take`) from another process.
 *
 *   node child-session.js '{"adapterModule": "...", "url": "...", "before": ["..."], "after": ["..."]}'
 *
 * Prints `ready` once `before` ran, waits for a line on stdin, runs `after`, prints `done` and exits.
 */
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { isAbsolute } from 'node:path';
import type { Store } from '@statusq/core';

export interface ChildSessionArgs {
  adapterModule: string;
  url: string;
  before: string[];
  after: string[];
}

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2] ?? '{}') as ChildSessionArgs;
  const specifier = isAbsolute(args.adapterModule) ? pathToFileURL(args.adapterModule).href : args.adapterModule;
  const adapter = (await import(specifier)) as { connect(url: string): Promise<Store> };
  const store = await adapter.connect(args.url);
  try {
    for (const sql of args.before) await store.execute({ sql, params: [] });
    process.stdout.write('ready\n');
    const lines = createInterface({ input: process.stdin });
    await new Promise<void>((resolve) => {
      lines.once('line', () => resolve());
      lines.once('close', () => resolve());
    });
    lines.close();
    for (const sql of args.after) await store.execute({ sql, params: [] });
    process.stdout.write('done\n');
  } finally {
    await store.close();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`child-session failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
