// `statusq relay` and `statusq work --from` as a user runs them, on MariaDB and PostgreSQL through each broker
// (the shared RabbitMQ and NATS servers): a table migrated for dispatch, a relay, consumer processes, stats;
// and the bad input that must exit 2 with nothing touched, or 1 after a bounded wait for a broker that is down.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDatabase, dropDatabase, mysqlUnavailable } from '@statusq/adapter-mysql/testing';
import { createTestDatabase, dropTestDatabase, postgresUnavailable } from '@statusq/adapter-postgres/testing';
import { RABBITMQ_TEST_URL, deleteQueues, rabbitmqUnavailable, readDeadLetters as readRabbitDeadLetters } from '@statusq/broker-rabbitmq/testing';
import { NATS_TEST_URL, deleteQueueStreams, natsUnavailable, readDeadLetters as readNatsDeadLetters } from '@statusq/broker-nats/testing';
import type { DeadLetter } from '@statusq/core/tools';
import { launchCli, logLines, parseStats, runCliInProcess, until, writeFixture } from './test/cli-harness.js';
import { mysqlCliTarget, postgresCliTarget } from './test/cli-targets.js';
import { dialectSelected } from '../../../scripts/test-tiers.mjs';

interface BrokerTarget {
  name: string;
  url: string;
  unavailable: () => Promise<string | null>;
  drop: (queue: string) => Promise<void>;
  /** A URL of this scheme where nothing listens. */
  deadUrl: string;
  readDeadLetters: (queue: string) => Promise<DeadLetter[]>;
}

const BROKERS: BrokerTarget[] = [
  { name: 'RabbitMQ', url: RABBITMQ_TEST_URL, unavailable: () => rabbitmqUnavailable(), drop: (queue) => deleteQueues([queue]), deadUrl: 'amqp://guest:guest@127.0.0.1:1', readDeadLetters: (queue) => readRabbitDeadLetters(RABBITMQ_TEST_URL, queue) },
  { name: 'NATS', url: NATS_TEST_URL, unavailable: () => natsUnavailable(), drop: (queue) => deleteQueueStreams(NATS_TEST_URL, [queue]), deadUrl: 'nats://127.0.0.1:1', readDeadLetters: (queue) => readNatsDeadLetters(NATS_TEST_URL, queue) },
];

const DATABASES = [
  { name: 'MariaDB', dialect: 'mysql', target: mysqlCliTarget, create: () => createDatabase(), drop: (url: string) => dropDatabase(url), unavailable: () => mysqlUnavailable() },
  { name: 'PostgreSQL', dialect: 'postgres', target: postgresCliTarget, create: () => createTestDatabase(), drop: (url: string) => dropTestDatabase(url), unavailable: () => postgresUnavailable() },
] as const;

const required = process.env.STATUSQ_REQUIRE_DATABASES === '1';

