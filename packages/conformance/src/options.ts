import type { Store, WorkerCounters } from '@statusq/core';
import type { ClaimStrategy, SqlValue } from '@statusq/core/adapter';
import type { FixtureTables, QueryPlans } from './fixtures.js';
import type { ProxyAddress } from '@statusq/test-fixtures';

/** What an adapter hands the conformance suite. */
export interface ConformanceOptions {
  /** Shown in the top-level describe block: the adapter's name. */
  name: string;
  /**
   * Absolute path or file URL of the adapter's built module (its `dist/index.js`), which exports
   * `connect(url)`. Child processes import it to open their own connections.
   */
  adapterModule: string;
  /** A fresh, empty database for one test (for a file database, a new temp file). Called once per test. */
  url: () => string | Promise<string>;
  /**
   * Opens a new connection (store) to the database at `url`. Called several times per test: the race tests
   * give every worker its own store. Default: the adapter module's `connect(url)`.
   */
  createStore?: (url: string) => Promise<Store>;
  /** The tables the suite creates, in this database's DDL (the adapter's `./testing` entry exports them). */
  /**
   * Where the tables the cases make keep their claim state: `in-table` (default: the columns of `statusq init` and
   * `migrate --with`), or `beside`, a claims table next to each (`init`/`migrate --beside`). A run with `beside`
   * proves the groups it runs hold in that layout too (the lease, retry, fencing and state-machine groups are the
   * ones it is meant for; groups that read claim-state columns through SQL of their own may not apply).
   */
  claimState?: 'in-table' | 'beside';
  /** Longest one case may run, in ms. Default 120000: cases race real workers, processes and servers. */
  testTimeoutMs?: number;
  fixtures: FixtureTables;
  /**
   * A VARCHAR(n) column refuses longer text and the adapter's describeTable reports n. Default true; false
   * for a database that stores text of any length whatever the declared size.
   */
  enforcesTextLength?: boolean;
  /**
   * Another process can hold the whole database's write lock, and a claim then fails at once as StoreError
   * Busy (an embedded database with one writer at a time). Enables the `[needs writeLock]` case; without it
   * that case skips.
   */
  writeLock?: WriteLock;
  /** Reading query plans; enables the `[needs queryPlans]` case (the pending index serves every candidate SELECT). */
  queryPlans?: QueryPlans;
  /** Removes what `url()` created (a database, a temp directory). Called after each test. */
  dropDatabase?: (url: string) => void | Promise<void>;
  /**
   * Multiplies the job counts of the race and multi-process tests (default 1: 3,000 jobs in-process,
   * 4,000 rows across processes). Lower it for a slow server, never below what still races.
   */
  scale?: number;
  /**
   * The size of the in-process race with the native claim (many workers, each on its own connection, draining
   * one table), so one case proves exactly-once both at an embedded database's size and at a server's. Default: 8 workers of
   * concurrency 4 over 3,000 jobs (times `scale`). The conditional-update race always runs at the default.
   */
  raceScale?: RaceScale;
  /**
   * Starts a private server of the adapter's database, for the outage cases (a server restart and every
   * connection dropped in the middle of a supervised run). Those must never touch the shared server other
   * suites run against. Without it (an embedded database has no server) the outage cases skip; when it is given and
   * the server cannot be started, they fail.
   */
  disposableServer?: () => Promise<DisposableServer>;
  /**
   * For the frozen-network cases: where the server of a test database `url` listens, and that URL pointed at
   * another address (a TcpProxy of the test's own) with the adapter's connect and query deadlines set to
   * `deadlines`. Without it (an embedded database has no network; its lock timeout bounds every wait) those cases skip.
   */
  throughProxy?: (url: string, deadlines: CallDeadlines) => { upstream: ProxyAddress; via(address: ProxyAddress): string };
  /**
   * The application's own driver connections to the database of `url`, one per kind of handle the adapter's
   * `runnerFor` takes (a driver's client and its pool's client, a connection of each API the driver has), for the cases that
   * enqueue inside the application's transaction (`[needs callerConnections]`). Without it those cases skip.
   */
  callerConnections?: (url: string) => CallerConnection[];
  /**
   * knex's configuration for the database of `url` (`{ client: 'pg', connection: ... }`), for the cases that
   * enqueue inside a knex transaction (`[needs knex]`); the suite opens knex with it and destroys it after.
   * Without it those cases skip.
   */
  knexConfig?: (url: string) => Record<string, unknown>;
  /**
   * Turns the server of a test database `url` read-only and writable again, the way a failover or an
   * operator does (a server-wide read-only setting), for the
   * `[needs readOnlySwitch]` cases: workers wait for the server, bounded, and lose no job. The switch acts on
   * the whole server, so give it only on a private server of the suite's own, with an account in `url` that
   * read-only applies to (not an administrator's that the setting exempts). Without it those cases skip.
   */
  readOnlySwitch?: (url: string) => ReadOnlySwitch;
  /**
   * Which groups of cases to register. Default: every group. A run against an unusual server setting (a
   * private server started with one option, say) names the groups that setting can break, so the whole suite
   * does not run again for each setting.
   */
  groups?: readonly ConformanceGroup[];
}

