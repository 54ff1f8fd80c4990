#!/usr/bin/env node
import { stdoutLogDestination } from './log.js';
import { main, outputScrubber } from './main.js';

// What a handler prints itself (console.log of a connection string, a driver's warning) is scrubbed of the
// database URLs' passwords as the CLI's own lines and logs are: every write to standard output and error.
const scrub = outputScrubber(process.argv.slice(2));
if (scrub) {
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (typeof chunk === 'string') return write(scrub(chunk), ...rest);
      if (chunk instanceof Uint8Array) {
        // Bytes are rewritten only when they held a secret: other binary output passes untouched.
        const text = Buffer.from(chunk).toString('utf8');
        const clean = scrub(text);
        return write(clean === text ? chunk : clean, ...rest);
      }
      return write(chunk, ...rest);
    }) as typeof stream.write;
  }
}

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
