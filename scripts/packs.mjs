// The public packages packed as npm would publish them, in one place for the scripts that install them
// (check-packages.mjs, check-example.mjs): `.ci/run` packs once and hands both scripts the same directory.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';

export const root = new URL('..', import.meta.url).pathname;
export const PUBLIC = ['packages/core', 'packages/schema', 'packages/adapter-sqlite', 'packages/adapter-postgres', 'packages/adapter-mysql', 'packages/broker-rabbitmq', 'packages/broker-nats', 'packages/conformance', 'test-fixtures', 'apps/cli'];
const PNPM = ['-y', 'pnpm@12.4.2'];

export const run = (command, args, cwd, extra = {}) => execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...extra });

/**
 * Packs every public package into `dir` with pnpm, which rewrites workspace: ranges. Run after the build. One
 * recursive pnpm for all of them: the same tarballs as a pnpm per package, in 2.5 CPU-seconds instead of 35
 * (each npx and pnpm start is most of a second on the CI machine).
 */
export function packPublic(dir) {
  run('npx', [...PNPM, '--recursive', ...PUBLIC.flatMap((pkg) => ['--filter', `./${pkg}`]), 'pack', '--pack-destination', dir], root);
  const packed = readdirSync(dir).filter((file) => file.endsWith('.tgz')).length;
  if (packed !== PUBLIC.length) throw new Error(`pnpm pack left ${packed} tarballs in ${dir}, expected ${PUBLIC.length} (${PUBLIC.join(', ')})`);
}

/** The manifest inside a tarball. */
export function tarballManifest(tarball) {
  return JSON.parse(run('tar', ['-xzOf', tarball, 'package/package.json'], root));
}

/** The tarballs in `dir` by package name (not by file name, which carries the version). */
export function tarballsByName(dir) {
  const byName = new Map();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.tgz'))) {
    const tarball = join(dir, file);
    byName.set(tarballManifest(tarball).name, tarball);
  }
  return byName;
}

/** The tarballs by package name: those in the `--packs` directory an earlier step packed, else packed now into `work`/packs. */
export function packedTarballs(work) {
  let packs = packsArgument();
  if (!packs) {
    packs = join(work, 'packs');
    mkdirSync(packs);
    packPublic(packs);
  }
  return tarballsByName(packs);
}

/** The summary lines of a vitest run's output (Test Files, Tests), joined with `; `. */
export function vitestSummary(output) {
  return stripVTControlCharacters(output)
    .split('\n')
    .filter((line) => /^\s*(Test Files|Tests)\s/.test(line))
    .map((line) => line.trim())
    .join('; ');
}

/** The last `count` lines of a command's output, colours stripped: what a failure report shows of it. */
export function outputTail(output, count = 80) {
  return stripVTControlCharacters(output).split('\n').slice(-count).join('\n');
}

/** `--packs DIR`: a directory of tarballs packed by an earlier step; null when not given. */
export function packsArgument(argv = process.argv.slice(2)) {
  const at = argv.indexOf('--packs');
  if (at === -1) return null;
  const dir = argv[at + 1];
  if (!dir) throw new Error('--packs needs a directory');
  return dir;
}

/**
 * A database of its own on the server `serverUrl` names (PostgreSQL or MySQL/MariaDB), made with the driver
 * the installed project `app` has (`pg` or `mysql2`), as a user's own set-up would; `drop` removes it.
 */
