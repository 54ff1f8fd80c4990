/**
 * The broker path's conformance suite: a relay and consumers (workers with `from`) in OS processes of their own,
 * racing over one table through a real broker, with kill -9 of the relay and of consumers mid-run, duplicate
 * and out-of-order messages injected, polling workers beside the consumers, a row that kills every consumer
 * that runs it (given up and dead-lettered once), the broker restarted under them (a private broker of the
 * test's own), and every connection to the broker dropped mid-run (a TCP proxy). A broker package's test file calls it once per database:
 *
 *   runBrokerConformance(database, { name: 'rabbitmq', brokerModule, url, dropQueue, privateBroker });
 *
 * The proof is the same ledger as polling's: every row done, and a row's handler ran more than once only when
 * an earlier run's process was killed while it held the row.
 */
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Queue, connectBroker, initTable, type Store } from '@statusq/core';
import { dispatchIndexName, hasIndex, type Broker, type BrokerModule, type DeadLetter } from '@statusq/core/adapter';
import { TestEnv } from './test-env.js';
import { childScript, type ChildHandle } from './child-handle.js';
import type { ChildWorkerArgs, ChildWorkerResult } from './child-worker.js';
import type { ChildRelayArgs } from './child-relay.js';
import type { ChildBroker } from './child-broker.js';
import type { ConformanceOptions } from './options.js';
import { waitFor, withDeadline } from './waiting.js';
import { TcpProxy, routeThrough } from '@statusq/test-fixtures';

/** A broker the suite runs against: its package and the shared server's URL. */
export interface BrokerUnderTest {
  /** Shown in the describe block: `rabbitmq`, `nats`. */
  name: string;
  /** Absolute path of the broker package's built module (its dist/index.js). */
  brokerModule: string;
  /** The shared broker's URL. Each test uses a queue of its own on it. */
  url: string;
  /** Removes a queue (and its dead-letter queue) a test made. */
  dropQueue(url: string, queue: string): Promise<void>;
  /** A private broker of the suite's own, which it may restart (never the shared one). */
  privateBroker(): Promise<PrivateBroker>;
  /** The dead letters stored for a queue, oldest first, left where they are. */
  readDeadLetters(url: string, queue: string): Promise<DeadLetter[]>;
}

export interface PrivateBroker {
  readonly url: string;
  /** Stops the broker gracefully and starts it again on the same port and data. */
  restart(): Promise<void>;
  /** SIGKILL, then start again on the same port and data. */
  killAndStart(): Promise<void>;
  stop(): Promise<void>;
}

const TABLE = 'jobs';
const ROWS = 600;
/** Each broker scheme's default port, for a URL that names none. */
const BROKER_PORTS: Record<string, number> = { 'amqp:': 5672, 'amqps:': 5671, 'nats:': 4222 };

/**
 * Appends `id attempt pid` per run to STATUSQ_LEDGER; STATUSQ_HANG=1 announces the job and never finishes it;
 * the row STATUSQ_POISON names kills its process (SIGKILL) every time it runs.
 */
function writeLedgerHandler(dir: string): string {
  const path = join(dir, 'broker-ledger.mjs');
  writeFileSync(
    path,
    [
      "import { appendFileSync } from 'node:fs';",
      'export default async function handle(job) {',
      '  appendFileSync(process.env.STATUSQ_LEDGER, `${job.id} ${job.attempt} ${process.pid}\\n`);',
      "  if (String(job.id) === process.env.STATUSQ_POISON) process.kill(process.pid, 'SIGKILL');",
      "  if (process.env.STATUSQ_HANG === '1') {",
      '    process.stdout.write(`hanging ${job.id}\\n`);',
      '    await new Promise(() => {});',
      '  }',
      '  await new Promise((resolve) => setTimeout(resolve, Number(process.env.STATUSQ_JOB_MS ?? 0)));',
      '  return { pid: process.pid };',
      '}',
      '',
    ].join('\n'),
  );
  return path;
}

