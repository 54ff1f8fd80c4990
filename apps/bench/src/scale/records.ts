/** What every scale scenario shares: the record each run writes, the context it runs in, and its section of the docs. */
import type { ServerDialect } from './db-host.js';
import type { LedgerVerdict } from './ledger-check.js';

export interface ScaleRecord {
  /** The scenario's name (`--only`): hosts, latency, faults, or a cluster scenario's. */
  scenario: string;
  dialect: ServerDialect;
  server: string;
  hosts: number;
  processes: number;
  concurrency: number;
  batch: number;
  /** Added round trip between each worker host and the database. */
  addedRttMs: number;
  jobs: number;
  /** From the first settle to the last (finished_at): the drain itself, without process start-up. */
  jobsPerSec: number;
  wallSeconds: number;
  /** Claims whose candidate another worker took first (the SELECT saw it, the guarded UPDATE lost). */
  candidatesLost: number;
  /** Claims the workers sent (each a transaction or a statement), empty ones included; absent in older records. */
  claimCalls?: number;
  /** Database server CPU, in cores, over the run (every node of a cluster together). */
  serverCores: number;
  /** The worker hosts' CPU (every `statusq work` process), in cores over the run; absent without /proc. */
  workersCores?: number;
  ledger: LedgerVerdict;
  /** What the fault run did: connections dropped, seconds partitioned, processes killed, claims taken over per host. */
  faults?: { dropped: number; drops: number; partitionedSeconds: number; killed: number; claimsTakenOver: Record<string, number> };
  /** A scenario's own measurements (certification conflicts, rows re-run after a failover, pick-up times ...). */
  extra?: Record<string, number | string | boolean | null>;
}

export interface ScaleContext {
  /** The CI-sized plan (a few minutes for everything) instead of the full one. */
  quick: boolean;
  dialects: readonly ServerDialect[];
  /** The scenario names to run. */
  only: readonly string[];
  onRecord(record: ScaleRecord): void;
  log(line: string): void;
}

/** One part of `pnpm scale`: some scenarios, how to run them, and their part of docs/scale-out.md. */
export interface ScaleSection {
  /** The scenario names it runs (each is a `--only` value). */
  names: readonly string[];
  /** Runs the scenarios of `context.only` it has, on the dialects of `context.dialects` they support; throws when a proof fails. */
  run(context: ScaleContext): Promise<void>;
  /** Its part of the report (markdown: headings, tables, chart links), or null when no record is its. */
  markdown(records: readonly ScaleRecord[]): string | null;
  /** SVG charts to write beside docs/scale-out.md, by file name. */
  charts?(records: readonly ScaleRecord[]): Record<string, string>;
}