/** The groups of cases `runConformance` registers, in the order it registers them (see `ConformanceOptions.groups`). */
export const CONFORMANCE_GROUPS = [
  'state-machine',
  'fencing',
  'cancel',
  'transactions',
  'outcomes',
  'order',
  'retries',
  'delays',
  'priority',
  'kinds',
  'groups',
  'tracing',
  'dedupe',
  'schedules',
  'prune',
  'instances',
  'rate-limit',
  'progress',
  'leases',
  'stop',
  'config',
  'schema',
  'inspect',
  'monitoring-counts',
  'capabilities',
  'outbox',
  'race',
  'processes',
  'beside',
  'outages',
  'exactly-once',
  'frozen-network',
  'read-only',
] as const;
export type ConformanceGroup = (typeof CONFORMANCE_GROUPS)[number];

/**
 * The groups that break something on purpose: a private server restarted or its connections killed
 * (`disposableServer`), the network frozen (`throughProxy`), the server turned read-only (`readOnlySwitch`).
 * Slower than the rest and needing more of the machine, so a project may run them as a job of their own:
 * `groups: FAULT_GROUPS` there, and the rest (`CONFORMANCE_GROUPS` without these) in the everyday run.
 */
export const FAULT_GROUPS = ['outages', 'exactly-once', 'frozen-network', 'read-only'] as const satisfies readonly ConformanceGroup[];

/** The groups an adapter runs again with `claimState: 'beside'`: what a claims table must not change. */
export const BESIDE_GROUPS = ['state-machine', 'fencing', 'cancel', 'transactions', 'retries', 'leases'] as const satisfies readonly ConformanceGroup[];

/** Every group but the fault groups (see FAULT_GROUPS). */
export const NO_FAULT_GROUPS: readonly ConformanceGroup[] = CONFORMANCE_GROUPS.filter((group) => !(FAULT_GROUPS as readonly ConformanceGroup[]).includes(group));

/** See `ConformanceOptions.readOnlySwitch`. */
export interface ReadOnlySwitch {
  /** Resolves once a new write through a connection of `url` (pooled or new) is refused as read-only. */
  on(): Promise<void>;
  /** Resolves once such a write is accepted again. Safe to call when already writable. */
  off(): Promise<void>;
}

/** See `ConformanceOptions.callerConnections`. */
export interface CallerConnection {
  /** Names the kind in messages: the driver and its handle, `<driver> Client`, `<driver> pool connection`. */
  readonly label: string;
  open(): Promise<OpenCallerConnection>;
}

/** One open application connection; see `ConformanceOptions.callerConnections`. */
export interface OpenCallerConnection {
  /** What enqueue's `transaction` option is given. */
  readonly handle: unknown;
  /** Runs SQL on this connection (BEGIN, COMMIT, ROLLBACK, the application's own writes) with the dialect's placeholders. */
  run(sql: string, params?: readonly SqlValue[]): Promise<void>;
  close(): Promise<void>;
}

/** See `ConformanceOptions.writeLock`. */
export interface WriteLock {
  /** Opens a store that gives up on a lock held by another connection almost at once (a lock timeout of a few ms). */
  createImpatientStore: (url: string) => Promise<Store>;
  /** What a session in another process runs to take the write lock (a transaction that takes it at once). */
  take: string[];
  /** What that session runs to give it back (`COMMIT`). */
  release: string[];
  /** The driver's native code on the Busy error a claim meets. */
  nativeCode: RegExp;
}

/** See `ConformanceOptions.raceScale`. */
export interface RaceScale {
  /** Workers, each on a store of its own. Default 8. */
  workers?: number;
  /** Jobs to drain, before `scale` is applied. Default 3,000. */
  jobs?: number;
  /** Each worker's concurrency (and so its claim batch). Default 4. */
  concurrency?: number;
  /**
   * Opens one racing worker's store. Default: `createStore`. A server adapter bounds each pool here when
   * that many workers' default pools would pass the server's connection limit.
   */
  createStore?: (url: string) => Promise<Store>;
  /**
   * What only this adapter can check once a race (either strategy) has drained the queue (its stores' own conflict counters, ...),
   * given the workers' stores as opened (not the test's wrappers).
   */
  check?: (run: RaceRun) => void | Promise<void>;
}

/** One finished race, handed to `RaceScale.check`. */
export interface RaceRun {
  strategy: ClaimStrategy;
  jobs: number;
  workers: number;
  /** The racing workers' stores, one per worker, as `RaceScale.createStore` opened them. */
  stores: Store[];
  /** Each worker's counters as `run()` resolved them. */
  results: WorkerCounters[];
}

/** Deadlines, in ms, a store opened for the frozen-network cases must keep. */
export interface CallDeadlines {
  /** Opening a connection. */
  connectTimeoutMs: number;
  /** One call on an open connection. */
  queryTimeoutMs: number;
}

/** A database server that belongs to one test; see `ConformanceOptions.disposableServer`. */
export interface DisposableServer {
  /** An empty database on that server, in the form the adapter's `connect` takes. */
  readonly url: string;
  /**
   * Shuts the server down the way an administrator restarts it (every session is ended), keeps it down for
   * `downMs`, starts it again, and resolves once it accepts connections again.
   */
  restart(downMs: number): Promise<void>;
  /** Ends every session on the database of `url` except the helper's own, and resolves with how many. */
  dropConnections(): Promise<number>;
  /** Stops the server, kills whatever is left of it and removes its files. Safe to call more than once. */
  stop(): Promise<void>;
}
