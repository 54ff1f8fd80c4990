/**
 * The statusq adapter conformance suite. An adapter's test file calls `runConformance` once, with its
 * own fixture tables (see FixtureTables) from its `./testing` entry:
 *
 *   import { myDbFixtures, myDbQueryPlans } from './testing.js';
 *   runConformance({
 *     name: 'mydb',
 *     adapterModule: fileURLToPath(new URL('../dist/index.js', import.meta.url)),
 *     url: () => createTestDatabase(),
 *     dropDatabase: (url) => dropTestDatabase(url),
 *     fixtures: myDbFixtures,
 *     queryPlans: myDbQueryPlans,
 *   });
 *
 * It registers vitest describe/it blocks that run real workers against a fresh database per test: the
 * state machine's guarded UPDATEs, fencing, races of many workers on separate connections, several OS
 * processes (one killed with SIGKILL), poison, abuse, order and aging, retries and backoff, delayed jobs, priorities, leases and
 * heartbeats, bad configuration, graceful stop, the schema helpers, the adapter's declared capabilities,
 * and (on a private server the adapter starts, see `disposableServer`) a server restart and dropped
 * connections in the middle of a supervised run. Tests that need a capability say so in their title
 * (`[needs skipLocked]`, `[needs writeLock]`) and skip only when the store or the options lack it. After each test every store the test opened must be closed,
 * every worker's run() resolved and every child process gone.
 */
import { afterAll, afterEach, beforeEach, describe } from 'vitest';
import { skipSummary } from './skips.js';
import { TestEnv } from './harness.js';
import { CONFORMANCE_GROUPS, type ConformanceGroup, type ConformanceOptions } from './options.js';
import { stateMachineCases } from './cases/state-machine.js';
import { fencingCases } from './cases/fencing.js';
import { cancelCases } from './cases/cancel.js';
import { exactlyOnceCases, transactionCases } from './cases/transactions.js';
import { raceCases } from './cases/race.js';
import { processCases } from './cases/processes.js';
import { outcomeCases } from './cases/outcomes.js';
import { orderCases } from './cases/order.js';
import { retryCases } from './cases/retries.js';
import { delayCases } from './cases/delays.js';
import { priorityCases } from './cases/priority.js';
import { kindCases } from './cases/kinds.js';
import { groupCases } from './cases/groups.js';
import { tracingCases } from './cases/tracing.js';
import { dedupeCases } from './cases/dedupe.js';
import { scheduleCases } from './cases/schedules.js';
import { pruneCases } from './cases/prune.js';
import { instanceCases } from './cases/instances.js';
import { rateLimitCases } from './cases/rate-limit.js';
import { progressCases } from './cases/progress.js';
import { leaseCases } from './cases/leases.js';
import { configCases } from './cases/config.js';
import { stopCases } from './cases/stop.js';
import { schemaCases } from './cases/schema.js';
import { inspectCases } from './cases/inspect.js';
import { monitoringCountCases } from './cases/monitoring-counts.js';
import { capabilityCases } from './cases/capabilities.js';
import { outageCases } from './cases/outages.js';
import { frozenNetworkCases } from './cases/frozen-network.js';
import { outboxCases } from './cases/outbox.js';
import { readOnlyCases } from './cases/read-only.js';
import { besideCases } from './cases/beside.js';
import { setClaimState } from './tables.js';

export { BESIDE_GROUPS, CONFORMANCE_GROUPS, FAULT_GROUPS, NO_FAULT_GROUPS } from './options.js';
export type { CallDeadlines, CallerConnection, ConformanceGroup, ConformanceOptions, DisposableServer, OpenCallerConnection, RaceRun, RaceScale, ReadOnlySwitch, WriteLock } from './options.js';
export type { CheckedTable, FixtureTables, QueryPlan, QueryPlans, TableDdl } from './fixtures.js';
// Private servers and the TCP fault proxy live in test-fixtures (one home for every harness); the kit passes them on
// to the adapter authors who run it.
export { PrivateServer, TcpProxy, routeThrough, type ProxyAddress, type ServerPlacement, type ServerSpec } from '@statusq/test-fixtures';
export type { ChildWorkerArgs, ChildWorkerResult } from './child-worker.js';
export type { ChildRelayArgs } from './child-relay.js';
export type { ChildBroker } from './child-broker.js';
export { runBrokerConformance, runBrokerConformanceWhereReachable, type BrokerUnderTest, type PrivateBroker } from './broker-path.js';
export type { ChildSessionArgs } from './child-session.js';
export {
  ChildHandle,
  Ledger,
  TestEnv,
  childScript,
  deferred,
  nextEvent,
  readRow,
  readRows,
  statusOf,
  toMs,
  waitFor,
  withDeadline,
  type StartedWorker,
} from './harness.js';

