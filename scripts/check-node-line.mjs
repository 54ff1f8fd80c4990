// statusq on a Node.js line besides this machine's own (`.ci/run` checks 22 and 24, the LTS lines, each a step of
// its own): that line's Node fetched from the npm registry (node-lines.mjs), then what a user of it relies on:
//  1. The packed packages: a fresh npm project outside the workspace, the tarballs installed by that line's
//     npm (better-sqlite3 compiled for its ABI against the headers the line ships; nothing else downloaded),
//     and the CLI through npx: init, enqueue, work and stats on SQLite, and doctor on PostgreSQL and MariaDB.
//  2. The conformance suite from the packed kit (@statusq/conformance) on SQLite, PostgreSQL and MariaDB, one
//     file per database side by side, as a user's own adapter test runs it: every case, at the kit's own race
//     sizes. The workspace's conformance tier runs the larger races on the machine's own line; what another
//     line changes is the runtime under them (V8, libuv, the native ABI, the drivers on it), which every case
//     exercises, and three lines of the larger races would not fit CI's 20 minutes on two cores.
//  3. The unit tier, in a copy of the checkout installed on that line (node-lines.mjs' lineWorkspace), which
//     takes the build of step 1 as a prebuilt better-sqlite3 instead of compiling SQLite a second time.
// A line that cannot be fetched fails in CI (STATUSQ_REQUIRE_DATABASES=1) with one line naming the package and
// version, and is skipped with that reason elsewhere.
// Usage: node scripts/check-node-line.mjs MAJOR [--packs DIR] (DIR: tarballs check-packages.mjs packed)
// Exit: 0 passed or skipped, 1 failed, 2 bad arguments.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lineEnv, lineWorkspace, nodeLine, runCommand } from './node-lines.mjs';
import { MYSQL_SERVER, POSTGRES_SERVER, installFromTarballs, outputTail, packPrebuild, packedTarballs, prebuildName, root, run, scratchDatabase, vitestSummary, workspaceBetterSqlite } from './packs.mjs';

const major = process.argv[2];
if (!/^\d+$/.test(major ?? '')) {
  console.error('usage: node scripts/check-node-line.mjs MAJOR [--packs DIR]   (e.g. 22)');
  process.exit(2);
}
const inCi = process.env.STATUSQ_REQUIRE_DATABASES === '1';
const began = performance.now();
const seconds = (since) => `${((performance.now() - since) / 1000).toFixed(1)} s`;
const failures = [];

let env;
let version;
try {
  const node = await nodeLine(major);
  env = await lineEnv(major);
  version = run(node, ['--version'], root).trim();
} catch (error) {
  console.error(`node ${major}: ${error.message}`);
  if (inCi) process.exit(1);
  console.info(`node ${major}: skipped (${error.message})`);
  process.exit(0);
}
console.info(`node ${major}: ${version} from the npm registry (${seconds(began)})`);

