// The documentation as a reader meets it, checked: `pnpm docs:check [--packs DIR] [--only STEPS]` (after the build).
// 1. Builds the site (generate.mjs, then VitePress, which fails on a dead internal link).
// 2. Every internal link of the built pages, anchors included, lands on a page and an id that exist.
// 3. Every flag a guide names for a `statusq` command is in that command's --help, and every flag the help
//    lists is named by some guide (the generated CLI reference does not count: it is the help itself).
// 4. Every ```ts block of the guides and the README compiles (strict) against the packed packages installed
//    with npm outside the workspace, as a user's code would.
// 5. Every ```sh runnable block runs, in page order, in that project (its `statusq` is the packed CLI) on SQLite.
// 6. Full-page Chromium screenshots of three pages (home, a guide, an API page) go to artifacts/.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { installFromTarballs, packedTarballs } from '../../scripts/packs.mjs';
import { commandsOf } from './generate.mjs';

const DOCS = join(dirname(fileURLToPath(import.meta.url)), '..');
const ROOT = join(DOCS, '..');
const DIST = join(DOCS, '.vitepress', 'dist');
const CLI = join(ROOT, 'apps', 'cli', 'dist', 'bin.js');
const CHROMIUM = process.env.STATUSQ_CHROMIUM ?? '/usr/bin/chromium';
/** Pages written by generate.mjs: not guides (their flags and code are the sources themselves). */
const GENERATED = [/^api\//, /^reference\/cli\.md$/];

const failures = [];
const fail = (message) => failures.push(message);
const began = performance.now();
const step = (name) => console.info(`docs: ${name} (${((performance.now() - began) / 1000).toFixed(1)} s)`);

/** The guides' Markdown files (relative to docs/), the README as `../README.md`. */
function guidePages() {
  const pages = [];
  const walk = (dir) => {
    for (const name of readdirSync(join(DOCS, dir))) {
      const path = posix.join(dir, name);
      if (name === 'node_modules' || name.startsWith('.') || name === 'scripts') continue;
      if (statSync(join(DOCS, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md') && !GENERATED.some((re) => re.test(path))) pages.push(path);
    }
  };
  walk('');
  return [...pages.sort(), '../README.md'];
}

/** Fenced blocks of a Markdown text: their info string and body, in order. */
function fencedBlocks(text) {
  return [...text.matchAll(/^(`{3,})([^\n`]*)\n([\s\S]*?)^\1\s*$/gm)].map((m) => ({ info: m[2].trim(), body: m[3] }));
}

function build() {
  step('building the site');
  execFileSync(process.execPath, [join(DOCS, 'scripts', 'generate.mjs')], { stdio: 'inherit' });
  execFileSync(join(DOCS, 'node_modules', '.bin', 'vitepress'), ['build', DOCS], { stdio: 'inherit' });
}

/** The built HTML files, by their URL path (`/guide/handlers`, `/api/core/`). */
function builtPages() {
  const pages = new Map();
  const walk = (dir) => {
    for (const name of readdirSync(join(DIST, dir))) {
      const path = posix.join(dir, name);
      if (statSync(join(DIST, path)).isDirectory()) walk(path);
      else if (name.endsWith('.html')) {
        const url = `/${path.replace(/index\.html$/, '').replace(/\.html$/, '')}`;
        pages.set(url, readFileSync(join(DIST, path), 'utf8'));
      }
    }
  };
  walk('');
  return pages;
}

function checkLinks() {
  step('checking internal links and anchors');
  const pages = builtPages();
  const ids = new Map([...pages].map(([url, html]) => [url, new Set([...html.matchAll(/\sid="([^"]+)"/g)].map((m) => decodeHtml(m[1])))]));
  let links = 0;
  for (const [url, html] of pages) {
    // Only the page's own content: the theme's navigation is the config's, checked by the build.
    const main = /<main[\s\S]*<\/main>/.exec(html)?.[0] ?? '';
    for (const [, raw] of main.matchAll(/<a [^>]*href="([^"]+)"/g)) {
      const href = decodeHtml(raw);
      if (/^[a-z]+:/i.test(href) || href.startsWith('//')) continue;
      links++;
      const [path, anchor] = href.split('#');
      const target = path === '' ? url : posix.normalize(path.startsWith('/') ? path : posix.join(url.endsWith('/') ? url : posix.dirname(url), path)).replace(/\.html$/, '');
      if (target.startsWith('/assets/') || /\.[a-z0-9]+$/i.test(target)) {
        if (!existsSync(join(DIST, target))) fail(`${url}: ${href} is not a file of the site`);
        continue;
      }
      const page = ids.has(target) ? target : ids.has(`${target}/`) ? `${target}/` : null;
      if (page === null) fail(`${url}: ${href} is no page`);
      else if (anchor && !ids.get(page).has(decodeURIComponent(anchor))) fail(`${url}: ${href}: ${page} has no anchor #${anchor}`);
    }
  }
  console.info(`docs: ${links} internal links on ${pages.size} pages`);
  checkReadmeLinks(ids);
}

/** The README's relative links (GitHub renders it; the site does not): a file that exists, a docs page's anchor that exists. */
function checkReadmeLinks(ids) {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  for (const [, href] of readme.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/i.test(href)) continue;
    const [path, anchor] = href.split('#');
    if (path && !existsSync(join(ROOT, path))) {
      fail(`README.md: ${href}: no file ${path}`);
      continue;
    }
    if (!anchor) continue;
    if (!path.startsWith('docs/') || !path.endsWith('.md')) {
      fail(`README.md: ${href}: an anchor into a file the site does not build cannot be checked; link the page`);
      continue;
    }
    const url = `/${path.slice('docs/'.length, -'.md'.length)}`.replace(/\/index$/, '/');
    if (!ids.get(url)?.has(decodeURIComponent(anchor))) fail(`README.md: ${href}: ${url} has no anchor #${anchor}`);
  }
}

function decodeHtml(text) {
  return text.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>');
}

function helpOf(args) {
  return execFileSync(process.execPath, [CLI, ...args, '--help'], { encoding: 'utf8' });
}

const FLAG = /(?<![\w-])--[a-z][a-z0-9-]*/g;

function checkFlags() {
  step('checking the CLI flags the guides name');
  const top = helpOf([]);
  const commands = commandsOf(top);
  const flagsOf = new Map(commands.map((command) => [command, new Set(helpOf([command]).match(FLAG))]));
  const anyCommand = new Set([...flagsOf.values()].flatMap((flags) => [...flags]).concat(top.match(FLAG) ?? []));
  const named = new Set();
  for (const page of guidePages()) {
    const text = readFileSync(join(DOCS, page), 'utf8');
    for (const flag of text.match(FLAG) ?? []) named.add(flag);
    // A statusq command line (in a code block or an inline span): its flags must be that command's.
    const lines = [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]).concat(fencedBlocks(text).filter((b) => /^(sh|bash|shell|console)\b/.test(b.info)).flatMap((b) => b.body.split('\n')));
    for (const line of lines) {
      for (const m of line.matchAll(/(?:^|\s|\$ )(?:npx (?:-y )?)?statusq ([a-z]+)((?: [^|;&]*)?)/g)) {
        const [, command, rest] = m;
        const flags = flagsOf.get(command);
        if (!flags) {
          if (!['--help', '--version'].includes(command)) fail(`${page}: "statusq ${command}" is no command (statusq --help lists ${commands.join(', ')})`);
          continue;
        }
        for (const flag of rest.match(FLAG) ?? []) if (!flags.has(flag) && flag !== '--help') fail(`${page}: \`statusq ${command}\` takes no ${flag} (statusq ${command} --help)`);
      }
    }
    // A lone flag in an inline span (`--rate`) must be some command's.
    for (const [, span] of text.matchAll(/`(--[a-z][a-z0-9-]*)(?:[ =][^`]*)?`/g)) {
      if (!anyCommand.has(span) && !FOREIGN_FLAGS.has(span)) fail(`${page}: \`${span}\` is no flag of statusq (and not listed as another tool's in docs/scripts/check.mjs)`);
    }
  }
  for (const flag of [...anyCommand].sort()) if (!named.has(flag)) fail(`no guide names the CLI's flag ${flag} (statusq --help lists it)`);
}

/**
 * Flags of other tools the guides show in inline code, each with its tool: a span holding one of these is not
 * a statusq flag. Anything else that looks like a flag must be statusq's.
 */
const FOREIGN_FLAGS = new Map([
  ['--frozen-lockfile', 'pnpm install'],
  ['--filter', 'pnpm'],
  ['--quick', 'pnpm bench and pnpm scale'],
  ['--render', 'pnpm bench'],
  ['--sysdate-is-now', 'mariadbd'],
  ['--strategy', "statusq work's former spelling of --claim-strategy, named where the guide says it is refused"],
]);

/** A project outside the workspace with the packed packages, their drivers and TypeScript, installed by npm. */
function userProject(work) {
  step('installing the packed packages with npm');
  const tarballs = packedTarballs(work);
  const app = join(work, 'app');
  mkdirSync(app);
  const statusq = Object.fromEntries([...tarballs.keys()].map((name) => [name, '*']));
  const workspace = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).devDependencies;
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({
      name: 'docs-blocks',
      private: true,
      type: 'module',
      dependencies: { ...statusq, pg: '^8', mysql2: '^3', 'better-sqlite3': '^12', amqplib: '^2', '@nats-io/transport-node': '^3', '@nats-io/jetstream': '^3' },
      devDependencies: { typescript: workspace.typescript, '@types/node': workspace['@types/node'] },
    }),
  );
  installFromTarballs(app, tarballs);
  return app;
}

