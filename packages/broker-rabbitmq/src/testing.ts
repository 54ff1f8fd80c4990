/**
 * What tests of statusq on RabbitMQ use (`@statusq/broker-rabbitmq/testing`): the shared server's URL,
 * throwaway queue names deleted afterwards, and PrivateRabbitMQ, a RabbitMQ node of the test's own for
 * restart and kill cases (never the shared node).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, openSync, closeSync } from 'node:fs';
import { freePort } from '@statusq/test-fixtures';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import amqp from 'amqplib';
import { redactUrl, type DeadLetter } from '@statusq/core/adapter';

/** The shared RabbitMQ the tests use: STATUSQ_TEST_AMQP_URL, default the local guest account. */
export const RABBITMQ_TEST_URL = process.env.STATUSQ_TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/** True when CI demands that server suites run (an unreachable server is then a failure, not a skip). */
export function databasesRequired(): boolean {
  return process.env.STATUSQ_REQUIRE_DATABASES === '1';
}

/** Null when RabbitMQ at `url` answers, else why it does not (for a skip reason or a CI failure). */
export async function rabbitmqUnavailable(url = RABBITMQ_TEST_URL): Promise<string | null> {
  try {
    const connection = await amqp.connect(url, { timeout: 3000 });
    await connection.close();
    return null;
  } catch (error) {
    return `RabbitMQ at ${redactUrl(url)} is unreachable: ${(error as Error).message}`;
  }
}

/** A queue name no other test or run uses. */
export function uniqueQueueName(prefix = 'statusq.test'): string {
  return `${prefix}.${process.pid}.${randomBytes(5).toString('hex')}`;
}

