/**
 * A database server of the test's own: its data directory in a fresh temp dir, listening on a free port of
 * 127.0.0.1 only, run by this process so that it can be stopped, restarted and killed at will. The outage
 * cases need one because restarting the machine's shared server would break every other suite running
 * against it (and CI's). Each adapter describes how to set up, run and probe its server (a ServerSpec); the
 * process handling is the same for all of them and lives here.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chownSync, closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { delay, freePort, waitFor, withDeadline } from './harness.js';

export interface ServerSpec {
  /** For messages: the server's product name. */
  name: string;
  /**
   * The OS user the server runs as when the tests run as root (database servers commonly refuse to run
   * as root; one that does not may name `root`); otherwise it runs as the current user.
   */
  user: string;
  /**
   * Creates the data directory under `dir` (the server's own init tool); run once, as the server's user.
   * A server that needs no set-up names a command that does nothing (or only makes a directory).
   */
  init(dir: string): { file: string; args: string[] };
  /**
   * The server's command line, in the foreground: it must stay the process this helper started. It listens on
   * `host` (127.0.0.1 unless the server is placed in a network namespace) and `port`. `env`, when given, is
   * its whole environment (a server whose scripts read settings from variables must not see the test's).
   */
  run(dir: string, port: number, host: string): { file: string; args: string[]; env?: NodeJS.ProcessEnv };
  /** The signal that shuts the server down cleanly and fast, ending its sessions (not a crash). */
  stopSignal: NodeJS.Signals;
  /** Whether the server accepts connections on `host`:`port` now. */
  ready(port: number, host: string): Promise<boolean>;
  /**
   * Longest wait for it to accept connections after a start, and to exit after its stop signal, for a server
   * slower than most (default START_TIMEOUT_MS and STOP_TIMEOUT_MS).
   */
  startTimeoutMs?: number;
  stopTimeoutMs?: number;
}

/**
 * Where a server runs when not on 127.0.0.1 of this machine: a network namespace (`ip netns`) the caller made,
 * on an address of that namespace which the caller can reach (a host of a test's own network). Needs root.
 */
export interface ServerPlacement {
  netns: string;
  host: string;
  /** Any port: nothing else listens in a namespace of the caller's own. */
  port: number;
}

/** Longest wait for a server to start or to shut down cleanly before the helper gives up (or kills it). */
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

/**
 * One private server: `PrivateServer.start(spec)` sets it up and starts it. Then, on the same port and
 * directory: `restart(downMs)` (an administrator's restart with an outage), or, one step at a time, `halt()`
 * (a clean shutdown) or `kill()` (a crash) and later `resume()`. `stop()` ends it and removes its directory.
 */
export class PrivateServer {
  private process: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  private removed = false;
  /** Kills the server if the test process ends without stop(): a test run must never leave one behind. */
  private readonly killOnExit = () => this.process?.kill('SIGKILL');

  private constructor(
    readonly spec: ServerSpec,
    readonly dir: string,
    readonly port: number,
    private readonly owner: { uid: number; gid: number } | null,
    private readonly placement: ServerPlacement | null,
  ) {}

  /** Creates the data directory, starts the server (in `placement` when given) and resolves once it accepts connections. */
  static async start(spec: ServerSpec, placement: ServerPlacement | null = null): Promise<PrivateServer> {
    const owner = process.getuid?.() === 0 ? userIds(spec.user) : null;
    if (placement && !owner) throw new Error(`a private ${spec.name} server in network namespace ${placement.netns} needs root (ip netns exec)`);
    const port = placement?.port ?? (await freePort());
    const dir = mkdtempSync(join(tmpdir(), `statusq-${spec.name.toLowerCase()}-`));
    const server = new PrivateServer(spec, dir, port, owner, placement);
    try {
      // mkdtemp makes the directory private to its creator; the server's user must own it to create its data there.
      if (owner) chownSync(dir, owner.uid, owner.gid);
      await server.exec(spec.init(dir), 'init.log');
      await server.launch();
      return server;
    } catch (error) {
      await server.stop();
      throw error;
    }
  }

  /**
   * Shuts the server down cleanly (every session is ended, as in an administrator's restart), keeps it
   * down for `downMs` and starts it again on the same port; resolves once it accepts connections again.
   */
  async restart(downMs: number): Promise<void> {
    await this.shutDown();
    // The outage itself: how long clients find nothing listening. Not a wait for anything to happen.
    await delay(downMs);
    await this.launch();
  }

  /** The address it listens on. */
  get host(): string {
    return this.placement?.host ?? '127.0.0.1';
  }

  /** The server's process id while it runs (its CPU time is read from /proc), else null. */
  get pid(): number | null {
    return this.process?.pid ?? null;
  }

  /** Whether its process runs now (false after halt(), kill(), stop(), or when the server exited by itself). */
  get running(): boolean {
    return this.process !== null;
  }

  /**
   * Shuts the server down cleanly (its stop signal, as an administrator's shutdown) and leaves it down, its
   * directory kept for resume(); resolves once the process has exited. When it does not exit in time it is
   * killed, and the promise rejects saying so. Nothing happens when it is not running.
   */
  async halt(): Promise<void> {
    await this.shutDown();
  }

  /**
   * Kills the server (SIGKILL, as a crash or an OOM kill: no clean shutdown) and leaves it down, its directory
   * kept for resume(); resolves once the process is gone. Nothing happens when it is not running.
   */
  async kill(): Promise<void> {
    await this.shutDown('SIGKILL');
  }

  /**
   * Starts the server again on the same port and directory after halt() or kill() (or an exit of its own);
   * resolves once it accepts connections. Nothing happens when it runs; rejects after stop().
   */
  async resume(): Promise<void> {
    if (this.process) return;
    if (this.removed) throw new Error(`this private ${this.spec.name} server was stopped and its directory removed`);
    await this.launch();
  }

