/**
 * What tests of statusq on RabbitMQ use (`@statusq/broker-rabbitmq/testing`): the shared server's URL,
 * throwaway queue names deleted afterwards, and PrivateRabbitMQ, a RabbitMQ node of the test's own for
 * restart and kill cases (never the shared node).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { PrivateServer, ServerControls, freePort, type ServerSpec } from '@statusq/test-fixtures';
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
 * rabbitmq-server as test-fixtures' PrivateServer runs it: node `nodeName`, its AMQP listener on `host`:`port`,
 * Erlang distribution on `distPort`, and every file (data, logs, pid, the Erlang cookie under a HOME of its
 * own) under the server's directory. Its environment is its whole configuration, so nothing of the machine's
 * node (`/etc/rabbitmq`) applies. It uses the machine's epmd, as every node does.
 */
function rabbitmqServerSpec(nodeName: string, distPort: number): ServerSpec {
  return {
    name: 'RabbitMQ',
    // The tests' user runs it: RabbitMQ does not refuse root, and the Debian rabbitmq user's HOME is the shared node's.
    user: 'root',
    init: (dir) => ({ file: 'mkdir', args: ['-p', join(dir, 'home'), join(dir, 'log')] }),
    run: (dir, port, host) => ({
      file: RABBITMQ_SERVER,
      args: [],
      env: {
        PATH: process.env.PATH,
        LANG: 'C.UTF-8',
        HOME: join(dir, 'home'),
        // The script then execs the Erlang VM instead of keeping a shell in front of it: the process
        // PrivateServer started is the node itself, so SIGKILL is a real crash (killing the shell alone left
        // the VM running) and SIGTERM the node's own orderly shutdown.
        RUNNING_UNDER_SYSTEMD: 'true',
        RABBITMQ_CONF_ENV_FILE: join(dir, 'rabbitmq-env.conf'),
        RABBITMQ_CONFIG_FILE: join(dir, 'rabbitmq.conf'),
        RABBITMQ_ADVANCED_CONFIG_FILE: join(dir, 'advanced.config'),
        RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, 'enabled_plugins'),
        RABBITMQ_ENABLED_PLUGINS: '',
        RABBITMQ_NODENAME: nodeName,
        RABBITMQ_NODE_IP_ADDRESS: host,
        RABBITMQ_NODE_PORT: String(port),
        RABBITMQ_DIST_PORT: String(distPort),
        RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
        RABBITMQ_LOG_BASE: join(dir, 'log'),
        RABBITMQ_PID_FILE: join(dir, 'rabbitmq.pid'),
        ERL_EPMD_ADDRESS: '127.0.0.1',
        ERL_FLAGS: '-kernel inet_dist_use_interface {127,0,0,1}',
      },
    }),
    stopSignal: 'SIGTERM',
    // A node boots its Erlang applications and recovers its queues before it listens: on the 2-core CI machine,
    // busy with other suites, a restart took over 30 s (2026-12-07); its orderly stop closes every queue first.
    startTimeoutMs: 90_000,
    stopTimeoutMs: 30_000,
    // The AMQP port opens late in the boot; a connection that completes its handshake means the node serves.
    ready: async (port, host) => (await rabbitmqUnavailable(`amqp://guest:guest@${host}:${port}`)) === null,
  };
}

/**
 * A RabbitMQ node of the test's own, a PrivateServer of test-fixtures: its own node name
 * (sq<pid>n<n>@localhost), ports, data, logs and Erlang cookie under a temporary directory, listening on
 * 127.0.0.1 only, so that it can be stopped, killed and started again on the same ports and data (durable
 * queues and their messages survive, as on a real node's restart). Nothing of the shared node is touched.
 */
export class PrivateRabbitMQ extends ServerControls {
  private constructor(
    server: PrivateServer,
    readonly nodeName: string,
  ) {
    super(server);
  }

  /**
   * Starts a new node (a new temp dir, free ports) and resolves once it accepts AMQP connections. Its
   * directory holds its data, and RabbitMQ's own logs under `log/`.
   */
  static async start(): Promise<PrivateRabbitMQ> {
    const nodeName = `sq${process.pid}n${++nodes}@localhost`;
    return new PrivateRabbitMQ(await PrivateServer.start(rabbitmqServerSpec(nodeName, await freePort())), nodeName);
  }

  /** Its URL, with the guest account (allowed from 127.0.0.1). */
  get url(): string {
    return `amqp://guest:guest@${this.server.host}:${this.server.port}`;
  }
}
