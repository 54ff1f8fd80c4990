/**
 * The import rules CI holds the repository to (`pnpm check:imports`, dependency-cruiser): no import loop anywhere,
 * type-only imports included, and core's rooms importing only downward. CONTRIBUTING.md ("Core's rooms") says
 * what each room holds and why the order is what it is.
 */
const CORE = '^packages/core/src/';

/** Core's rooms from the bottom up; a room may import itself and the rooms before it, nothing after. */
const ROOMS = ['protocol', ['store', 'broker'], 'sql', ['queue', 'limits'], 'worker', 'features'];

function roomRules() {
  const rules = [];
  const below = [];
  for (const level of ROOMS) {
    const rooms = Array.isArray(level) ? level : [level];
    for (const room of rooms) {
      const allowed = [...below, room];
      rules.push({
        name: `core-${room}-imports-downward`,
        comment: `core's ${room}/ may import ${allowed.join(', ')}: nothing above it (CONTRIBUTING.md, "Core's rooms")`,
        severity: 'error',
        from: { path: `${CORE}${room}/`, pathNot: '\\.test\\.ts$' },
        to: { path: CORE, pathNot: [`${CORE}(${allowed.join('|')})/`, `${CORE}test/`] },
      });
    }
    below.push(...rooms);
  }
  return rules;
}

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'an import loop (type-only imports count): split the shared part out, or pass it in',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-rooms-never-import-the-entries',
      comment: "index.ts, adapter.ts, tools.ts and connect.ts are core's doors: nothing inside imports them back",
      severity: 'error',
      from: { path: `${CORE}[a-z-]+/` },
      to: { path: `${CORE}(index|adapter|tools|connect)\\.ts$` },
    },
    ...roomRules(),
    {
      name: 'packages-never-import-apps',
      comment: 'the published packages are below the apps of this repository',
      severity: 'error',
      from: { path: '^packages/' },
      to: { path: '^apps/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.base.json' },
  },
};