function checkTypeScript(app) {
  step('compiling the guides\' TypeScript blocks');
  const dir = join(app, 'blocks');
  mkdirSync(dir);
  const origins = new Map();
  const coreNames = publicNames(join(app, 'node_modules', '@statusq', 'core', 'dist', 'index.d.ts'));
  for (const page of guidePages()) {
    const blocks = fencedBlocks(readFileSync(join(DOCS, page), 'utf8')).filter((b) => /^(ts|typescript)\b/.test(b.info));
    blocks.forEach((block, n) => {
      const file = `${page.replace(/^\.\.\//, '').replace(/[/.]/g, '_')}_${n + 1}.ts`;
      origins.set(file, `${page} block ${n + 1}`);
      // `export {}` makes every block a module of its own: top-level await, and no name shared between blocks.
      writeFileSync(join(dir, file), `${snippetContext(block.body, coreNames)}${block.body}\nexport {};\n`);
    });
  }
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: true, types: ['node'], verbatimModuleSyntax: true }, include: ['blocks'] }),
  );
  try {
    execFileSync(join(app, 'node_modules', '.bin', 'tsc'), ['-p', app], { cwd: app, encoding: 'utf8' });
  } catch (error) {
    const output = `${error.stdout ?? ''}${error.stderr ?? ''}`;
    for (const line of output.split('\n').filter((l) => /error TS/.test(l))) {
      const file = /^blocks\/([^(]+)\(/.exec(line)?.[1];
      fail(`${origins.get(file) ?? file}: ${line.replace(/^blocks\/[^(]+/, '')}`);
    }
    if (!/error TS/.test(output)) fail(`tsc failed: ${output.slice(0, 2000)}`);
  }
  console.info(`docs: ${origins.size} TypeScript blocks`);
}

/** The names an entry's declaration file exports (its explicit `export { ... }` lists), each with whether it is a type only. */
function publicNames(declarations) {
  const names = new Map();
  for (const [, typeList, list] of readFileSync(declarations, 'utf8').matchAll(/export (type )?\{([^}]*)\}/g)) {
    for (const item of list.split(',')) {
      const typeOnly = Boolean(typeList) || /^\s*type\s/.test(item);
      const name = item.trim().replace(/^type\s+/, '').split(/\s+as\s+/).pop()?.trim();
      if (name) names.set(name, typeOnly);
    }
  }
  return names;
}

