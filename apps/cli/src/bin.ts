#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { stdoutLogDestination } from './log.js';
import { main } from './main.js';

const exitCode = await main(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  onSignal(handler) {
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
    return () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    };
  },
  readStdin: () => readFileSync(0, 'utf8'),
  logDestination: stdoutLogDestination,
});
process.exitCode = exitCode;
