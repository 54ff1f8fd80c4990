// Test support shared by the CLI's test files: the built `statusq` bin run as a user runs it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script, constants } from 'node:vm';
import { ADAPTER_VARIABLE } from '../adapters.js';
import { DATABASE_URL_VARIABLES, ENQUEUE_TO_VARIABLE, LISTEN_DATABASE_URL_VARIABLE, RELAY_TO_VARIABLE, WORK_FROM_VARIABLE } from '../args.js';
import type { Io } from '../with-store.js';
import { TOKEN_VARIABLE } from '../dashboard/settings.js';

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

/** The environment variables the CLI reads a URL, an adapter or a token from. */
const CLI_VARIABLES = [...DATABASE_URL_VARIABLES, LISTEN_DATABASE_URL_VARIABLE, WORK_FROM_VARIABLE, RELAY_TO_VARIABLE, ENQUEUE_TO_VARIABLE, ADAPTER_VARIABLE, TOKEN_VARIABLE];

type CliMain = (argv: string[], io: Io) => Promise<number>;
let cliMain: Promise<CliMain> | null = null;
/**
 * The built CLI's `main`, loaded by Node itself rather than through vitest's module runner: the command
 * runs the code a user's `npx statusq` runs (dist, its own copies of core and the adapters, handlers imported
 * natively), only without a process of its own.
 */
function builtMain(): Promise<CliMain> {
  if (cliMain) return cliMain;
  // vitest evaluates this file with its own loader; a script given Node's default loader imports natively.
  const nativeImport = new Script('(url) => import(url)', { importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER }).runInThisContext() as (url: string) => Promise<{ main: CliMain }>;
  cliMain = nativeImport(new URL('../../dist/main.js', import.meta.url).href).then((module) => module.main);
  return cliMain;
}

/**
 * Runs one command line through the built CLI's `main` in this process, which is what the bin does after
 * wiring the process to it; the exit code is main's return value and stdout/stderr the lines it wrote (the
 * log of `work` included, as on a pipe). Starting a Node process per command was most of the CLI suites'
 * CPU (about 0.3 s each, hundreds per file on a 2-core machine); what only a process shows (signals, exit
 * codes set on the process, standard input, environment variables, child processes' output) is run through
 * the bin with runCliAsync/launchCli. When this process has a variable set that the CLI would read (a
 * developer's DATABASE_URL, say), the command runs in a child instead, whose environment cliEnv controls.
 */
export async function runCliInProcess(cwd: string, args: readonly string[]): Promise<CliRun> {
  if (CLI_VARIABLES.some((name) => process.env[name])) return runCliAsync(cwd, args);
  const main = await builtMain();
  const stdout: string[] = [];
  const stderr: string[] = [];
  const code = await main([...args], {
    out: (line) => stdout.push(line),
    err: (line) => stderr.push(line),
    onSignal: () => () => undefined,
    readStdin: () => {
      throw new Error('runCliInProcess has no standard input: run `--file -` through runCliAsync or launchCli');
    },
  });
  return { code, stdout: stdout.join('\n').trim(), stderr: stderr.join('\n').trim() };
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
/** The status counts `stats --json` printed; its per-kind breakdown (`kinds`) is the kind scenarios' to check. */
export function parseStats(run: CliRun): StatusCounts {
  if (run.code !== 0) throw new Error(`statusq stats exited ${run.code}: ${run.stderr}`);
  const { kinds: _kinds, ...counts } = JSON.parse(run.stdout) as StatusCounts & { kinds?: unknown };
  return counts;
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
