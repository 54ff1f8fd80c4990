import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

export interface DemoOptions {
  /** Rows seeded into table_a. */
  rows: number;
  /** Workers, each on its own SQLite connection. */
  workers: number;
  /** Jobs each worker runs at once. */
  concurrency: number;
  /** Rows each worker claims per claim call. */
  batch: number;
  /** The database file; deleted and recreated on every run. */
  db: string;
  /** When set, the workers are this many OS processes started by `statusq work --processes`. */
  processes: number | null;
}

/** Next to the built script (apps/demo/.data/), so every run finds and replaces the same file. */
const DEFAULT_DB = fileURLToPath(new URL('../.data/demo.db', import.meta.url));

export const USAGE = `usage: pnpm demo [--rows N] [--workers N | --processes N] [--concurrency N] [--batch N] [--db PATH]
       (or, once built: node apps/demo/dist/demo.js [options])

  --rows N         rows seeded into table_a (default 20000)
  --workers N      workers in this process, each with its own SQLite connection (default 4)
  --processes N    instead, N worker processes run by \`statusq work --processes N\` (the CLI as a user runs it)
  --concurrency N  jobs each worker runs at once (default 16)
  --batch N        rows claimed per claim call, at most the free slots (default 16)
  --db PATH        database file, deleted and recreated each run (default apps/demo/.data/demo.db)`;

export class UsageError extends Error {}

export function parseOptions(argv: readonly string[]): DemoOptions | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        rows: { type: 'string' },
        workers: { type: 'string' },
        concurrency: { type: 'string' },
        batch: { type: 'string' },
        db: { type: 'string' },
        processes: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  if (values.help) return 'help';
  return {
    rows: positiveInteger(values.rows, 20_000, '--rows', 5_000_000),
    workers: positiveInteger(values.workers, 4, '--workers', 64),
    concurrency: positiveInteger(values.concurrency, 16, '--concurrency', 1_000),
    batch: positiveInteger(values.batch, 16, '--batch', 1_000),
    db: resolve(values.db ?? DEFAULT_DB),
    processes: values.processes === undefined ? null : positiveInteger(values.processes, 1, '--processes', 64),
  };
}

function positiveInteger(text: string | undefined, fallback: number, flag: string, max: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n) || n < 1 || n > max) {
    throw new UsageError(`${flag} must be an integer from 1 to ${max}, got ${JSON.stringify(text)}`);
  }
  return n;
}