/**
 * A block with no import line is a snippet, read in the guides' standing context: `store`, `queue` and `worker`
 * are an application's open Store, Queue (of `jobs`) and Worker, and the @statusq/core names it uses are
 * imported. What it declares itself it keeps. A block with imports is a whole module and gets nothing.
 */
function snippetContext(body, coreNames) {
  if (/^\s*import\s/m.test(body)) return '';
  const declares = (name) => new RegExp(`\\b(?:const|let|var|function|class)\\s+${name}\\b|\\{[^}]*\\b${name}\\b[^}]*\\}\\s*=`).test(body);
  const context = [
    ['store', 'Store'],
    ['queue', 'Queue'],
    ['worker', 'Worker'],
  ].filter(([name]) => new RegExp(`\\b${name}\\b`).test(body) && !declares(name));
  const used = new Set([...coreNames.keys()].filter((name) => new RegExp(`\\b${name}\\b`).test(body)));
  for (const [, type] of context) used.add(type);
  const spelled = [...used].sort().map((name) => (coreNames.get(name) || (!new RegExp(`\\b${name}\\b`).test(body) && context.some(([, t]) => t === name)) ? `type ${name}` : name));
  const lines = used.size > 0 ? [`import { ${spelled.join(', ')} } from '@statusq/core';`] : [];
  for (const [name, type] of context) lines.push(`declare const ${name}: ${type};`);
  return lines.length > 0 ? `${lines.join(' ')}\n` : '';
}