interface LedgerRun {
  id: string;
  attempt: number;
  pid: number;
}

function readLedger(path: string): LedgerRun[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, attempt, pid] = line.split(' ');
      return { id: id!, attempt: Number(attempt), pid: Number(pid) };
    });
}

/**
 * The proof: every row done (but the `failed` ones, which must be failed), and every run of a row but its last
 * was by a process in `killed` (it died holding the row). Returns how many rows ran more than once. Closes
 * `store`, the test's last use of it.
 */
async function proveLedger(store: Store, ledgerPath: string, killed: ReadonlySet<number>, failed: readonly string[] = []): Promise<{ reruns: number }> {
  const { rows } = await store.execute({ sql: `SELECT id, status FROM ${TABLE}`, params: [] });
  await store.close();
  expect(rows).toHaveLength(ROWS);
  const notDone = rows.filter((row) => Number(row.status) !== 1 && !failed.includes(String(row.id)));
  expect(notDone, 'rows not done').toEqual([]);
  expect(rows.filter((row) => Number(row.status) === 0).map((row) => String(row.id)), 'rows failed').toEqual([...failed]);
  const byId = new Map<string, LedgerRun[]>();
  for (const run of readLedger(ledgerPath)) byId.set(run.id, [...(byId.get(run.id) ?? []), run]);
  expect(byId.size, 'rows the ledger saw').toBe(ROWS);
  let reruns = 0;
  const doubles: string[] = [];
  for (const [id, runs] of byId) {
    if (runs.length === 1) continue;
    reruns++;
    // Every run but the last was cut short by its process's death.
    for (const earlier of runs.slice(0, -1)) if (!killed.has(earlier.pid)) doubles.push(`${id}: ran in ${earlier.pid} (alive) and again`);
  }
  expect(doubles, 'rows run twice without an owner dying').toEqual([]);
  return { reruns };
}

/**
 * runBrokerConformance where the broker and the database answer. `unreachable` says why one does not (null:
 * both do): then one skipped test names it, or, where `required` (CI's STATUSQ_REQUIRE_DATABASES=1), one
 * failing test.
 */
export function runBrokerConformanceWhereReachable(database: ConformanceOptions, broker: BrokerUnderTest, unreachable: string | null, required: boolean): void {
  if (unreachable === null) {
    runBrokerConformance(database, broker);
  } else if (required) {
    it(`${broker.name} and ${database.name} are reachable (STATUSQ_REQUIRE_DATABASES=1)`, () => {
      throw new Error(unreachable);
    });
  } else {
    it.skip(`[needs ${broker.name} and ${database.name}] broker conformance: ${unreachable}`, () => undefined);
  }
}

