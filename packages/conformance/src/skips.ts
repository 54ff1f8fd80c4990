import type { TestContext } from 'vitest';

/**
 * Why each `[needs X]` case skips when X is missing, said once so the per-case skip note and the suite's
 * closing summary cannot disagree.
 */
const WHY = {
  batchClaim: 'the store does not declare capabilities.batchClaim (one call claims a whole batch)',
  skipLocked: 'the store does not declare capabilities.skipLocked (native claims pass over rows others hold)',
  listenNotify: 'the store declares neither capabilities.listenNotify nor idleProbe with waitForWork (the database wakes workers, or the store probes for them)',
  writeLock: 'no writeLock option: the database has no single-writer lock another process can hold',
  queryPlans: 'no queryPlans option: no EXPLAIN reader was given',
  disposableServer: 'no disposableServer option: no private server the suite may restart',
  throughProxy: 'no throughProxy option: no TCP route to freeze (an embedded database has no network)',
  callerConnections: "no callerConnections option: no way to open the driver's own connection for the outbox cases",
  knex: 'no knexConfig option: no knex client for the outbox cases',
  readOnlySwitch: 'no readOnlySwitch option: no server this suite may turn read-only and writable again',
} as const;

export type Need = keyof typeof WHY;

export interface SkippedCase {
  suite: string;
  test: string;
  need: string;
  why: string;
}

/** Every case skipped in this process, for the summary runConformance prints after its suite. */
export const skippedCases: SkippedCase[] = [];

/** Skips the running `[needs <need>]` case, saying why in its note and in the suite's summary. */
export function skipFor(ctx: TestContext, need: Need): never {
  const why = WHY[need];
  let suite = ctx.task.suite;
  while (suite?.suite) suite = suite.suite;
  skippedCases.push({ suite: suite?.name ?? '', test: ctx.task.name, need, why });
  return ctx.skip(`[needs ${need}] ${why}`);
}

/** One line per missing capability: how many cases it skipped and why. Empty when nothing was skipped. */
export function skipSummary(suite: string): string[] {
  const byNeed = new Map<string, { count: number; why: string }>();
  for (const skipped of skippedCases) {
    if (skipped.suite !== suite) continue;
    const entry = byNeed.get(skipped.need) ?? { count: 0, why: skipped.why };
    entry.count += 1;
    byNeed.set(skipped.need, entry);
  }
  return [...byNeed].map(([need, { count, why }]) => `[needs ${need}] ${count} case${count === 1 ? '' : 's'} skipped: ${why}`);
}