function checkRunnableShell(app) {
  step('running the runnable shell blocks');
  let count = 0;
  for (const page of guidePages()) {
    const blocks = fencedBlocks(readFileSync(join(DOCS, page), 'utf8')).filter((b) => /^(sh|bash)\s+runnable\b/.test(b.info));
    if (blocks.length === 0) continue;
    // A page's blocks share one directory, in order: a later block uses what an earlier one made.
    const cwd = mkdtempSync(join(app, 'run-'));
    for (const [n, block] of blocks.entries()) {
      count++;
      try {
        execFileSync('bash', ['-euo', 'pipefail', '-c', block.body], {
          cwd,
          encoding: 'utf8',
          timeout: 120_000,
          env: { ...process.env, PATH: `${join(app, 'node_modules', '.bin')}:${process.env.PATH}`, STATUSQ_DATABASE_URL: undefined, DATABASE_URL: undefined },
        });
      } catch (error) {
        fail(`${page} runnable block ${n + 1} failed (${error.status ?? error.signal}): ${`${error.stdout ?? ''}${error.stderr ?? ''}`.trim().slice(-1500)}`);
      }
    }
  }
  console.info(`docs: ${count} runnable shell blocks`);
}

async function screenshots() {
  step('screenshots');
  if (!existsSync(CHROMIUM)) return fail(`${CHROMIUM} is missing (apt-get install -y chromium, or set STATUSQ_CHROMIUM)`);
  const port = 4370 + (process.pid % 500);
  const preview = spawn(join(DOCS, 'node_modules', '.bin', 'vitepress'), ['preview', DOCS, '--port', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const out = join(ROOT, 'artifacts');
  mkdirSync(out, { recursive: true });
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    await waitForServer(`http://127.0.0.1:${port}/`);
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    for (const [name, path] of [['home', '/'], ['guide', '/guide/getting-started'], ['api', '/api/core/classes/Worker']]) {
      const response = await page.goto(`http://127.0.0.1:${port}${path}`, { waitUntil: 'networkidle' });
      if (!response?.ok()) fail(`${path} answered ${response?.status()}`);
      const file = join(out, `docs-${name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      console.info(`screenshot: ${file}`);
    }
  } finally {
    await browser.close();
    preview.kill();
  }
}

async function waitForServer(url) {
  for (let tries = 0; tries < 100; tries++) {
    try {
      // Any answer means it listens; each page's own status is judged when it is shot.
      await fetch(url);
      return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`vitepress preview did not answer at ${url} within 10 s`);
}

// `--only build,links,flags,code,screenshots` runs those steps alone (links, flags and screenshots read the last build).
const STEPS = ['build', 'links', 'flags', 'code', 'screenshots'];
const onlyAt = process.argv.indexOf('--only');
const only = onlyAt === -1 ? STEPS : process.argv[onlyAt + 1].split(',');
for (const name of only) if (!STEPS.includes(name)) throw new Error(`--only takes ${STEPS.join(', ')}; not ${name}`);
if (only.includes('build')) build();
if (only.includes('links')) checkLinks();
if (only.includes('flags')) checkFlags();
if (only.includes('code')) {
  const work = mkdtempSync(join(tmpdir(), 'statusq-docs-'));
  try {
    const app = userProject(work);
    checkTypeScript(app);
    checkRunnableShell(app);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
if (only.includes('screenshots')) await screenshots();

step(failures.length === 0 ? 'passed' : `${failures.length} problem(s)`);
for (const failure of failures) console.error(`  ${failure}`);
process.exit(failures.length === 0 ? 0 : 1);
