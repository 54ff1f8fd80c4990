// The site's generated pages, made fresh before each `docs:dev` and `docs:build` (never committed):
// - api/: TypeDoc's reference of @statusq/core (what an application uses) and @statusq/core/adapter (what an
//   adapter author uses), from the doc comments of the public entries: the comments are the one source.
// - reference/cli.md: every command's `--help`, as the built CLI prints it: the help is the one source of the
//   flags, and scripts/check-docs.mjs holds every page to it.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Application } from 'typedoc';

const DOCS = join(dirname(fileURLToPath(import.meta.url)), '..');
const ROOT = join(DOCS, '..');
const CLI = join(ROOT, 'apps', 'cli', 'dist', 'bin.js');

/** The entries of the API reference: each a folder of docs/api with its own sidebar group. */
export const API_ENTRIES = [
  { name: '@statusq/core', folder: 'core', entry: 'packages/core/src/index.ts' },
  { name: '@statusq/core/adapter', folder: 'adapter', entry: 'packages/core/src/adapter.ts' },
];

async function generateApi() {
  rmSync(join(DOCS, 'api'), { recursive: true, force: true });
  for (const { name, folder, entry } of API_ENTRIES) {
    const app = await Application.bootstrapWithPlugins({
      name,
      entryPoints: [join(ROOT, entry)],
      tsconfig: join(ROOT, 'packages', 'core', 'tsconfig.json'),
      plugin: ['typedoc-plugin-markdown', 'typedoc-vitepress-theme'],
      out: join(DOCS, 'api', folder),
      docsRoot: DOCS,
      readme: 'none',
      excludePrivate: true,
      excludeInternal: true,
      hideGenerator: true,
      // Source links without asking git for a remote (a clean clone's may be a local path).
      disableGit: true,
      sourceLinkTemplate: 'https://github.com/statusq/statusq/blob/main/{path}#L{line}',
      gitRevision: 'main',
      displayBasePath: ROOT,
      hidePageHeader: true,
      // Doc comments say `STATUSQ_<CODE>` and `a < b` in prose: escaped, or Vue would read them as tags.
      sanitizeComments: true,
      entryFileName: 'index',
      sidebar: { autoConfiguration: true, format: 'vitepress', pretty: true, collapsed: true },
      // A broken {@link} or a public type that names one not exported is an error, not a silent gap.
      treatValidationWarningsAsErrors: false,
      validation: { notExported: false, invalidLink: true, notDocumented: false },
      logLevel: 'Warn',
    });
    const project = await app.convert();
    if (!project) throw new Error(`TypeDoc could not convert ${entry}`);
    await app.generateOutputs(project);
    if (app.logger.hasErrors()) throw new Error(`TypeDoc reported errors for ${entry}`);
  }
}

function help(args) {
  return execFileSync(process.execPath, [CLI, ...args, '--help'], { encoding: 'utf8' });
}

/** The command names, as the top-level help lists them: a line of two spaces, the name, then its flags. */
export function commandsOf(topHelp) {
  return [...topHelp.matchAll(/^ {2}([a-z]+) +--/gm)].map((m) => m[1]);
}

function generateCliReference() {
  const top = help([]);
  const commands = commandsOf(top);
  if (commands.length < 5) throw new Error(`found only ${commands.length} commands in statusq --help: ${top.slice(0, 400)}`);
  const fence = (text) => ['```text', text.trimEnd(), '```'].join('\n');
  const page = [
    '# CLI reference',
    '',
    'Generated from the CLI\'s own help (`statusq <command> --help`) when the site is built: this page and',
    '`statusq --help` are one text. The guides explain when to use each flag: start at [the `statusq` command](../guide/commands.md).',
    '',
    '## statusq',
    '',
    fence(top),
    '',
    ...commands.flatMap((command) => [`## statusq ${command}`, '', fence(help([command])), '']),
  ].join('\n');
  mkdirSync(join(DOCS, 'reference'), { recursive: true });
  writeFileSync(join(DOCS, 'reference', 'cli.md'), page);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  generateCliReference();
  await generateApi();
}
