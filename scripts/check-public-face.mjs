// Every public entry of every published package (its exports map's entries with types): the names it exports,
// counted from its built .d.ts, within the budget below, and written as explicit lists (no `export *` in the
// entry's source, so the face is read in one file and nothing joins it by accident). Run after the build; exits 1
// naming each entry over its budget, each `export *`, and each public entry without a budget.
import ts from 'typescript';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { PUBLIC, root } from './packs.mjs';

/**
 * Names per entry (values and types together). A budget is raised only on purpose, in the change that needs
 * it; CONTRIBUTING.md ("Public faces") says why each is what it is.
 */
const BUDGETS = {
  '@statusq/core': 64,
  '@statusq/core/adapter': 183,
  '@statusq/core/tools': 74,
  '@statusq/conformance': 48,
  '@statusq/schema': 4,
  '@statusq/adapter-sqlite': 8,
  '@statusq/adapter-sqlite/testing': 3,
  '@statusq/adapter-postgres': 10,
  '@statusq/adapter-postgres/testing': 19,
  '@statusq/adapter-mysql': 20,
  '@statusq/adapter-mysql/testing': 9,
  '@statusq/broker-nats': 9,
  '@statusq/broker-nats/testing': 9,
  '@statusq/broker-rabbitmq': 3,
  '@statusq/broker-rabbitmq/testing': 8,
  '@statusq/test-fixtures': 18,
  statusq: 3,
};

function exportedNames(dts) {
  const program = ts.createProgram([dts], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, skipLibCheck: true, noEmit: true });
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(dts));
  return module ? checker.getExportsOfModule(module).map((symbol) => symbol.name) : [];
}

const problems = [];
const seen = new Set();
for (const dir of PUBLIC) {
  const pkg = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
  for (const [subpath, target] of Object.entries(pkg.exports ?? {})) {
    if (typeof target !== 'object' || target === null || typeof target.types !== 'string') continue;
    const entry = pkg.name + subpath.slice(1);
    seen.add(entry);
    const dts = join(root, dir, target.types);
    if (!existsSync(dts)) {
      problems.push(`${entry}: ${target.types} is not built (run the build first)`);
      continue;
    }
    const source = join(root, dir, target.types.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$/, '.ts'));
    if (existsSync(source) && /^export \*/m.test(readFileSync(source, 'utf8'))) problems.push(`${entry}: ${source.slice(root.length)} has an export *; list the names`);
    const count = exportedNames(dts).length;
    const budget = BUDGETS[entry];
    if (budget === undefined) problems.push(`${entry}: ${count} names and no budget (add one to scripts/check-public-face.mjs and CONTRIBUTING.md)`);
    else if (count > budget) problems.push(`${entry}: ${count} names, over its budget of ${budget}`);
    else console.log(`${entry}: ${count} of ${budget}`);
  }
}
for (const entry of Object.keys(BUDGETS)) if (!seen.has(entry)) problems.push(`${entry}: a budget for an entry no package exports (remove it)`);
// The apps of this repository (the CLI, its dashboard, the bench, the demo) and the examples reach core through
// `@statusq/core` and `@statusq/core/tools`, never the adapter author's entry with its SQL builders: what they
// need from the inside gets a purpose-made function in tools (claimPlanStatements for the doctor).
for (const file of execFileSync('git', ['ls-files', 'apps', 'examples'], { cwd: root, encoding: 'utf8' }).split('\n')) {
  if (!/\.(ts|tsx|mjs|js)$/.test(file)) continue;
  if (/from '@statusq\/core\/adapter'/.test(readFileSync(join(root, file), 'utf8'))) problems.push(`${file}: imports @statusq/core/adapter; an app takes what it needs from @statusq/core/tools`);
}
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