for (const broker of BROKERS) {
  for (const database of DATABASES.filter((d) => dialectSelected(d.dialect))) {
    const unavailable = (await broker.unavailable()) ?? (await database.unavailable());
    if (unavailable !== null) {
      if (required) it(`${broker.name} and ${database.name} are reachable (STATUSQ_REQUIRE_DATABASES=1)`, () => expect.fail(unavailable));
      else it.skip(`[needs ${broker.name} and ${database.name}] ${unavailable}`, () => undefined);
      continue;
    }
    describe(`statusq relay and work --from: ${broker.name} on ${database.name}`, () => {
      let dir = '';
      let db = '';
      let table = '';
      beforeEach(async () => {
        dir = mkdtempSync(join(tmpdir(), 'statusq-cli-broker-'));
        db = await database.create();
        table = `jobs_${randomBytes(4).toString('hex')}`;
      });
      afterEach(async () => {
        await broker.drop(`statusq.${table}`).catch(() => undefined);
        await database.drop(db);
        rmSync(dir, { recursive: true, force: true });
      });

      const statsOf = async () => parseStats(await runCliInProcess(dir, ['stats', '--db', db, '--table', table, '--json']));

      it('a relay and two consumer processes work every row once; stats shows what waits in the broker', async () => {
        expect((await runCliInProcess(dir, ['init', '--db', db, '--table', table, '--with', 'dispatch'])).code).toBe(0);
        const rows = Array.from({ length: 200 }, (_, n) => JSON.stringify({ n })).join('\n');
        const file = writeFixture(dir, 'rows.ndjson', `${rows}\n`);
        expect((await runCliInProcess(dir, ['enqueue', '--db', db, '--table', table, '--file', file])).code).toBe(0);
        const ledger = join(dir, 'ledger.txt');
        const handler = writeFixture(dir, 'handler.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(ledger)}, job.id + '\\n'); };\n`);
        const relay = launchCli(dir, ['relay', '--db', db, '--table', table, '--to', broker.url, '--metrics-port', '0']);
        await until('the relay to publish every row', async () => ((await statsOf()) as unknown as { dispatched: number }).dispatched === 200);
        const work = await runCliInProcess(dir, ['work', '--db', db, '--table', table, '--handler', handler, '--from', broker.url, '--processes', '2', '--exit-when-empty']);
        expect(work.code, work.stderr).toBe(0);
        // The relay's metrics, as Prometheus scrapes them: every row published once.
        const port = logLines(relay.stdout().trim()).find((line) => line.metricsPort !== undefined)?.metricsPort;
        const exposition = await (await fetch(`http://127.0.0.1:${String(port)}/metrics`)).text();
        expect(exposition).toContain(`statusq_relay_published_total{table="${table}"} 200`);
        expect(exposition).toContain(`statusq_relay_publish_failures_total{table="${table}"} 0`);
        relay.child.kill('SIGTERM');
        const relayRun = await relay.ended;
        expect(relayRun.code, relayRun.stderr).toBe(0);
        expect(relayRun.stdout).toContain('relay started');
        // The password never reaches the output.
        expect(relayRun.stdout + relayRun.stderr + work.stdout + work.stderr).not.toContain('guest:guest');
        expect(await statsOf()).toMatchObject({ pending: 0, processing: 0, done: 200, dispatched: 0 });
        const { readFileSync } = await import('node:fs');
        const ids = readFileSync(ledger, 'utf8').trim().split('\n');
        expect(new Set(ids).size).toBe(200);
        expect(ids).toHaveLength(200);
      });

      it('enqueue --to publishes the committed rows itself: consumers run them with no relay at all', async () => {
        expect((await runCliInProcess(dir, ['init', '--db', db, '--table', table, '--with', 'dispatch'])).code).toBe(0);
        const file = writeFixture(dir, 'rows.ndjson', `${Array.from({ length: 30 }, (_, n) => JSON.stringify({ n })).join('\n')}\n`);
        const enqueue = await runCliInProcess(dir, ['enqueue', '--db', db, '--table', table, '--file', file, '--to', broker.url]);
        expect(enqueue.code, enqueue.stderr).toBe(0);
        expect(enqueue.stdout).toMatch(new RegExp(`enqueued 30 rows into ${table}, published to ${broker.name.toLowerCase()} at `));
        expect(enqueue.stdout + enqueue.stderr).not.toContain('guest:guest');
        expect(await statsOf()).toMatchObject({ pending: 30, dispatched: 30 });
        const handler = writeFixture(dir, 'handler.mjs', 'export default async () => undefined;\n');
        const work = await runCliInProcess(dir, ['work', '--db', db, '--table', table, '--handler', handler, '--from', broker.url, '--exit-when-empty']);
        expect(work.code, work.stderr).toBe(0);
        expect(await statsOf()).toMatchObject({ pending: 0, done: 30, dispatched: 0 });
        // What it cannot publish at the commit is refused before anything is written.
        for (const extra of [['--delay', '5s'], ['--key', 'k1']]) {
          const refused = await runCliInProcess(dir, ['enqueue', '--db', db, '--table', table, '--payload', '{"n":1}', '--to', broker.url, ...extra]);
          expect(refused.code, extra.join(' ')).toBe(2);
          expect(refused.stderr).toContain('published by the relay');
        }
        const queueAlone = await runCliInProcess(dir, ['enqueue', '--db', db, '--table', table, '--payload', '{"n":1}', '--queue', 'q1']);
        expect(queueAlone.code).toBe(2);
        expect(queueAlone.stderr).toContain('--queue needs --to');
        expect(await statsOf()).toMatchObject({ pending: 0, done: 30 });
      });

      it("enqueue --to and the relay on the seed's table_a, whose ids the application assigns: each row is published under the id it carries, and a consumer runs it", async () => {
        // The probe's MySQL run published none ("none could be published", no reason): only a returned or
        // AUTO_INCREMENT id was published, not the row's own.
        const seeded = await database.target.create(dir);
        try {
          for (const ddl of database.target.fixtures.tableA('table_a')) await seeded.query(ddl);
          expect((await runCliInProcess(dir, ['migrate', '--db', seeded.url, '--table', 'table_a', '--with', 'leases,dispatch'])).code).toBe(0);
          const rows = [10, 11].map((id) => JSON.stringify({ id, url: `https://example.test/${id}`, kind: 'ok', date: '2026-01-01 00:00:00.000' }));
          const enqueue = await runCliInProcess(dir, ['enqueue', '--db', seeded.url, '--table', 'table_a', '--file', writeFixture(dir, 'rows.ndjson', `${rows.join('\n')}\n`), '--to', broker.url]);
          expect(enqueue.code, enqueue.stderr).toBe(0);
          expect(enqueue.stdout).toMatch(new RegExp(`^enqueued 2 rows into table_a, published to ${broker.name.toLowerCase()} at `));
          const ledger = join(dir, 'ledger.txt');
          const handler = writeFixture(dir, 'handler.mjs', `import { appendFileSync } from 'node:fs';\nexport default async (job) => { appendFileSync(${JSON.stringify(ledger)}, job.id + '\\n'); };\n`);
          const work = await runCliInProcess(dir, ['work', '--db', seeded.url, '--table', 'table_a', '--handler', handler, '--from', broker.url, '--exit-when-empty']);
          expect(work.code, work.stderr).toBe(0);
          const { readFileSync } = await import('node:fs');
          expect(readFileSync(ledger, 'utf8').trim().split('\n').sort()).toEqual(['10', '11']);

          // Rows enqueued without --to: the relay publishes them under their own ids too.
          const later = [12, 13].map((id) => JSON.stringify({ id, url: `https://example.test/${id}`, kind: 'ok', date: '2026-01-01 00:00:00.000' }));
          expect((await runCliInProcess(dir, ['enqueue', '--db', seeded.url, '--table', 'table_a', '--file', writeFixture(dir, 'later.ndjson', `${later.join('\n')}\n`)])).code).toBe(0);
          const relay = launchCli(dir, ['relay', '--db', seeded.url, '--table', 'table_a', '--to', broker.url]);
          const tableStats = async () => parseStats(await runCliInProcess(dir, ['stats', '--db', seeded.url, '--table', 'table_a', '--json'])) as unknown as { dispatched: number };
          await until('the relay to publish both rows', async () => (await tableStats()).dispatched === 2);
          const relayed = await runCliInProcess(dir, ['work', '--db', seeded.url, '--table', 'table_a', '--handler', handler, '--from', broker.url, '--exit-when-empty']);
          expect(relayed.code, relayed.stderr).toBe(0);
          relay.child.kill('SIGTERM');
          expect((await relay.ended).code).toBe(0);
          expect(readFileSync(ledger, 'utf8').trim().split('\n').sort()).toEqual(['10', '11', '12', '13']);
        } finally {
          await broker.drop('statusq.table_a').catch(() => undefined);
          await seeded.dispose();
        }
      });

      it('bad input exits 2 with nothing touched: an unknown scheme, a table without the dispatch column', async () => {
        expect((await runCliInProcess(dir, ['init', '--db', db, '--table', table])).code).toBe(0);
        expect((await runCliInProcess(dir, ['enqueue', '--db', db, '--table', table, '--payload', '{"n":1}'])).code).toBe(0);
        const handler = writeFixture(dir, 'handler.mjs', 'export default async () => undefined;\n');
        const noColumn = await runCliInProcess(dir, ['work', '--db', db, '--table', table, '--handler', handler, '--from', broker.url, '--exit-when-empty']);
        expect(noColumn.code).toBe(2);
        expect(noColumn.stderr).toContain('migrate --with dispatch');
        const relayNoColumn = await runCliInProcess(dir, ['relay', '--db', db, '--table', table, '--to', broker.url]);
        expect(relayNoColumn.code).toBe(2);
        expect(relayNoColumn.stderr).toContain('migrate --with dispatch');
        const unknown = await runCliInProcess(dir, ['relay', '--db', db, '--table', table, '--to', 'kafka://127.0.0.1:9092']);
        expect(unknown.code).toBe(2);
        expect(unknown.stderr).toContain('@statusq/broker-kafka');
        const notUrl = await runCliInProcess(dir, ['work', '--db', db, '--table', table, '--handler', handler, '--from', 'rabbit']);
        expect(notUrl.code).toBe(2);
        expect(notUrl.stderr).toContain('unsupported broker URL');
        expect(await statsOf()).toMatchObject({ pending: 1, processing: 0, done: 0 });
      });

      // Once per broker: the launcher's recovery is the same SQL on every dialect (conformance runs it on each).
      if (database === DATABASES[0]) it('work --from --processes: a row that kills its process on its last attempt is given up by the launcher and dead-lettered', async () => {
        expect((await runCliInProcess(dir, ['init', '--db', db, '--table', table, '--with', 'dispatch'])).code).toBe(0);
        const file = writeFixture(dir, 'rows.ndjson', `${Array.from({ length: 20 }, (_, n) => JSON.stringify({ n })).join('\n')}\n`);
        expect((await runCliInProcess(dir, ['enqueue', '--db', db, '--table', table, '--file', file])).code).toBe(0);
        const handler = writeFixture(dir, 'handler.mjs', `export default async (job) => { if (String(job.id) === '5') process.kill(process.pid, 'SIGKILL'); };\n`);
        const relay = launchCli(dir, ['relay', '--db', db, '--table', table, '--to', broker.url]);
        // One job and one message at a time per process: the poison row dies alone, and no other row pays for its
        // death (NATS would hold a dead child's other messages for its 30 s ack wait).
        const work = await runCliInProcess(dir, ['work', '--db', db, '--table', table, '--handler', handler, '--from', broker.url, '--processes', '2', '--concurrency', '1', '--prefetch', '1', '--max-attempts', '1', '--exit-when-empty']);
        expect(work.code, work.stderr).toBe(0);
        relay.child.kill('SIGTERM');
        expect((await relay.ended).code).toBe(0);
        expect(work.stdout + work.stderr).toMatch(/1 running job charged an attempt \(1 given up: attempts used\)/);
        expect(await statsOf()).toMatchObject({ pending: 0, processing: 0, done: 19, failed: 1 });
        // Written by the launcher, which saw the child die: no worker of the fleet was there to do it.
        const letters = await broker.readDeadLetters(`statusq.${table}`);
        expect(letters).toEqual([{ table, id: 5, attempt: 1, error: expect.stringMatching(/^worker process \d+ killed by SIGKILL while this job ran/) }]);
      });

      // Once per broker (registered, not skipped, elsewhere): the wait is the broker's, whatever the database.
      if (database === DATABASES[0]) it('a broker that does not answer at start-up: exit 1 after the bounded wait, with a clear message', async () => {
        expect((await runCliInProcess(dir, ['init', '--db', db, '--table', table, '--with', 'dispatch'])).code).toBe(0);
        expect((await runCliInProcess(dir, ['enqueue', '--db', db, '--table', table, '--payload', '{"n":1}'])).code).toBe(0);
        const handler = writeFixture(dir, 'handler.mjs', 'export default async () => undefined;\n');
        const run = await runCliInProcess(dir, ['work', '--db', db, '--table', table, '--handler', handler, '--from', broker.deadUrl, '--exit-when-empty']);
        expect(run.code).toBe(1);
        expect(run.stderr).toMatch(/broker error \(Unreachable/);
        expect(await statsOf()).toMatchObject({ pending: 1, processing: 0 });
      });
    });
  }
}
