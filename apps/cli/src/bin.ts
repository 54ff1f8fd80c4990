#!/usr/bin/env node
import { stdoutLogDestination } from './log.js';
import { main } from './main.js';

// A reader that went away (`statusq inspect | head -3`) is no failure of the command: what it would still have
// printed is dropped, and the command ends as it would have (a worker goes on with its claims). Unhandled, the
// EPIPE ended the process with a stack trace.
let stdoutGone = false;
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  stdoutGone = true;
});

const exitCode = await main(process.argv.slice(2), {
  out: (line) => {
    if (!stdoutGone) process.stdout.write(`${line}\n`);
  },
  err: (line) => process.stderr.write(`${line}\n`),
  onSignal(handler) {
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
    return () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    };
  },
  readStdin: () => process.stdin,
  logDestination: stdoutLogDestination,
});
process.exitCode = exitCode;
