// Dialect knowledge lives in the adapters (issue 42): outside packages/adapter-*, no source file names a database,
// so core, the CLI, the conformance kit, the brokers and the test harness speak of what a store can do (its
// capabilities, its describe) and an adapter says the rest. Exits 1 naming each line that does.
//
// Where a name is the point, it stays, and is listed here: the URL-scheme map that picks an adapter for a URL
// (core's connect.ts, the CLI's --db help line), per-dialect runs (test files, the bench, which measures each
// database), and applications that chose their database (the demo runs on embedded SQLite; the example app is
// SQLite in development and MariaDB in production). Scripts that start the servers and the docs are not source.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { root } from './packs.mjs';

const DIALECT = /postgres|mysql|mariadb|sqlite/i;
/** Files where a database's name is the point (see above). */
const WHOLE_FILES = [/^packages\/adapter-/, /^apps\/bench\//, /^apps\/demo\//, /^examples\//, /^scripts\//, /^docs\//, /\.test\.tsx?$/, /\/test\//];
/** Single lines that are the URL-scheme map. */
const SCHEME_MAP = [
  { file: 'packages/core/src/connect.ts', line: /^\s*(sqlite|postgres|postgresql|mysql|mariadb): '@statusq\/adapter-(sqlite|postgres|mysql)',$|use sqlite:PATH, postgres:\/\/user@host:port\/db or mysql:\/\/user:pass@host:port\/db|^ \* Opens `url` with the adapter its scheme names \(`sqlite:PATH`, `postgres:\/\/`, `mysql:\/\/`, `mariadb:\/\/`,/ },
  { file: 'apps/cli/src/help.ts', line: /--db URL\s+sqlite:PATH, postgres:\/\/user:pass@host:port\/db or mysql:\/\/user:pass@host:port\/db/ },
  // The usage's URL table: each scheme, the adapter package it loads, and the URL parameters of that scheme.
  { file: 'apps/cli/src/main.ts', line: /sqlite:PATH|postgres:\/\/|mysql:\/\/|mariadb:\/\// },
];

const files = execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((file) => /\.(ts|tsx|mjs|cjs|js)$/.test(file) && !WHOLE_FILES.some((pattern) => pattern.test(file)));
const problems = [];
for (const file of files) {
  readFileSync(`${root}/${file}`, 'utf8')
    .split('\n')
    .forEach((text, index) => {
      if (!DIALECT.test(text)) return;
      // Package names are the adapters' own (an import or a dependency of the scheme map), not dialect knowledge.
      if (!DIALECT.test(text.replace(/@statusq\/adapter-(sqlite|postgres|mysql)/g, ''))) return;
      if (SCHEME_MAP.some((allowed) => allowed.file === file && allowed.line.test(text))) return;
      problems.push(`${file}:${index + 1}: ${text.trim().slice(0, 160)}`);
    });
}
if (problems.length > 0) {
  console.error(`${problems.length} lines outside the adapters name a database; say what the store can do instead (or move it into the adapter):\n${problems.join('\n')}`);
  process.exit(1);
}
console.log(`no source file outside the adapters names a database (${files.length} files read)`);