/** The longest one case may run unless `testTimeoutMs` says otherwise; the slowest (chaos, outages) take ~20 s on 2 cores. */
const CASE_TIMEOUT_MS = 120_000;
/** Creating and dropping a test's database. */
const HOOK_TIMEOUT_MS = 60_000;

export function runConformance(options: ConformanceOptions): void {
  if (!options || typeof options.url !== 'function' || typeof options.adapterModule !== 'string' || typeof options.fixtures?.tableA !== 'function') {
    throw new TypeError('runConformance needs { name, adapterModule, url, fixtures }');
  }
  // Real workers, processes and servers: a case takes seconds, far past vitest's 5 s default, so the suite
  // sets its own bounds and a project's vitest config needs nothing.
  const timeout = options.testTimeoutMs ?? CASE_TIMEOUT_MS;
  const unknown = (options.groups ?? []).filter((group) => !(CONFORMANCE_GROUPS as readonly string[]).includes(group));
  if (unknown.length > 0) throw new TypeError(`runConformance: unknown groups ${unknown.join(', ')}; the groups are ${CONFORMANCE_GROUPS.join(', ')}`);
  const groups = options.groups ?? CONFORMANCE_GROUPS;
  const suite = `statusq conformance: ${options.name}`;
  describe(suite, { timeout }, () => {
    // A user's CI log says what was not checked on their database and why, without a verbose reporter.
    afterAll(() => {
      const lines = skipSummary(suite);
      if (lines.length > 0) console.info(`${suite}: skipped what this adapter or database cannot show\n  ${lines.join('\n  ')}`);
    });

    let current: TestEnv | undefined;
    const env = (): TestEnv => {
      if (!current) throw new Error('conformance: no test environment (called outside a test?)');
      return current;
    };

    beforeEach(async () => {
      setClaimState(options.claimState ?? 'in-table');
      current = new TestEnv(options, await options.url());
    }, HOOK_TIMEOUT_MS);

    afterEach(async (context) => {
      const test = current;
      current = undefined;
      if (!test) return;
      // Leaks are judged only for a test that passed: a failed test has already said what went wrong.
      const leaks = context.task.result?.state === 'pass' ? test.leaks() : [];
      await test.dispose();
      await options.dropDatabase?.(test.url);
      if (leaks.length > 0) throw new Error(`leak check failed: ${leaks.join('; ')}`);
    }, HOOK_TIMEOUT_MS);

    const cases: Record<ConformanceGroup, () => void> = {
      'state-machine': () => stateMachineCases(env),
      fencing: () => fencingCases(env),
      cancel: () => cancelCases(env),
      transactions: () => transactionCases(env, options),
      outcomes: () => outcomeCases(env),
      order: () => orderCases(env),
      retries: () => retryCases(env),
      delays: () => delayCases(env),
      priority: () => priorityCases(env),
      kinds: () => kindCases(env),
      groups: () => groupCases(env),
      tracing: () => tracingCases(env),
      dedupe: () => dedupeCases(env),
      schedules: () => scheduleCases(env),
      prune: () => pruneCases(env),
      instances: () => instanceCases(env),
      'rate-limit': () => rateLimitCases(env),
      progress: () => progressCases(env),
      leases: () => leaseCases(env),
      stop: () => stopCases(env),
      config: () => configCases(env),
      schema: () => schemaCases(env),
      inspect: () => inspectCases(env),
      'monitoring-counts': () => monitoringCountCases(env),
      capabilities: () => capabilityCases(env),
      outbox: () => outboxCases(env, options),
      race: () => raceCases(env, options),
      processes: () => processCases(env, options),
      beside: () => besideCases(env, options),
      outages: () => outageCases(env, options),
      'exactly-once': () => exactlyOnceCases(env, options),
      'frozen-network': () => frozenNetworkCases(env, options),
      'read-only': () => readOnlyCases(env, options),
    };
    for (const group of groups) cases[group]();
  });
}
