// `statusq doctor`: what an operator checks before going live. The order of the checks, their verdicts and
// the report are decided here and in ../doctor/ once; what differs per database comes from the store
// (Store.inspection, Store.schema, its capabilities and native claim), never from the dialect's name.
import { ConfigError, StoreError, type StatusCounts } from '@statusq/core';
import { EXIT, redactUrl, validateTableConfig } from '@statusq/core/tools';
import { adapterOf, databaseUrl, listenDatabaseUrl, optionalDuration, optionalInteger, tableConfig, type Flags } from '../args.js';
import { openStore } from '../adapters.js';
import { commandLine } from '../doctor/command-line.js';
import { RACE_DEFAULTS, RACE_LIMITS, raceCheck, runRace } from '../doctor/race.js';
import { checkServer } from '../doctor/server.js';
import { DEFAULT_STALLED_AFTER_MS } from '../doctor/kinds.js';
import { checkTable } from '../doctor/table.js';
import { renderReport, type Check, type DoctorReport, type RaceReport, type ServerReport } from '../doctor-report.js';
import type { Io } from '../with-store.js';

export async function doctor(flags: Flags, io: Io): Promise<number> {
  const config = typeof flags.table === 'string' ? tableConfig(flags, 'doctor') : null;
  if (config) validateTableConfig(config);
  const raceJobs = bounded(optionalInteger(flags, 'race-jobs') ?? RACE_DEFAULTS.jobs, 'race-jobs', 0, RACE_LIMITS.jobs);
  const stalledAfterMs = optionalDuration(flags, 'stalled-after') ?? DEFAULT_STALLED_AFTER_MS;
  if (flags['stalled-after'] !== undefined && config === null) throw new ConfigError('--stalled-after judges the kinds of a table: give --table');
  const raceWorkers = bounded(optionalInteger(flags, 'race-workers') ?? RACE_DEFAULTS.workers, 'race-workers', 1, RACE_LIMITS.workers);
  const url = databaseUrl(flags, 'doctor');
  // The doctor's own wake-up check (the adapter's `notify` server check) reports what a worker would log.
  const connectOptions = { create: false, listenUrl: listenDatabaseUrl(flags, 'doctor'), onWarning: () => undefined };
  const adapter = adapterOf(flags);
  const server: ServerReport = { url: redactUrl(url), version: null, isolation: null, timeZone: null, settings: {}, clock: null, capabilities: null, claim: null };
  const checks: Check[] = [];
  let race: RaceReport | null = null;
  let kinds: Record<string, StatusCounts> | null = null;
  let interrupted = false;

  // A bad URL, a missing adapter or a missing table is bad input (exit 2), thrown before anything is printed.
  const store = await openStore(url, connectOptions, adapter).catch((error: unknown) => {
    if (error instanceof StoreError) return error;
    throw error;
  });
  if (store instanceof StoreError && store.check) {
    // The server answered, and refused by a setting of its own (StoreError Unsupported): that setting's check.
    checks.push({ name: 'connect', status: 'pass', detail: `the server answers; statusq refuses to run there (${store.check.name})` });
    checks.push({ ...store.check });
  } else if (store instanceof StoreError) {
    checks.push({ name: 'connect', status: 'fail', detail: `${store.kind}: ${store.message}` });
  } else {
    try {
      const reached = await checkServer(store, server, checks);
      if (reached && config) kinds = await checkTable(store, config, commandLine(url, adapter), checks, stalledAfterMs);
      if (reached && raceJobs > 0) {
        const raced = await runRace(url, connectOptions, adapter, store, raceJobs, raceWorkers, io);
        race = raced.report;
        interrupted = raced.interrupted;
        checks.push(raceCheck(raced.report, raced.failure, raced.skipped));
      }
    } finally {
      await store.close();
    }
  }
  // `kinds` only on a table with a kind column: the report of any other table is as it was.
  const report: DoctorReport = { ok: checks.every((c) => c.status !== 'fail'), server, checks, race, ...(kinds !== null && { kinds }) };
  io.out(flags.json === true ? JSON.stringify(report) : renderReport(report));
  if (interrupted) return EXIT.stoppedHard;
  return report.ok ? 0 : 1;
}

function bounded(value: number, flag: string, min: number, max: number): number {
  if (value < min || value > max) throw new ConfigError(`--${flag} must be ${min} to ${max}, got ${value}`);
  return value;
}
