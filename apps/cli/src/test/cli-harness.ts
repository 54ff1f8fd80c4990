// Test support shared by the CLI's test files: the built `statusq` bin run as a user runs it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const cliBin = fileURLToPath(new URL('../../dist/bin.js', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export type StatusCounts = { pending: number; processing: number; done: number; abuse: number; failed: number; other: number };

/**
 * The CLI's environment: this process's, without the database URL variables (a developer's own
 * DATABASE_URL must not stand in for a missing --db), plus `extra`.
 */
export function cliEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { ...process.env, STATUSQ_DATABASE_URL: undefined, DATABASE_URL: undefined, ...extra };
}

/** Runs the CLI to completion (blocking). */
export function runCli(cwd: string, args: readonly string[], timeoutMs = 60_000): CliRun {
  const run = spawnSync(process.execPath, [cliBin, ...args], { cwd, encoding: 'utf8', timeout: timeoutMs, env: cliEnv() });
  return { code: run.status, stdout: run.stdout.trim(), stderr: run.stderr.trim() };
}

/** Runs the CLI without blocking the event loop (vitest's own timers keep running); killed after the timeout. */
export function runCliAsync(cwd: string, args: readonly string[], timeoutMs = 90_000, env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return launchCli(cwd, args, timeoutMs, env).ended;
}

export interface LaunchedCli {
  child: ChildProcess;
  /** Resolves with the exit code and output once the process has exited. */
  ended: Promise<CliRun>;
  stderr(): string;
  /** What it printed on stdout so far (its last line may be incomplete). */
  stdout(): string;
}

/**
 * Starts the CLI in the background, for a test that signals it while it runs; `ended` resolves once it has
 * exited (SIGKILLed after the timeout, which shows as code null), `stderr()` is what it printed so far.
 */
export function launchCli(cwd: string, args: readonly string[], timeoutMs = 90_000, env: NodeJS.ProcessEnv = {}): LaunchedCli {
  const child = spawn(process.execPath, [cliBin, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: cliEnv(env) });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  // 'close', not 'exit': it waits until the pipes are drained, so the last lines are never missed.
  const ended = new Promise<CliRun>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: stdout.trim(), stderr: stderr.trim() });
    });
  });
  return { child, ended, stderr: () => stderr, stdout: () => stdout };
}

/** One line of `statusq work`'s JSON log. */
export interface LogLine {
  level: 'error' | 'warn' | 'info' | 'debug';
  time: string;
  pid: number;
  msg: string;
  workerId?: string;
  err?: { type?: string; message: string; stack?: string };
  [field: string]: unknown;
}

/** The JSON log lines a `work` run printed on stdout; a line that is not JSON fails the test. */
export function logLines(stdout: string): LogLine[] {
  return stdout === '' ? [] : stdout.split('\n').map((line) => JSON.parse(line) as LogLine);
}

/** Polls until `check` holds; fails naming `what` after the deadline. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
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

/** The pids of a process's children (`ps --ppid`): how a test finds a worker process of `work --processes`. */
export function childPids(parentPid: number): number[] {
  const ps = spawnSync('ps', ['-o', 'pid=', '--ppid', String(parentPid)], { encoding: 'utf8' });
  return ps.stdout.split('\n').map((s) => Number(s.trim())).filter((n) => n > 0);
}
