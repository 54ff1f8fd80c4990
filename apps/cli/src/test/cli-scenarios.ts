// The CLI scenarios every dialect must pass, written once: each dialect's test file hands over a way to
// make a fresh database and run SQL in it, as the conformance suite takes a store factory.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'vitest';
import { awaitScenarios } from './cli-await-scenarios.js';
import { configScenarios } from './cli-config-scenarios.js';
import { dashboardScenarios } from './cli-dashboard-scenarios.js';
import { doctorScenarios } from './cli-doctor-scenarios.js';
import { enqueueScenarios } from './cli-enqueue-scenarios.js';
import { inspectScenarios } from './cli-inspect-scenarios.js';
import { kindScenarios } from './cli-kind-scenarios.js';
import { groupScenarios } from './cli-group-scenarios.js';
import { lifecycleScenarios } from './cli-lifecycle-scenarios.js';
import { logScenarios } from './cli-log-scenarios.js';
import { metricsScenarios } from './cli-metrics-scenarios.js';
import { progressScenarios } from './cli-progress-scenarios.js';
import { secretsScenarios } from './cli-secrets-scenarios.js';
import { tableScenarios } from './cli-table-scenarios.js';
import { workScenarios } from './cli-work-scenarios.js';
import { parseStats, runCliAsync, runCliInProcess, writeFixture } from './cli-harness.js';
import type { CliContext, CliTarget } from './cli-target.js';

export type { CliContext, CliTarget, CliTestDatabase } from './cli-target.js';

/** The groups of shared scenarios, each registered by the function of its name. */
export const CLI_SCENARIO_GROUPS = ['commands', 'lifecycle', 'logs', 'metrics', 'doctor', 'inspect', 'progress', 'dashboard'] as const;
export type CliScenarioGroup = (typeof CLI_SCENARIO_GROUPS)[number];

/**
 * Registers the shared scenarios of `groups` under `title`, plus `extra(ctx)` for what only this dialect
 * shows. A dialect's scenarios are spread over a few test files (a group or more each) so that they run side
 * by side. An unavailable database skips them with `[needs <capability>]` or, with
 * STATUSQ_REQUIRE_DATABASES=1, fails.
 */
export function cliScenarios(title: string, target: CliTarget, groups: readonly CliScenarioGroup[], extra: (ctx: () => CliContext) => void = () => undefined): void {
  if (target.unavailable !== null) {
    if (process.env.STATUSQ_REQUIRE_DATABASES === '1') {
      it(`${title}: the database is reachable (STATUSQ_REQUIRE_DATABASES=1)`, () => {
        throw new Error(target.unavailable!);
      });
    } else {
      it.skip(`[needs ${target.capability}] ${title}: ${target.unavailable}`, () => undefined);
    }
    return;
  }
  let current: CliContext | null = null;
  const ctx = (): CliContext => {
    if (!current) throw new Error('no CLI test context outside a test');
    return current;
  };

  describe(title, () => {
    beforeEach(async () => {
      const dir = mkdtempSync(join(tmpdir(), `statusq-cli-${target.dialect}-`));
      const db = await target.create(dir);
      const statusq = (...args: string[]) => runCliInProcess(dir, args);
      current = {
        dir,
        db,
        statusq,
        statusqProcess: (...args) => runCliAsync(dir, args),
        statusqWith: (env, ...args) => runCliAsync(dir, args, undefined, env),
        stats: async (table = 'jobs') => parseStats(await statusq('stats', '--db', db.url, '--table', table, '--json')),
        file: (name, text) => writeFixture(dir, name, text),
      };
    });
    afterEach(async () => {
      const test = current;
      current = null;
      if (!test) return;
      await test.db.dispose();
      rmSync(test.dir, { recursive: true, force: true });
    });

    const register: Record<CliScenarioGroup, () => void> = {
      commands: () => commandScenarios(ctx, target),
      lifecycle: () => lifecycleScenarios(ctx, target),
      logs: () => logScenarios(ctx, target),
      metrics: () => metricsScenarios(ctx),
      doctor: () => doctorScenarios(ctx, target),
      inspect: () => inspectScenarios(ctx, target),
      progress: () => progressScenarios(ctx),
      dashboard: () => dashboardScenarios(ctx, target),
    };
    for (const group of groups) register[group]();

    extra(ctx);
  });
}

/** The commands themselves: init, enqueue, work, stats, migrate, requeue and the rest, and their bad input. */
function commandScenarios(ctx: () => CliContext, target: CliTarget): void {
  tableScenarios(ctx, target);
  enqueueScenarios(ctx, target);
  awaitScenarios(ctx);
  kindScenarios(ctx, target);
  groupScenarios(ctx);
  workScenarios(ctx, target);
  configScenarios(ctx);
  secretsScenarios(ctx);
}
