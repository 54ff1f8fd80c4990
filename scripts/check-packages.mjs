// Checks the public packages as a user gets them: packs each one with pnpm (which rewrites workspace:
// ranges), lints each tarball with publint and @arethetypeswrong/cli, refuses a tarball that still names a workspace: range or a
// private package, then installs the tarballs with plain npm into a fresh project outside the workspace and
// runs what a user runs there: the CLI through npx (init, enqueue, work, stats on SQLite, and `statusq doctor`
// against SQLite, PostgreSQL and MariaDB). Run after the build: node scripts/check-packages.mjs [--packs DIR]
// With --packs, the tarballs are packed into DIR and left there for the next step (check-example.mjs).
import { checkPackage, createPackageFromTarballData } from '@arethetypeswrong/core';
import { getExitCode } from '@arethetypeswrong/cli/internal/getExitCode';
import { typed as renderTypedAnalysis } from '@arethetypeswrong/cli/internal/render';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENGINES_NODE } from './node-lines.mjs';
import { MYSQL_SERVER, POSTGRES_SERVER, PUBLIC, npmInstall, packPublic, packsArgument, root, run, scratchDatabase, tarballManifest } from './packs.mjs';

/** The broker packages, their drivers, a URL of the machine's server and a script (run in the app) deleting a queue. */
const BROKERS = [
  {
    name: 'rabbitmq',
    package: '@statusq/broker-rabbitmq',
    drivers: ['amqplib@2'],
    url: 'amqp://guest:guest@127.0.0.1:5672',
    dropQueue: (queue) =>
      `import amqp from 'amqplib'; const c = await amqp.connect('amqp://guest:guest@127.0.0.1:5672'); const ch = await c.createChannel(); for (const q of [${JSON.stringify(queue)}, ${JSON.stringify(`${queue}.dead`)}]) await ch.deleteQueue(q); await c.close();`,
  },
  {
    name: 'nats',
    package: '@statusq/broker-nats',
    drivers: ['@nats-io/transport-node@3', '@nats-io/jetstream@3'],
    url: 'nats://127.0.0.1:4222',
    // The stream of queue a.b.c is a_b_c, its dead letters a_b_c_dead (the package's README).
    dropQueue: (queue) => {
      const stream = queue.replaceAll('.', '_');
      return `import { connect } from '@nats-io/transport-node'; import { jetstreamManager } from '@nats-io/jetstream'; const nc = await connect({ servers: '127.0.0.1:4222' }); const jsm = await jetstreamManager(nc); for (const s of [${JSON.stringify(stream)}, ${JSON.stringify(`${stream}_dead`)}]) await jsm.streams.delete(s).catch(() => undefined); await nc.close();`;
    },
  },
];

// attw's CLI with `--profile esm-only`, in this process: TypeScript loads once for the ten tarballs instead of
// once per tarball (2.4 CPU-seconds each on the CI machine). ESM only, on purpose: CommonJS callers use import();
// every entry's types must resolve for ESM and bundlers, so CommonJS resolutions are not judged.
const ATTW_ESM_ONLY = { format: 'ascii', ignoreResolutions: ['node10', 'node16-cjs'] };
/** What attw finds wrong with the types of `tarball` (its table), or null: exit code 0 of the CLI, untyped included. */
async function typesProblems(tarball) {
  const analysis = await checkPackage(createPackageFromTarballData(new Uint8Array(readFileSync(tarball))));
  if (!analysis.types || getExitCode(analysis, ATTW_ESM_ONLY) === 0) return null;
  return await renderTypedAnalysis(analysis, ATTW_ESM_ONLY);
}