export function runBrokerConformance(database: ConformanceOptions, broker: BrokerUnderTest): void {
  const suite = `statusq broker path: ${broker.name} on ${database.name}`;
  describe(suite, { timeout: 180_000 }, () => {
    let env: TestEnv | undefined;
    let queue = '';
    let brokerUrl = broker.url;
    let privateBroker: PrivateBroker | null = null;
    const opened: Broker[] = [];

    beforeEach(async () => {
      env = new TestEnv(database, await database.url());
      queue = `statusq.conformance.${randomBytes(4).toString('hex')}`;
      brokerUrl = broker.url;
    }, 60_000);

    afterEach(async (context) => {
      const test = env;
      env = undefined;
      for (const b of opened.splice(0)) await b.close().catch(() => undefined);
      const leaks = test && context.task.result?.state === 'pass' ? test.leaks() : [];
      await test?.dispose();
      await broker.dropQueue(brokerUrl, queue).catch(() => undefined);
      await privateBroker?.stop();
      privateBroker = null;
      if (test) await database.dropDatabase?.(test.url);
      if (leaks.length > 0) throw new Error(`leak check failed: ${leaks.join('; ')}`);
    }, 60_000);

    // A private broker's restart under a loaded machine took over the packages' default 30 s (a clean-clone run
    // failed so): the children ride out two minutes, within the consumers' own bound of 150 s.
    const childBroker = (): ChildBroker => ({ module: broker.brokerModule, url: brokerUrl, queue, reconnectWindowMs: 120_000 });

    async function openBroker(): Promise<Broker> {
      const module = (await import(pathToFileURL(broker.brokerModule).href)) as BrokerModule;
      const opened1 = await connectBroker(brokerUrl, { table: TABLE, queue, broker: module });
      opened.push(opened1);
      return opened1;
    }

    /** A managed table with the dispatch column, holding ROWS pending rows. */
    async function seed(): Promise<Store> {
      const store = await env!.store('seed store');
      await initTable(store, TABLE, { with: ['dispatch'] });
      const q = await Queue.open(store, { table: TABLE });
      await q.enqueue(Array.from({ length: ROWS }, (_, i) => ({ n: i })));
      return store;
    }

    function startRelay(label = 'relay'): ChildHandle {
      const args: ChildRelayArgs = { adapterModule: env!.adapterModulePath, url: env!.url, table: { table: TABLE }, broker: childBroker(), relay: { redispatchMs: 3_000 } };
      return env!.spawnChild(childScript('child-relay.js'), args, {}, label);
    }

    function startConsumer(label: string, extra: Record<string, string> = {}, fromBroker = true, tuning: { concurrency?: number; maxAttempts?: number } = {}): ChildHandle {
      const args: ChildWorkerArgs = {
        adapterModule: env!.adapterModulePath,
        url: env!.url,
        table: { table: TABLE },
        handlerPath: writeLedgerHandler(env!.tempDir()),
        concurrency: tuning.concurrency ?? 4,
        worker: { leaseMs: 1_500, pollMinMs: 2, pollMaxMs: 50, exitWhenEmpty: true, ...(tuning.maxAttempts !== undefined && { maxAttempts: tuning.maxAttempts }) },
        ...(fromBroker && { broker: childBroker() }),
      };
      return env!.spawnChild(childScript('child-worker.js'), args, { STATUSQ_LEDGER: ledger(), ...extra }, label);
    }

    const ledger = () => join(env!.tempDir(), 'ledger.txt');

    async function stopRelay(relay: ChildHandle): Promise<void> {
      relay.child.kill('SIGTERM');
      await withDeadline(relay.exited, 20_000, 'the relay to stop');
    }

    async function kill(child: ChildHandle): Promise<void> {
      child.child.kill('SIGKILL');
      await withDeadline(child.exited, 10_000, `${child.label} to die`);
    }

    it('races 4 consumer processes through the broker: every row done, none run twice', async () => {
      const store = await seed();
      // The relay's index, which keeps its passes off the rows waiting in the broker.
      expect(await hasIndex(store, store.schema!, TABLE, dispatchIndexName(TABLE))).toBe(true);
      const relay = startRelay();
      const consumers = [1, 2, 3, 4].map((i) => startConsumer(`consumer ${i}`));
      const results = await Promise.all(consumers.map((c) => c.result<ChildWorkerResult>(120_000)));
      await stopRelay(relay);
      const { counters: relayed } = await relay.result<{ counters: { published: number } }>(5_000);
      await proveLedger(store, ledger(), new Set());
      // Every consumer took part: the broker spread the messages.
      expect(results.filter((r) => (r.counters.completed ?? 0) > 0).length).toBeGreaterThanOrEqual(2);
      // Every message a consumer took was acked: each of the ROWS rows took at least one, so at most the copies
      // are left, and those only when the relay sent some (a row no consumer claimed within redispatchMs is
      // published again, which a loaded machine makes happen). Usually published = ROWS and nothing is left.
      const left = (await (await openBroker()).depth()) ?? 0;
      expect(left, `messages left in the queue (${relayed.published} published for ${ROWS} rows)`).toBeLessThanOrEqual(relayed.published - ROWS);
    });

    it('survives kill -9 of the relay mid-run: a new relay publishes the rest, and no row runs twice', async () => {
      const store = await seed();
      const first = startRelay('relay 1');
      await first.line((line) => line.startsWith('published ') && Number(line.slice(10)) > 0, 'the first relay to publish');
      await kill(first);
      const consumers = [1, 2].map((i) => startConsumer(`consumer ${i}`));
      const second = startRelay('relay 2');
      await Promise.all(consumers.map((c) => c.result<ChildWorkerResult>(120_000)));
      await stopRelay(second);
      await proveLedger(store, ledger(), new Set());
    });

    it('survives kill -9 of a consumer holding claims: its rows run again after their lease, nothing else twice', async () => {
      const store = await seed();
      const relay = startRelay();
      const doomed = startConsumer('doomed consumer', { STATUSQ_HANG: '1' });
      const hanging = new Set<string>();
      await doomed.line((line) => (line.startsWith('hanging ') && hanging.add(line.slice(8)).size === 4) || false, 'the doomed consumer to hold 4 claims', 60_000);
      await kill(doomed);
      const consumers = [1, 2, 3].map((i) => startConsumer(`consumer ${i}`));
      await Promise.all(consumers.map((c) => c.result<ChildWorkerResult>(120_000)));
      await stopRelay(relay);
      const { reruns } = await proveLedger(store, ledger(), new Set([doomed.pid]));
      expect(reruns).toBe(4);
    });

    it('drops duplicate and out-of-order messages at the claim: injected copies of every message change nothing', async () => {
      const store = await seed();
      const relay = startRelay();
      await waitFor('every row dispatched', async () => {
        const { rows } = await store.execute({ sql: `SELECT COUNT(*) AS n FROM ${TABLE} WHERE dispatched_at IS NULL`, params: [] });
        return Number(rows[0]!.n) === 0;
      }, { timeoutMs: 60_000 });
      await stopRelay(relay);
      // Each message twice more, newest first: duplicates, and out of order.
      const injector = await openBroker();
      const copies = Array.from({ length: ROWS }, (_, i) => ({ table: TABLE, id: ROWS - i, attempt: 1 }));
      await injector.publish([...copies, ...copies]);
      const consumers = [1, 2, 3].map((i) => startConsumer(`consumer ${i}`));
      const results = await Promise.all(consumers.map((c) => c.result<ChildWorkerResult>(120_000)));
      await proveLedger(store, ledger(), new Set());
      expect(results.reduce((n, r) => n + (r.counters.claimed ?? 0), 0), 'rows claimed').toBe(ROWS);
      // Copies still queued when the table emptied (the consumers exited) are dropped by whichever consumer
      // takes them next: their claims find the rows done.
    });

    it('runs consumers beside polling workers on the same table (a migration in progress): every row once', async () => {
      const store = await seed();
      const relay = startRelay();
      const consumers = [startConsumer('consumer 1'), startConsumer('consumer 2'), startConsumer('poller', {}, false)];
      const results = await Promise.all(consumers.map((c) => c.result<ChildWorkerResult>(120_000)));
      await stopRelay(relay);
      await proveLedger(store, ledger(), new Set());
      expect(results[2]!.counters.completed ?? 0, 'rows the polling worker ran').toBeGreaterThan(0);
      expect((results[0]!.counters.completed ?? 0) + (results[1]!.counters.completed ?? 0), 'rows the consumers ran').toBeGreaterThan(0);
    });

    it('gives up a row that kills its consumer on every attempt (reaped after its lease) and dead-letters it once', async () => {
      const store = await seed();
      const { rows } = await store.execute({ sql: `SELECT id FROM ${TABLE} ORDER BY id`, params: [] });
      const poison = String(rows[ROWS / 2]!.id);
      const relay = startRelay();
      // One job at a time, so a consumer the poison row kills holds nothing else; with 2 attempts it kills two
      // of the three, and the third reaps it to failed after its second lease runs out.
      const consumers = [1, 2, 3].map((i) => startConsumer(`consumer ${i}`, { STATUSQ_POISON: poison }, true, { concurrency: 1, maxAttempts: 2 }));
      const ends = await withDeadline(Promise.all(consumers.map((c) => c.exited)), 120_000, 'the consumers to end');
      await stopRelay(relay);
      const killed = consumers.filter((_c, i) => ends[i]!.signal === 'SIGKILL');
      expect(killed, 'consumers the poison row killed').toHaveLength(2);
      expect(ends.filter((end) => end.code === 0), 'the consumer that gave the row up and finished').toHaveLength(1);
      await proveLedger(store, ledger(), new Set(killed.map((c) => c.pid)), [poison]);
      expect(readLedger(ledger()).filter((run) => run.id === poison).map((run) => run.attempt)).toEqual([1, 2]);
      const letters = await broker.readDeadLetters(brokerUrl, queue);
      expect(letters).toEqual([{ table: TABLE, id: Number(poison), attempt: 2, error: expect.stringMatching(/^lease expired after 1500 ms/) }]);
    });

    for (const fault of ['restarted', 'killed with SIGKILL and started again'] as const) {
      it(`keeps going when the broker is ${fault} mid-run (a private broker): every row done, none twice`, async () => {
        privateBroker = await broker.privateBroker();
        brokerUrl = privateBroker.url;
        const store = await seed();
        const relay = startRelay();
        const consumers = [1, 2].map((i) => startConsumer(`consumer ${i}`, { STATUSQ_JOB_MS: '5' }));
        await waitFor('a third of the rows done', async () => {
          const { rows } = await store.execute({ sql: `SELECT COUNT(*) AS n FROM ${TABLE} WHERE status = 1`, params: [] });
          return Number(rows[0]!.n) >= ROWS / 3;
        }, { timeoutMs: 60_000 });
        if (fault === 'restarted') await privateBroker.restart();
        else await privateBroker.killAndStart();
        await Promise.all(consumers.map((c) => c.result<ChildWorkerResult>(150_000)));
        await stopRelay(relay);
        await proveLedger(store, ledger(), new Set());
      });
    }

    it('keeps going when every connection to the broker is dropped mid-run (a TCP proxy): every row done, none twice', async () => {
      // The relay and the consumers reach the shared broker through a proxy of the test's own, which cuts
      // only its own sockets; afterEach drops the queue through the real URL, the proxy being gone by then.
      const route = routeThrough(broker.url, BROKER_PORTS[new URL(broker.url).protocol] ?? 0);
      const proxy = await TcpProxy.start(route.upstream);
      try {
        brokerUrl = route.via({ host: '127.0.0.1', port: proxy.port });
        const store = await seed();
        const relay = startRelay();
        const consumers = [1, 2].map((i) => startConsumer(`consumer ${i}`, { STATUSQ_JOB_MS: '5' }));
        for (const [share, what] of [[1 / 3, 'a third'], [2 / 3, 'two thirds']] as const) {
          await waitFor(`${what} of the rows done`, async () => {
            const { rows } = await store.execute({ sql: `SELECT COUNT(*) AS n FROM ${TABLE} WHERE status = 1`, params: [] });
            return Number(rows[0]!.n) >= ROWS * share;
          }, { timeoutMs: 60_000 });
          const before = proxy.accepted;
          const dropped = proxy.dropAll();
          // The relay's and each consumer's connection at least: all three were in use.
          expect(dropped, `connections cut at ${what}`).toBeGreaterThanOrEqual(3);
          // Each client came back, through the proxy: the drop reached them all and nothing goes around it.
          await waitFor(`the clients to reconnect after the drop at ${what}`, () => proxy.accepted >= before + dropped, { timeoutMs: 40_000 });
        }
        await Promise.all(consumers.map((c) => c.result<ChildWorkerResult>(150_000)));
        await stopRelay(relay);
        await proveLedger(store, ledger(), new Set());
      } finally {
        brokerUrl = broker.url;
        await proxy.close();
      }
    });
  });
}
