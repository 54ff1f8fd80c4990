/**
 * What tests of statusq on NATS use (`@statusq/broker-nats/testing`): the test server's URL, queues of a
 * test's own that are deleted afterwards, and PrivateNats, a nats-server of the test's own for restarts and
 * kills (never the shared one).
 */
import { execFile } from 'node:child_process';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { redactUrl, type DeadLetter } from '@statusq/core/adapter';
import { PrivateServer, ServerControls, freePort, type ServerSpec } from '@statusq/test-fixtures';
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

/**
 * nats-server as test-fixtures' PrivateServer runs it: on `host`:`port`, named after its port, with JetStream
 * storing under `<dir>/jetstream` unless `jetstream` is false, and `extraArgs` appended. nats-server runs as
 * root happily, so under root the tests' own user (root) runs it too. SIGTERM is its clean shutdown.
 */
function natsServerSpec(jetstream: boolean, extraArgs: readonly string[]): ServerSpec {
  return {
    name: 'NATS',
    user: 'root',
    // Nothing to set up but the store directory, which nats-server would make itself.
    init: (dir) => (jetstream ? { file: 'mkdir', args: ['-p', join(dir, 'jetstream')] } : { file: 'true', args: [] }),
    run: (dir, port, host) => ({
      file: 'nats-server',
      args: ['-a', host, '-p', String(port), '-n', `statusq-test-${port}`, ...(jetstream ? ['-js', '-sd', join(dir, 'jetstream')] : []), ...extraArgs],
    }),
    stopSignal: 'SIGTERM',
    // nats-server opens its client port only once JetStream has started and recovered its streams.
    ready: (port, host) => accepts(port, host),
  };
}

/**
 * A nats-server of the test's own: `nats-server -a 127.0.0.1 -p <free port> -js -sd <temp dir>/jetstream`, a
 * PrivateServer of test-fixtures, so that it can be stopped, killed and started again on the same port and
 * store directory (the JetStream state survives, as on a real server's restart). `jetstream: false` runs one
 * without -js.
 */
export class PrivateNats extends ServerControls {
  private constructor(
    server: PrivateServer,
    readonly jetstream: boolean,
  ) {
    super(server);
  }

  /**
   * Starts a new server (in a new temp dir, on a free port) and resolves once it accepts connections.
   * `args` are added to its command line (`--user bob --pass secret`). Its directory holds the JetStream
   * store under `jetstream/`.
   */
  static async start(options: { jetstream?: boolean; args?: readonly string[] } = {}): Promise<PrivateNats> {
    const jetstream = options.jetstream ?? true;
    return new PrivateNats(await PrivateServer.start(natsServerSpec(jetstream, options.args ?? [])), jetstream);
  }

  /** Its URL, without credentials. */
  get url(): string {
    return `nats://${this.server.host}:${this.server.port}`;
  }
}

function accepts(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}