const work = mkdtempSync(join(tmpdir(), 'statusq-packages-'));
const problems = [];
try {
  const packs = packsArgument() ?? join(work, 'packs');
  const privateNames = new Set();
  for (const dir of PUBLIC) {
    const manifest = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
    if (manifest.private) problems.push(`${dir}: a public package is marked private`);
  }
  packPublic(packs);
  const workspaceDirs = ['packages', 'apps'].flatMap((dir) => readdirSync(join(root, dir)).map((name) => join(dir, name))).concat('test-fixtures');
  for (const dir of workspaceDirs) {
    const manifest = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
    if (manifest.private) privateNames.add(manifest.name);
  }
  const tarballs = readdirSync(packs).filter((f) => f.endsWith('.tgz')).map((f) => join(packs, f));
  const tarballOf = new Map();
  for (const tarball of tarballs) {
    const listing = run('tar', ['-tzf', tarball], work).trim().split('\n');
    const manifest = tarballManifest(tarball);
    tarballOf.set(manifest.name, tarball);
    const ranges = { ...manifest.dependencies, ...manifest.peerDependencies };
    for (const [dependency, range] of Object.entries(ranges)) {
      if (String(range).startsWith('workspace:')) problems.push(`${manifest.name}: ${dependency} is still ${range}`);
      if (privateNames.has(dependency)) problems.push(`${manifest.name}: depends on the private package ${dependency}`);
    }
    // The Node lines CI tests (scripts/node-lines.mjs), no more and no fewer.
    if (manifest.engines?.node !== ENGINES_NODE) problems.push(`${manifest.name}: engines.node is ${JSON.stringify(manifest.engines?.node)}, not the lines CI tests (${ENGINES_NODE})`);
    for (const required of ['package/package.json', 'package/README.md', 'package/LICENSE']) {
      if (!listing.includes(required)) problems.push(`${manifest.name}: the tarball has no ${required.slice('package/'.length)}`);
    }
    if (listing.some((f) => f.endsWith('.test.ts') || f.includes('/src/test/'))) problems.push(`${manifest.name}: the tarball ships tests`);
    try {
      run(join(root, 'node_modules/.bin/publint'), ['--strict', tarball], work);
    } catch (error) {
      problems.push(`${manifest.name}: publint: ${error.stdout}${error.stderr}`);
    }
    const types = await typesProblems(tarball);
    if (types) problems.push(`${manifest.name}: attw: ${types}`);
    console.info(`${manifest.name}@${manifest.version}: ${listing.length} files, publint and attw clean`);
  }

  // A fresh npm project, as a user starts one: core, the adapters and their drivers, the CLI. The conformance
  // kit from the tarballs runs in check-example.mjs, in the example app's own test file.
  // allowScripts: npm 11 warns about an unreviewed install script and npm 12 skips it (better-sqlite3 builds there).
  const app = join(work, 'app');
  mkdirSync(app, { recursive: true });
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'statusq-consumer', private: true, type: 'module', allowScripts: { 'better-sqlite3': true } }, null, 2));
  const chosen = ['@statusq/core', '@statusq/schema', '@statusq/adapter-sqlite', '@statusq/adapter-postgres', '@statusq/adapter-mysql', ...BROKERS.map((b) => b.package), 'statusq'];
  // With the @statusq/* packages those depend on (the brokers' testing entries use @statusq/test-fixtures),
  // which npm would otherwise look for on the registry, where they are not yet.
  for (const name of chosen) for (const dependency of Object.keys(tarballManifest(tarballOf.get(name)).dependencies ?? {})) if (dependency.startsWith('@statusq/') && !chosen.includes(dependency)) chosen.push(dependency);
  const installed = chosen.map((name) => tarballOf.get(name));
  npmInstall(app, [...installed, 'better-sqlite3@12', 'pg@8', 'mysql2@3', ...BROKERS.flatMap((b) => b.drivers)]);
  const db = `sqlite:${join(app, 'jobs.db')}`;
  run('npx', ['statusq', 'init', '--db', db], app);
  run('npx', ['statusq', 'enqueue', '--db', db, '--payload', '{"n":1}'], app);
  writeFileSync(join(app, 'handler.mjs'), 'export default async () => ({ ok: true });\n');
  run('npx', ['statusq', 'work', '--db', db, '--table', 'jobs', '--handler', './handler.mjs', '--exit-when-empty'], app);
  const stats = JSON.parse(run('npx', ['statusq', 'stats', '--db', db, '--table', 'jobs', '--json'], app));
  if (stats.done !== 1) problems.push(`npx statusq: expected 1 done row, got ${JSON.stringify(stats)}`);
  else console.info('npx statusq init / enqueue / work / stats from the installed tarballs: 1 job done');

  // `statusq doctor` as an operator runs it before going live, on each server: a fresh database of its own,
  // a managed table made by `init`, every check passing (exit 0), the report printed for the record.
  const scratch = [];
  try {
    for (const server of [POSTGRES_SERVER, MYSQL_SERVER]) scratch.push(await scratchDatabase(app, server, 'statusq_doctor_ci'));
    for (const [label, url] of [['SQLite', db], ['PostgreSQL', scratch[0].url], ['MariaDB', scratch[1].url]]) {
      run('npx', ['statusq', 'init', '--db', url, '--table', 'doctor_jobs'], app);
      try {
        const report = run('npx', ['statusq', 'doctor', '--db', url, '--table', 'doctor_jobs'], app, { timeout: 300_000 });
        console.info(`npx statusq doctor on ${label} (exit 0):\n${report.trimEnd()}`);
      } catch (error) {
        problems.push(`npx statusq doctor on ${label} exited ${error.status}:\n${error.stdout}${error.stderr}`);
      }
    }
  } finally {
    for (const database of scratch) await database.drop();
  }

  // The broker path from the installed tarballs, on MariaDB: a table migrated for dispatch, `statusq relay`
  // beside `statusq work --from` until the table is empty, every row done once; the queue removed after.
  const brokerDb = await scratchDatabase(app, MYSQL_SERVER, 'statusq_broker_ci');
  try {
    for (const broker of BROKERS) {
      const table = `broker_jobs_${broker.name}`;
      const queue = `statusq.ci.${process.pid}.${broker.name}`;
      run('npx', ['statusq', 'init', '--db', brokerDb.url, '--table', table, '--with', 'dispatch'], app);
      writeFileSync(join(app, 'rows.ndjson'), Array.from({ length: 50 }, (_, n) => JSON.stringify({ n })).join('\n') + '\n');
      run('npx', ['statusq', 'enqueue', '--db', brokerDb.url, '--table', table, '--file', 'rows.ndjson'], app);
      // Ten more published by enqueue itself (--to), which the relay then finds already dispatched.
      writeFileSync(join(app, 'published.ndjson'), Array.from({ length: 10 }, (_, n) => JSON.stringify({ n: 50 + n })).join('\n') + '\n');
      const published = run('npx', ['statusq', 'enqueue', '--db', brokerDb.url, '--table', table, '--file', 'published.ndjson', '--to', broker.url, '--queue', queue], app);
      if (!/enqueued 10 rows into .*, published to /.test(published)) problems.push(`npx statusq enqueue --to ${broker.name} said: ${published.trim()}`);
      const relay = spawn('npx', ['statusq', 'relay', '--db', brokerDb.url, '--table', table, '--to', broker.url, '--queue', queue, '--exit-when-empty'], { cwd: app, stdio: 'ignore' });
      const relayExit = new Promise((resolve) => relay.on('exit', (code) => resolve(code)));
      try {
        run('npx', ['statusq', 'work', '--db', brokerDb.url, '--table', table, '--handler', './handler.mjs', '--from', broker.url, '--queue', queue, '--exit-when-empty'], app, { timeout: 120_000 });
        const relayCode = await Promise.race([relayExit, new Promise((resolve) => setTimeout(() => resolve('still running after 60 s'), 60_000))]);
        if (relayCode !== 0) problems.push(`npx statusq relay --to ${broker.name} exited ${relayCode}`);
        const counts = JSON.parse(run('npx', ['statusq', 'stats', '--db', brokerDb.url, '--table', table, '--json'], app));
        if (counts.done !== 60 || counts.dispatched !== 0) problems.push(`npx statusq enqueue --to, relay + work --from ${broker.name}: expected 60 done, got ${JSON.stringify(counts)}`);
        else console.info(`npx statusq enqueue --to, relay + work --from ${broker.name} from the installed tarballs: 60 jobs done`);
      } finally {
        relay.kill('SIGKILL');
        run('node', ['--input-type=module', '-e', broker.dropQueue(queue)], app);
      }
    }
  } finally {
    await brokerDb.drop();
  }
} catch (error) {
  problems.push(`${error.message}\n${error.stdout ?? ''}${error.stderr ?? ''}`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