export async function scratchDatabase(app, serverUrl, prefix) {
  const url = new URL(serverUrl);
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  const require = createRequire(join(app, 'package.json'));
  const postgres = url.protocol === 'postgres:' || url.protocol === 'postgresql:';
  const admin = async (sql) => {
    if (postgres) {
      const client = new (require('pg').Client)({ connectionString: url.toString() });
      await client.connect();
      try {
        return await client.query(sql);
      } finally {
        await client.end();
      }
    }
    const conn = await require('mysql2/promise').createConnection({ host: url.hostname, port: Number(url.port || 3306), user: decodeURIComponent(url.username) || 'root', password: decodeURIComponent(url.password) });
    try {
      return await conn.query(sql);
    } finally {
      await conn.end();
    }
  };
  await admin(postgres ? `CREATE DATABASE ${name}` : `CREATE DATABASE ${name} CHARACTER SET utf8mb4`);
  const at = new URL(url);
  at.pathname = `/${name}`;
  return { url: at.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name}`) };
}

export const POSTGRES_SERVER = process.env.STATUSQ_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const MYSQL_SERVER = process.env.STATUSQ_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

/**
 * `npm install` as the checks run it, in `app`: better-sqlite3's install script (prebuild-install) takes the
 * workspace's own build of the same version as a local prebuild instead of compiling SQLite again (a minute
 * or two of both cores, per install). A user's install downloads the same kind of prebuilt binary from the
 * package's releases, which this machine cannot reach; a different version, or another Node ABI, still
 * compiles as before.
 */
export function npmInstall(app, args = [], env = process.env) {
  const prebuilds = join(app, '.statusq-prebuilds');
  const { dir, version } = workspaceBetterSqlite();
  packPrebuild(dir, prebuilds, prebuildName(version));
  run('npm', ['install', '--no-audit', '--no-fund', ...args], app, { timeout: 1_200_000, env: { ...env, npm_config_better_sqlite3_local_prebuilds: prebuilds } });
}

/** The file name prebuild-install looks for: better-sqlite3 `version` for a Node ABI (`process.versions.modules`). */
export function prebuildName(version, abi = process.versions.modules) {
  return `better-sqlite3-v${version}-node-v${abi}-${process.platform}-${process.arch}.tar.gz`;
}

/** The workspace's better-sqlite3 (the lockfile's version, which the checks install too): its folder and version. */
export function workspaceBetterSqlite() {
  const require = createRequire(join(root, 'packages/adapter-sqlite/package.json'));
  const manifest = require.resolve('better-sqlite3/package.json');
  return { dir: dirname(manifest), version: JSON.parse(readFileSync(manifest, 'utf8')).version };
}

/** Packs the build of the better-sqlite3 installed at `packageDir` as the prebuild `name` in the folder `into`. */
export function packPrebuild(packageDir, into, name) {
  mkdirSync(into, { recursive: true });
  run('tar', ['-czf', join(into, name), '-C', packageDir, 'build/Release/better_sqlite3.node'], root);
}

/**
 * Points the dependencies of the project `app` (the example, a check's own) that a tarball provides (every
 * @statusq/* one must) at the tarballs, adds the @statusq/* packages those depend on (not on the registry yet) as direct dependencies, so that npm never
 * looks them up there, and installs it (npmInstall, with `env`).
 */
export function installFromTarballs(app, tarballs, env = process.env) {
  const path = join(app, 'package.json');
  const manifest = JSON.parse(readFileSync(path, 'utf8'));
  const wanted = [];
  for (const field of ['dependencies', 'devDependencies']) {
    for (const name of Object.keys(manifest[field] ?? {})) if (name.startsWith('@statusq/') || tarballs.has(name)) wanted.push([field, name]);
  }
  const seen = new Set();
  while (wanted.length > 0) {
    const [field, name] = wanted.pop();
    if (seen.has(name)) continue;
    seen.add(name);
    const tarball = tarballs.get(name);
    if (!tarball) throw new Error(`${app} needs ${name}, which no public package provides`);
    manifest[field] ??= {};
    delete manifest[field === 'dependencies' ? 'devDependencies' : 'dependencies']?.[name];
    manifest[field][name] = `file:${tarball}`;
    for (const dependency of Object.keys(tarballManifest(tarball).dependencies ?? {})) {
      if (dependency.startsWith('@statusq/') && !seen.has(dependency)) wanted.push([field, dependency]);
    }
  }
  writeFileSync(path, `${JSON.stringify(manifest, null, 2)}\n`);
  npmInstall(app, [], env);
}