/** Deletes the queues (and their `.dead` queues) if they exist; for test clean-up. */
export async function deleteQueues(names: readonly string[], url = RABBITMQ_TEST_URL): Promise<void> {
  const connection = await amqp.connect(url, { timeout: 5000 });
  try {
    const channel = await connection.createChannel();
    for (const name of names) {
      for (const queue of [name, `${name}.dead`]) await channel.deleteQueue(queue);
    }
    await channel.close();
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/**
 * Every dead letter waiting in `<queue>.dead`, oldest first, left in place: they are read unacked and go back
 * to the queue when the channel closes. Empty when the queue does not exist yet.
 */
export async function readDeadLetters(url: string, queue: string): Promise<DeadLetter[]> {
  const connection = await amqp.connect(url, { timeout: 5000 });
  try {
    const channel = await connection.createChannel();
    // A missing queue closes the channel with 404, which is not an error here.
    channel.on('error', () => undefined);
    const letters: DeadLetter[] = [];
    try {
      await channel.checkQueue(`${queue}.dead`);
    } catch {
      return [];
    }
    for (let message = await channel.get(`${queue}.dead`); message !== false; message = await channel.get(`${queue}.dead`)) {
      letters.push(JSON.parse(message.content.toString('utf8')) as DeadLetter);
    }
    await channel.close();
    return letters;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** Runs `body` with a fresh queue name, deleting the queue and its dead-letter queue afterwards. */
export async function withQueue<T>(body: (queue: string) => Promise<T>, url = RABBITMQ_TEST_URL): Promise<T> {
  const queue = uniqueQueueName();
  try {
    return await body(queue);
  } finally {
    await deleteQueues([queue], url);
  }
}



let nodes = 0;
const RABBITMQ_SERVER = process.env.STATUSQ_RABBITMQ_SERVER ?? '/usr/lib/rabbitmq/bin/rabbitmq-server';

/**
 * A RabbitMQ node of the test's own: its own node name (sq<pid><n>@localhost), ports, data, logs and
 * Erlang cookie under a temporary directory, listening on 127.0.0.1 only. It uses the machine's epmd, as
 * every node does, and nothing else of the shared node rabbit@localhost.
 */
export class PrivateRabbitMQ {
  readonly nodeName = `sq${process.pid}n${++nodes}@localhost`;
  readonly dir = mkdtempSync(join(tmpdir(), 'statusq-rabbitmq-'));
  private port = 0;
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  private readonly killOnExit = () => this.killNow();

  get url(): string {
    if (this.port === 0) throw new Error('PrivateRabbitMQ: start() it first');
    return `amqp://guest:guest@127.0.0.1:${this.port}`;
  }

  /** Starts the node (the same ports and data on a restart) and waits until it accepts AMQP connections. */
  async start(timeoutMs = 60_000): Promise<void> {
    if (this.child) throw new Error('PrivateRabbitMQ: already running');
    if (this.port === 0) this.prepare(await freePort(), await freePort());
    const log = openSync(join(this.dir, 'startup.log'), 'a');
    const child = spawn(RABBITMQ_SERVER, [], { env: this.environment(), stdio: ['ignore', log, log] });
    closeSync(log);
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    process.once('exit', this.killOnExit);
    const deadline = Date.now() + timeoutMs;
    let exitedEarly = false;
    void this.exited.then(() => (exitedEarly = true));
    while (true) {
      if (exitedEarly) throw new Error(`PrivateRabbitMQ ${this.nodeName} exited while starting; see ${this.dir}/startup.log and ${this.dir}/log`);
      if ((await rabbitmqUnavailable(this.url)) === null && this.beamPid() !== undefined) return;
      if (Date.now() > deadline) {
        await this.kill();
        throw new Error(`PrivateRabbitMQ ${this.nodeName} did not accept connections within ${timeoutMs} ms; see ${this.dir}/startup.log`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** Stops the node gracefully (SIGTERM: RabbitMQ shuts down in order), SIGKILL if it takes over `timeoutMs`. */
  async stop(timeoutMs = 30_000): Promise<void> {
    await this.signal('SIGTERM', timeoutMs);
  }

  /** SIGKILLs the node's Erlang VM: no shutdown at all, as in a crash. */
  async kill(): Promise<void> {
    await this.signal('SIGKILL', 10_000);
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Kills the node if it runs and removes its directory. */
  async destroy(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** The pid of the node's VM, from its pid file (the server script execs into it, so it is the child's too). */
  private beamPid(): number | undefined {
    try {
      const pid = Number(readFileSync(join(this.dir, 'rabbitmq.pid'), 'utf8').trim());
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  private async signal(signal: NodeJS.Signals, timeoutMs: number): Promise<void> {
    const child = this.child;
    if (!child) return;
    const pid = this.beamPid() ?? child.pid;
    try {
      if (pid !== undefined) process.kill(pid, signal);
    } catch {
      // Already gone.
    }
    const done = await Promise.race([this.exited!.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref())]);
    if (!done) {
      this.killNow();
      await Promise.race([this.exited!, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
    }
    // The pid file would name a pid the system may reuse.
    rmSync(join(this.dir, 'rabbitmq.pid'), { force: true });
    this.child = undefined;
    process.off('exit', this.killOnExit);
  }

  private killNow(): void {
    for (const pid of new Set([this.beamPid(), this.child?.pid])) {
      try {
        if (pid !== undefined && this.child) process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }

  private prepare(port: number, distPort: number): void {
    this.port = port;
    this.distPort = distPort;
    mkdirSync(join(this.dir, 'home'), { recursive: true });
    mkdirSync(join(this.dir, 'log'), { recursive: true });
    writeFileSync(join(this.dir, 'rabbitmq-env.conf'), '# this node takes its settings from the environment\n');
    writeFileSync(join(this.dir, 'rabbitmq.conf'), `listeners.tcp.local = 127.0.0.1:${port}\nloopback_users.guest = true\n`);
    writeFileSync(join(this.dir, 'enabled_plugins'), '[].\n');
  }

  private distPort = 0;

  private environment(): NodeJS.ProcessEnv {
    const dir = this.dir;
    return {
      PATH: process.env.PATH,
      LANG: 'C.UTF-8',
      // A HOME of its own: the Erlang cookie RabbitMQ creates there is this node's alone.
      HOME: join(dir, 'home'),
      RABBITMQ_CONF_ENV_FILE: join(dir, 'rabbitmq-env.conf'),
      RABBITMQ_CONFIG_FILE: join(dir, 'rabbitmq.conf'),
      RABBITMQ_ADVANCED_CONFIG_FILE: join(dir, 'advanced.config'),
      RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, 'enabled_plugins'),
      RABBITMQ_NODENAME: this.nodeName,
      RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
      RABBITMQ_NODE_PORT: String(this.port),
      RABBITMQ_DIST_PORT: String(this.distPort),
      RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
      RABBITMQ_LOG_BASE: join(dir, 'log'),
      RABBITMQ_PID_FILE: join(dir, 'rabbitmq.pid'),
      ERL_EPMD_ADDRESS: '127.0.0.1',
      ERL_FLAGS: '-kernel inet_dist_use_interface {127,0,0,1}',
    };
  }
}
