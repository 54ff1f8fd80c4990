// Test support shared by the CLI's test files: the built `statusq` bin run as a user runs it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const cliBin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export type StatusCounts = { pending: number; processing: number; done: number; abuse: number; failed: number };

/** Runs the CLI to completion (blocking). */
export function runCli(cwd: string, args: readonly string[], timeoutMs = 60_000): CliRun {
  const run = spawnSync(process.execPath, [cliBin, ...args], { cwd, encoding: 'utf8', timeout: timeoutMs });
  return { code: run.status, stdout: run.stdout.trim(), stderr: run.stderr.trim() };
}

/** Runs the CLI without blocking the event loop (vitest's own timers keep running); killed after the timeout. */
export function runCliAsync(cwd: string, args: readonly string[], timeoutMs = 90_000): Promise<CliRun> {
  return startCli(cwd, args, timeoutMs).ended;
}

/**
 * Starts the CLI in the background, for a test that signals it while it runs; `ended` resolves when it exits
 * (SIGKILLed after the timeout, which shows as code null), `stderr()` is what it printed so far.
 */
export function startCli(cwd: string, args: readonly string[], timeoutMs = 90_000): { child: ChildProcess; ended: Promise<CliRun>; stderr: () => string } {
  const child = spawn(process.execPath, [cliBin, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const ended = new Promise<CliRun>((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: stdout.trim(), stderr: stderr.trim() });
    });
  });
  return { child, ended, stderr: () => stderr };
}

/** The counts printed by `stats --json`; a failed run is an error carrying its stderr. */
export function parseStats(run: CliRun): StatusCounts {
  if (run.code !== 0) throw new Error(`statusq stats exited ${run.code}: ${run.stderr}`);
  return JSON.parse(run.stdout) as StatusCounts;
}

/** Writes a fixture file (handler, ndjson) into the test's directory and returns its path. */
export function writeFixture(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}