const work = mkdtempSync(join(tmpdir(), `statusq-node${major}-`));
const databases = [];
try {
  const tarballs = packedTarballs(work);
  const vitestVersion = JSON.parse(readFileSync(join(root, 'node_modules/vitest/package.json'), 'utf8')).version;
  const sqlite = workspaceBetterSqlite();

  // 1. The packed packages, installed on this line.
  const app = join(work, 'app');
  mkdirSync(join(app, 'test'), { recursive: true });
  writeFileSync(
    join(app, 'package.json'),
    `${JSON.stringify(
      {
        name: `statusq-node${major}`,
        private: true,
        type: 'module',
        dependencies: { '@statusq/core': '*', '@statusq/adapter-sqlite': '*', '@statusq/adapter-postgres': '*', '@statusq/adapter-mysql': '*', statusq: '*', 'better-sqlite3': sqlite.version, pg: '^8', mysql2: '^3' },
        devDependencies: { '@statusq/conformance': '*', vitest: vitestVersion },
        allowScripts: { 'better-sqlite3': true },
      },
      null,
      2,
    )}\n`,
  );
  let step = performance.now();
  // SQLite's amalgamation at -O1 (its Makefile puts CFLAGS after its own -O3): 17 CPU-seconds instead of 46 on
  // the CI machine, per line, and the line's runtime, ABI and driver are what is under test here, not SQLite's speed.
  installFromTarballs(app, tarballs, { ...env, CFLAGS: '-O1' });
  console.info(`node ${major}: the tarballs installed with npm ${run('npm', ['--version'], app, { env }).trim()} (${seconds(step)})`);
  const npx = (args, options = {}) => run('npx', args, app, { env, timeout: 300_000, ...options });
  step = performance.now();
  const db = `sqlite:${join(app, 'jobs.db')}`;
  npx(['statusq', 'init', '--db', db]);
  npx(['statusq', 'enqueue', '--db', db, '--payload', '{"n":1}']);
  writeFileSync(join(app, 'handler.mjs'), 'export default async () => ({ ok: true });\n');
  npx(['statusq', 'work', '--db', db, '--table', 'jobs', '--handler', './handler.mjs', '--exit-when-empty']);
  const stats = JSON.parse(npx(['statusq', 'stats', '--db', db, '--table', 'jobs', '--json']));
  if (stats.done !== 1) failures.push(`npx statusq on SQLite: expected 1 done row, got ${JSON.stringify(stats)}`);
  for (const [label, server, prefix] of [
    ['PostgreSQL', POSTGRES_SERVER, 'statusq_node_doctor'],
    ['MariaDB', MYSQL_SERVER, 'statusq_node_doctor'],
  ]) {
    const database = await scratchDatabase(app, server, `${prefix}${major}`);
    databases.push(database);
    npx(['statusq', 'init', '--db', database.url, '--table', 'doctor_jobs']);
    try {
      npx(['statusq', 'doctor', '--db', database.url, '--table', 'doctor_jobs']);
    } catch (error) {
      failures.push(`npx statusq doctor on ${label} exited ${error.status}:\n${error.stdout}${error.stderr}`);
    }
  }
  console.info(`node ${major}: npx statusq init, enqueue, work, stats on SQLite; doctor on PostgreSQL and MariaDB (${seconds(step)})`);

  // 2 and 3 side by side: the kit waits on its databases' timers and leases, the unit tier on the CPU.
  const prebuilds = join(work, 'prebuilds');
  packPrebuild(join(app, 'node_modules/better-sqlite3'), prebuilds, prebuildName(sqlite.version, run('node', ['-p', 'process.versions.modules'], app, { env }).trim()));
  const kit = { sqlite: 'adapter-sqlite', postgres: 'adapter-postgres', mysql: 'adapter-mysql' };
  for (const [dialect, adapter] of Object.entries(kit)) {
    const exported = `${dialect}Conformance`;
    writeFileSync(join(app, 'test', `${dialect}.conformance.test.js`), `import { runConformance } from '@statusq/conformance';\nimport { ${exported} } from '@statusq/${adapter}/testing';\n\nrunConformance(${exported});\n`);
  }
  // Three files at once (vitest's default on two cores is one): each waits on its own database most of the time.
  writeFileSync(join(app, 'vitest.config.js'), "export default { test: { maxWorkers: 3, include: ['test/*.test.js'] } };\n");
  const conformance = (async () => {
    const started = performance.now();
    try {
      const output = await runCommand('npx', ['vitest', 'run'], { cwd: app, env: { ...env, STATUSQ_REQUIRE_DATABASES: '1', STATUSQ_MYSQL_URL: MYSQL_SERVER, STATUSQ_POSTGRES_URL: POSTGRES_SERVER }, timeout: 900_000 });
      console.info(`node ${major}: the conformance kit on SQLite, PostgreSQL and MariaDB: ${vitestSummary(output)} (${seconds(started)})`);
    } catch (error) {
      failures.push(`the conformance kit on SQLite, PostgreSQL and MariaDB failed:\n${outputTail(error.output ?? error.message)}`);
    }
  })();
  const unit = (async () => {
    const started = performance.now();
    try {
      const workspace = await lineWorkspace(major, { root, installEnv: { npm_config_better_sqlite3_local_prebuilds: prebuilds } });
      const output = await runCommand('npx', ['vitest', 'run', '--project', 'unit'], { cwd: workspace.dir, env: { ...workspace.env, CI: 'true' }, timeout: 900_000 });
      console.info(`node ${major}: the unit tier in a copy of the checkout installed on this line: ${vitestSummary(output)} (${seconds(started)})`);
    } catch (error) {
      failures.push(`the unit tier failed:\n${outputTail(error.output ?? error.message)}`);
    }
  })();
  await Promise.all([conformance, unit]);
} catch (error) {
  failures.push(`${error.message}\n${error.stdout ?? ''}${error.stderr ?? ''}`);
} finally {
  for (const database of databases) await database.drop().catch((error) => failures.push(`dropping ${database.url}: ${error.message}`));
  rmSync(work, { recursive: true, force: true });
}
console.info(`node ${major} (${version}): ${failures.length === 0 ? 'passed' : 'FAILED'} in ${seconds(began)}`);
if (failures.length > 0) {
  console.error(failures.join('\n'));
  process.exit(1);
}
