import { StatusqError, StoreError } from '@statusq/core';
import { COMMAND_FLAGS, parseCommandLine, type Command } from './args.js';
import * as commands from './commands.js';
import type { Io } from './commands.js';

export const USAGE = `usage: statusq <command> [flags]

  init     --db URL [--table jobs]
  migrate  --db URL --table T [--with leases,retries,results] [--status-column C] [--order-column C]
  enqueue  --db URL [--table jobs] (--payload JSON | --file rows.ndjson | --file -) [--chunk N]
  work     --db URL --table T --handler PATH [--id-column C] [--status-column C] [--order-column C]
           [--order newest|oldest] [--concurrency N] [--batch N] [--max-attempts N]
           [--retry-delay DURATION] [--lease DURATION] [--aging DURATION]
           [--strategy native|conditional-update] [--stop-timeout DURATION] [--job-timeout DURATION] [--job-timeout-grace DURATION]
           [--exit-when-empty] [--verbose]
           [--processes P]
  stats    --db URL --table T [--json]
  requeue  --db URL --table T --status failed|abuse|processing [--id ID ...] [--lease DURATION] [--force]

URLs: sqlite:PATH, postgres://user@host:port/db, mysql://user:pass@host:port/db
Durations: 250ms, 30s, 5m, 1h. Exit codes: 0 ok (queue empty, or drained after a signal), 1 database or
runtime failure (or worker processes crashing at start-up), 2 bad input, 3 stopped past --stop-timeout
(running jobs aborted and handed back), 4 recycled (a job ignored --job-timeout), 5 requeue left some of
the --id rows it named (listed), 130 stopped hard.`;

/** Runs one command line; returns the exit code. Bad input is one line on stderr and exit code 2. */
export async function main(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    (name === undefined ? io.err : io.out)(USAGE);
    return name === undefined ? 2 : 0;
  }
  if (!(name in COMMAND_FLAGS)) {
    io.err(`statusq: unknown command ${JSON.stringify(name)}; commands: ${Object.keys(COMMAND_FLAGS).join(', ')} (statusq --help)`);
    return 2;
  }
  const command = name as Command;
  try {
    const flags = parseCommandLine(command, rest);
    return await commands[command](flags, io, rest);
  } catch (error) {
    if (error instanceof StoreError) {
      io.err(`statusq: database error (${error.kind}${error.nativeCode !== undefined ? ` ${error.nativeCode}` : ''}): ${oneLine(error.message)}`);
      return 1;
    }
    if (error instanceof StatusqError) {
      io.err(`statusq: ${oneLine(error.message)}`);
      return 2;
    }
    io.err(`statusq: ${oneLine(error instanceof Error ? error.message : String(error))}`);
    return 1;
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