  /** Stops the server (killing it if it does not stop in time) and removes its directory. Safe to call again. */
  async stop(): Promise<void> {
    await this.shutDown().catch(() => undefined);
    if (!this.removed) {
      this.removed = true;
      rmSync(this.dir, { recursive: true, force: true });
    }
  }

  private async launch(): Promise<void> {
    const { file, args, env } = this.spec.run(this.dir, this.port, this.host);
    const log = openSync(join(this.dir, 'server.log'), 'a');
    let child: ChildProcess;
    try {
      if (this.placement && this.owner) {
        // Entering a namespace needs root, so the server's user is taken after it; both tools exec, so the
        // child stays the server's own process (signals reach it, its exit is the server's).
        const user = ['--reuid', String(this.owner.uid), '--regid', String(this.owner.gid), '--init-groups'];
        child = spawn('ip', ['netns', 'exec', this.placement.netns, 'setpriv', ...user, file, ...args], { cwd: this.dir, env, stdio: ['ignore', log, log] });
      } else {
        child = spawn(file, args, { cwd: this.dir, env, stdio: ['ignore', log, log], ...(this.owner ?? {}) });
      }
    } finally {
      closeSync(log);
    }
    this.process = child;
    process.on('exit', this.killOnExit);
    let gone = false;
    this.exited = new Promise((resolve) => {
      const ended = () => {
        if (gone) return;
        gone = true;
        if (this.process === child) this.process = null;
        process.off('exit', this.killOnExit);
        resolve();
      };
      child.once('exit', ended);
      // A command that cannot be spawned at all (not installed) reports `error` and never `exit`.
      child.once('error', ended);
    });
    await waitFor(
      `the private ${this.spec.name} server to accept connections on ${this.host}:${this.port}`,
      async () => {
        if (gone) throw new Error(`the private ${this.spec.name} server exited while starting: ${this.logTail()}`);
        return this.spec.ready(this.port, this.host);
      },
      { timeoutMs: this.spec.startTimeoutMs ?? START_TIMEOUT_MS, intervalMs: 25 },
    );
  }

  private async shutDown(signal: NodeJS.Signals = this.spec.stopSignal): Promise<void> {
    const child = this.process;
    if (!child) return;
    child.kill(signal);
    try {
      await withDeadline(this.exited, this.spec.stopTimeoutMs ?? STOP_TIMEOUT_MS, `the private ${this.spec.name} server to ${signal === this.spec.stopSignal ? 'shut down' : `exit on ${signal}`}`);
    } catch (error) {
      child.kill('SIGKILL');
      await this.exited;
      throw error;
    }
  }

  /** Runs a set-up command as the server's user; rejects with its output when it fails. */
  private async exec(command: { file: string; args: string[] }, logName: string): Promise<void> {
    const logPath = join(this.dir, logName);
    const log = openSync(logPath, 'a');
    let child: ChildProcess;
    try {
      child = spawn(command.file, command.args, { cwd: this.dir, stdio: ['ignore', log, log], ...(this.owner ?? {}) });
    } finally {
      closeSync(log);
    }
    const finished = new Promise<{ code: number | null; error?: Error }>((resolve) => {
      child.once('error', (e) => resolve({ code: null, error: e }));
      child.once('exit', (c) => resolve({ code: c }));
    });
    let outcome: { code: number | null; error?: Error };
    try {
      outcome = await withDeadline(finished, START_TIMEOUT_MS, `${command.file} to finish`);
    } catch (timeout) {
      // A hung set-up command must not outlive the test or write into the directory stop() removes.
      child.kill('SIGKILL');
      await finished;
      throw timeout;
    }
    const { code, error } = outcome;
    if (code !== 0) {
      throw new Error(`${command.file} failed (${error?.message ?? `exit code ${code}`}): ${readFileSync(logPath, 'utf8').slice(-2000)}`);
    }
  }

  private logTail(): string {
    try {
      return readFileSync(join(this.dir, 'server.log'), 'utf8').slice(-2000);
    } catch {
      return '(no log)';
    }
  }
}

function userIds(user: string): { uid: number; gid: number } {
  try {
    return { uid: Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim()), gid: Number(execFileSync('id', ['-g', user], { encoding: 'utf8' }).trim()) };
  } catch {
    throw new Error(`running as root, but there is no OS user ${JSON.stringify(user)} to run the private server as`);
  }
}


/**
 * The verbs a package's own private server (PrivateNats, PrivateRabbitMQ) gives its tests over one
 * PrivateServer, so each spells only its spec and its URL.
 */
export abstract class ServerControls {
  protected constructor(protected readonly server: PrivateServer) {}

  /** Its URL, as the package's clients take it. */
  abstract get url(): string;

  /** Its directory: the server's data and its output (server.log). */
  get dir(): string {
    return this.server.dir;
  }

  get port(): number {
    return this.server.port;
  }

  get running(): boolean {
    return this.server.running;
  }

  /** Starts the server again on its port and directory; resolves once it accepts connections. Nothing when it runs. */
  async start(): Promise<void> {
    await this.server.resume();
  }

  /** A clean shutdown (its stop signal): resolves once the process has exited; killed, and rejecting, if it does not in time. */
  async stop(): Promise<void> {
    await this.server.halt();
  }

  /** SIGKILL, as a crash: resolves once the process is gone. */
  async kill(): Promise<void> {
    await this.server.kill();
  }

  /** stop() then start() on the same port and directory. */
  async restart(): Promise<void> {
    await this.server.halt();
    await this.server.resume();
  }

  /** Stops the server and removes its directory. Safe to call again. */
  async dispose(): Promise<void> {
    await this.server.stop();
  }
}
