/**
 * What tests of statusq on NATS use (`@statusq/broker-nats/testing`): the test server's URL, queues of a
 * test's own that are deleted afterwards, and PrivateNats, a nats-server of the test's own for restarts and
 * kills (never the shared one).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { redactUrl, type DeadLetter } from '@statusq/core/adapter';
import { freePort } from '@statusq/test-fixtures';
import { openConnection, parseNatsUrl } from './nats-connection.js';
import { isNotFound, messageOf } from './nats-errors.js';
import { natsLayout } from './nats-layout.js';

// The tests take freePort from here with the rest of the private server's kit.
export { freePort };

/** The shared test server: STATUSQ_TEST_NATS_URL, else nats://127.0.0.1:4222. */
export const NATS_TEST_URL = process.env.STATUSQ_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

/** True when CI demands that server suites run (an unreachable server is then a failure, not a skip). */
export function databasesRequired(): boolean {
  return process.env.STATUSQ_REQUIRE_DATABASES === '1';
}

/** Why the NATS server at `url` cannot serve the tests (unreachable, no JetStream), or null when it can. */
export async function natsUnavailable(url = NATS_TEST_URL): Promise<string | null> {
  const target = parseNatsUrl(url);
  try {
    const nc = await openConnection(target, { connectTimeoutMs: 3_000 });
    try {
      await jetstreamManager(nc, { timeout: 3_000 });
      return null;
    } finally {
      await nc.close();
    }
  } catch (error) {
    return `NATS with JetStream at ${redactUrl(url)} is unavailable (${messageOf(error)}); set STATUSQ_TEST_NATS_URL`;
  }
}

/**
 * Queue names of a test's own (`statusq.test.<random>`), whose streams `deleteAll()` removes: tests share
 * the server with every other suite and never touch a stream they did not create.
 */
export class TestQueues {
  private readonly created: string[] = [];

  constructor(private readonly url = NATS_TEST_URL) {}

  /** A fresh queue name; its streams are created by the first connectBroker and deleted by deleteAll(). */
  create(prefix = 'statusq.test'): string {
    const queue = `${prefix}.${randomBytes(5).toString('hex')}`;
    this.created.push(queue);
    return queue;
  }

  /** A queue named elsewhere (core's default `statusq.<table>`) whose streams deleteAll() removes too. */
  adopt(queue: string): string {
    this.created.push(queue);
    return queue;
  }

  /** Deletes the streams of every queue create() gave out (their consumers go with them). */
  async deleteAll(url = this.url): Promise<void> {
    const queues = this.created.splice(0);
    if (queues.length === 0) return;
    await deleteQueueStreams(url, queues);
  }
}

/** Deletes the dispatch and dead-letter streams of `queues` on the server at `url`, where they exist. */
export async function deleteQueueStreams(url: string, queues: readonly string[]): Promise<void> {
  const nc = await openConnection(parseNatsUrl(url), { connectTimeoutMs: 5_000 });
  try {
    const jsm = await jetstreamManager(nc, { timeout: 5_000 });
    for (const queue of queues) {
      const layout = natsLayout(queue);
      for (const stream of [layout.stream, layout.deadStream]) {
        try {
          await jsm.streams.delete(stream);
        } catch (error) {
          if (!isNotFound(error)) throw error;
        }
      }
    }
  } finally {
    await nc.close();
  }
}

/** Every dead letter stored for `queue` on the server at `url`, oldest first, left in place. Empty when there is no dead stream yet. */
export async function readDeadLetters(url: string, queue: string): Promise<DeadLetter[]> {
  const nc = await openConnection(parseNatsUrl(url), { connectTimeoutMs: 5_000 });
  try {
    const jsm = await jetstreamManager(nc, { timeout: 5_000 });
    const { deadStream } = natsLayout(queue);
    let state;
    try {
      ({ state } = await jsm.streams.info(deadStream));
    } catch (error) {
      if (isNotFound(error)) return [];
      throw error;
    }
    const letters: DeadLetter[] = [];
    for (let seq = state.first_seq; state.messages > 0 && seq <= state.last_seq; seq++) {
      const stored = await jsm.streams.getMessage(deadStream, { seq });
      if (stored) letters.push(JSON.parse(stored.string()) as DeadLetter);
    }
    return letters;
  } finally {
    await nc.close();
  }
}

