/** The broker scenario's tables (broker-scenario.ts): its burn-down against polling, and its pick-up latency. */
import type { BenchRecord, BurnDownRecord, PickupRecord } from './records.js';
import { format, percent, type Cell, type Section } from './report-format.js';

/** Issue 17's pick-up target for the broker path on MariaDB/MySQL, where no LISTEN/NOTIFY wakes a worker. */
export const BROKER_PICKUP_TARGET = { p50Ms: 10, p99Ms: 50 };

/** The pick-up variants the broker scenario records (broker-scenario.ts brokerVariant): `relay, <broker>`, `dispatchTo, <broker>`. */
const BROKER_PATH = /^(relay|dispatchTo), /;

/**
 * The broker path (broker-scenario.ts broker): one row per dialect, worker and process count, polling's jobs/s beside
 * each broker variant's and its share of polling; then the pick-up rows of the broker path beside polling and the
 * store's own wake-up (the pickup scenario's, native claim) with issue 17's target read on MariaDB/MySQL.
 */
export function brokerSections(records: readonly BenchRecord[]): Section[] {
  const out: Section[] = [];
  const runs = records.filter((r): r is BurnDownRecord => r.scenario === 'broker-burn-down');
  if (runs.length > 0) {
    const variants = [...new Set(runs.map((r) => r.variant).filter((v) => v !== 'polling'))];
    const keyOf = (r: BurnDownRecord) => `${r.dialect}|${r.workers}|${r.processes}`;
    const rate = (r: BurnDownRecord | undefined): Cell => (r ? (r.timedOut ? `${format(r.jobsPerSec)} (timed out)` : r.jobsPerSec) : '');
    out.push({
      title: `Broker path: burn-down of ${format(runs[0]!.jobs)} no-op jobs, consumer workers taking the rows a relay in the bench process publishes, against polling workers at the same counts (${runs[0]!.concurrency} slots per worker, no warm-up)`,
      header: ['dialect', 'workers', 'processes', 'polling jobs/s', ...variants.flatMap((v) => [`${v} jobs/s`, 'of polling', 'relay busy', `${v} CPU server`]), 'polling CPU server'],
      rows: [...new Set(runs.map(keyOf))].map((key) => {
        const of = (variant: string) => runs.find((r) => keyOf(r) === key && r.variant === variant);
        const polling = of('polling');
        const [dialect, workers, processes] = key.split('|');
        return [
          dialect!,
          Number(workers),
          Number(processes),
          rate(polling),
          ...variants.flatMap((v) => {
            const run = of(v);
            return [rate(run), run && polling && polling.jobsPerSec > 0 ? percent(run.jobsPerSec, polling.jobsPerSec) : '', run?.relayBusyPercent !== undefined ? `${run.relayBusyPercent}%` : '', run?.serverCpu ?? ''];
          }),
          polling?.serverCpu ?? '',
        ];
      }),
    });
  }
  const pickups = records.filter((r): r is PickupRecord => r.scenario === 'pickup' && r.system === 'statusq');
  const throughBroker = pickups.filter((r) => BROKER_PATH.test(r.variant));
  if (throughBroker.length > 0) {
    const target = BROKER_PICKUP_TARGET;
    out.push({
      title: `Broker path: pick-up latency (one row every 10 ms; issue 17's target on MariaDB/MySQL: p50 < ${target.p50Ms} ms, p99 < ${target.p99Ms} ms)`,
      header: ['dialect', 'variant', 'p50 ms', 'p99 ms', 'max ms', 'target'],
      rows: ['mysql', 'postgres', 'sqlite'].flatMap((dialect) =>
        pickups
          .filter((r) => r.dialect === dialect && (BROKER_PATH.test(r.variant) || r.variant.startsWith('native, ')))
          .map((r) => [dialect, r.variant, r.p50Ms, r.p99Ms, r.maxMs, dialect === 'mysql' ? (r.received === r.rows && r.p50Ms < target.p50Ms && r.p99Ms < target.p99Ms ? 'met' : 'missed') : '']),
      ),
    });
  }
  return out;
}