/** Why PrivateNats cannot run here (no nats-server on the PATH), or null when it can. */
export function privateNatsUnavailable(): Promise<string | null> {
  return new Promise((resolve) => {
    execFile('nats-server', ['--version'], { timeout: 5_000 }, (error, stdout) => {
      resolve(error ? `nats-server cannot be run (${error.message}); install it (apt-get install nats-server) for the private-server tests` : /nats-server/.test(stdout) ? null : `nats-server --version printed ${JSON.stringify(stdout)}`);
    });
  });
}

/** Longest wait for the private server to start or to exit. */
const START_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 10_000;

/**
 * A nats-server of the test's own: `nats-server -a 127.0.0.1 -p <free port> -js -sd <temp dir>`, run by
 * this process so that it can be stopped, killed and started again on the same port and store directory
 * (the JetStream state survives, as on a real server's restart). `jetstream: false` runs one without -js.
 */
export class PrivateNats {
  private process: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  private removed = false;
  /** Kills the server if the test process ends without dispose(): a test run must never leave one behind. */
  private readonly killOnExit = () => this.process?.kill('SIGKILL');

  private constructor(
    readonly dir: string,
    readonly port: number,
    readonly jetstream: boolean,
    private readonly extraArgs: readonly string[],
  ) {}

  /**
   * Starts a new server (in a new temp dir, on a free port) and resolves once it accepts connections.
   * `args` are added to its command line (`--user bob --pass secret`).
   */
  static async start(options: { jetstream?: boolean; args?: readonly string[] } = {}): Promise<PrivateNats> {
    const server = new PrivateNats(mkdtempSync(join(tmpdir(), 'statusq-nats-')), await freePort(), options.jetstream ?? true, options.args ?? []);
    try {
      await server.start();
      return server;
    } catch (error) {
      await server.dispose();
      throw error;
    }
  }

  /** Its URL, without credentials. */
  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.process !== null;
  }

  /** Starts the server (again) on its port and store directory; resolves once it accepts connections. */
  async start(): Promise<void> {
    if (this.process) return;
    if (this.removed) throw new Error('this private nats-server was disposed');
    const args = ['-a', '127.0.0.1', '-p', String(this.port), '-n', `statusq-test-${this.port}`, ...(this.jetstream ? ['-js', '-sd', join(this.dir, 'jetstream')] : []), ...this.extraArgs];
    const log = openSync(join(this.dir, 'server.log'), 'a');
    let child: ChildProcess;
    try {
      child = spawn('nats-server', args, { cwd: this.dir, stdio: ['ignore', log, log] });
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
    // nats-server opens its client port only once JetStream has started and recovered its streams.
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await accepts(this.port))) {
      if (gone) throw new Error(`the private nats-server exited while starting: ${this.logTail()}`);
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`the private nats-server did not accept connections on 127.0.0.1:${this.port} within ${START_TIMEOUT_MS} ms: ${this.logTail()}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** A clean shutdown (SIGTERM): resolves once the process has exited; killed if it does not in time. */
  async stop(): Promise<void> {
    await this.end('SIGTERM');
  }

  /** SIGKILL, as a crash: resolves once the process is gone. */
  async kill(): Promise<void> {
    await this.end('SIGKILL');
  }

  /** stop() then start() on the same port and store directory. */
  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Stops the server and removes its directory. Safe to call again. */
  async dispose(): Promise<void> {
    await this.end('SIGTERM').catch(() => this.end('SIGKILL'));
    if (!this.removed) {
      this.removed = true;
      rmSync(this.dir, { recursive: true, force: true });
    }
  }

  private async end(signal: NodeJS.Signals): Promise<void> {
    const child = this.process;
    if (!child) return;
    child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), STOP_TIMEOUT_MS);
    });
    const late = await Promise.race([this.exited.then(() => false), timedOut]);
    clearTimeout(timer);
    if (late) {
      child.kill('SIGKILL');
      await this.exited;
      throw new Error(`the private nats-server did not exit within ${STOP_TIMEOUT_MS} ms of ${signal}; killed`);
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

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
