import { performance } from 'node:perf_hooks';
import { StoreError, type Store } from '@statusq/core';
import { oneLine } from '../text.js';
import type { Check, ClockReading, ServerReport } from '../doctor-report.js';

/**
 * Past this, the clocks disagree by more than NTP ever leaves them (a few ms) and more than the default
 * 1 s retry step: one of the hosts keeps no time. statusq itself compares only the database's clock (leases,
 * retries, requeue --lease), so this is a warning: it matters for times this host writes into the table.
 */
export const CLOCK_WARN_MS = 1_000;
const CLOCK_SAMPLES = 5;

/** Server facts, the claim it supports and its clock. False when the server cannot be reached at all. */
export async function checkServer(store: Store, server: ServerReport, checks: Check[]): Promise<boolean> {
  // The first statement is the connection check; the others fail on their own.
  try {
    await store.execute({ sql: 'SELECT 1', params: [] });
  } catch (error) {
    checks.push({ name: 'connect', status: 'fail', detail: oneLine(error) });
    return false;
  }
  const inspection = store.inspection;
  if (inspection) {
    try {
      const facts = await inspection.serverFacts();
      Object.assign(server, { version: facts.version, isolation: facts.isolation, timeZone: facts.timeZone, settings: { ...facts.settings } });
      const settings = Object.entries(facts.settings).map(([name, value]) => `${name} ${value}`).join(', ');
      checks.push({ name: 'server', status: 'pass', detail: `${facts.version}; isolation ${facts.isolation}; session time zone ${facts.timeZone}${settings ? ` (${settings})` : ''}` });
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      checks.push({ name: 'server', status: 'warn', detail: `the server's facts could not be read: ${oneLine(error)}` });
    }
    if (inspection.serverChecks) {
      try {
        for (const check of await inspection.serverChecks()) checks.push({ ...check });
      } catch (error) {
        if (!(error instanceof StoreError)) throw error;
        checks.push({ name: 'server settings', status: 'warn', detail: `the server's settings could not be read: ${oneLine(error)}` });
      }
    }
  } else {
    checks.push({ name: 'server', status: 'warn', detail: `the ${store.dialect.name} adapter reports no server facts (no Store.inspection): version, clock and query plans unchecked` });
  }
  server.capabilities = { ...store.capabilities };
  checks.push(claimCheck(store, server));
  if (inspection) {
    try {
      server.clock = await readClock(() => inspection.clockMs());
      checks.push(clockCheck(server.clock));
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      checks.push({ name: 'clock', status: 'warn', detail: `the database's clock could not be read: ${oneLine(error)}` });
    }
  }
  return true;
}

function claimCheck(store: Store, server: ServerReport): Check {
  const { capabilities: c, nativeClaim } = store;
  const wakeUps = c.listenNotify ? 'idle workers woken when rows arrive' : c.idleProbe ? 'idle workers probe for due rows' : 'idle workers poll';
  if (!nativeClaim) {
    server.claim = 'conditional update';
    return {
      name: 'claim',
      status: 'warn',
      detail: `no native claim on this server: workers run the portable conditional update, one UPDATE per candidate, which loses most candidates under contention (measured: 74% with 8 workers, 90% with 32); ${wakeUps}`,
      fix: 'a server version with SELECT ... FOR UPDATE SKIP LOCKED (see the adapter\'s README)',
    };
  }
  server.claim = nativeClaim.oneStatement ? 'one statement' : 'transaction';
  const how = nativeClaim.oneStatement ? 'one statement per batch' : 'one transaction per batch';
  const parts = [`native claim, ${how}`, c.batchClaim ? 'batches' : 'one row a claim', c.skipLocked ? 'skips rows other claimers hold' : 'waits on rows other claimers hold', c.returning ? 'RETURNING' : 'no RETURNING', wakeUps];
  return { name: 'claim', status: c.skipLocked ? 'pass' : 'warn', detail: parts.join('; ') };
}

/** The fastest of a few readings: its round trip bounds the error the most tightly. */
async function readClock(read: () => Promise<number>): Promise<ClockReading> {
  let best: ClockReading | null = null;
  for (let i = 0; i < CLOCK_SAMPLES; i++) {
    const sent = performance.timeOrigin + performance.now();
    const database = await read();
    const received = performance.timeOrigin + performance.now();
    const reading = { offsetMs: database - (sent + received) / 2, errorMs: (received - sent) / 2 };
    if (!best || reading.errorMs < best.errorMs) best = reading;
  }
  return { offsetMs: round(best!.offsetMs), errorMs: round(best!.errorMs) };
}

const round = (ms: number) => Math.round(ms * 10) / 10;

function clockCheck({ offsetMs, errorMs }: ClockReading): Check {
  const side = offsetMs >= 0 ? 'ahead of' : 'behind';
  const detail = `the database's clock is ${Math.abs(offsetMs)} ms ${side} this host's (±${errorMs} ms)`;
  if (Math.abs(offsetMs) - errorMs <= CLOCK_WARN_MS) return { name: 'clock', status: 'pass', detail };
  return {
    name: 'clock',
    status: 'warn',
    detail:
      `${detail}, over ${CLOCK_WARN_MS} ms. Leases, retries and requeue --lease compare the database's own time only and are not affected; ` +
      "times this host writes into the table (an application's own order column) are off by that much, which shifts newest-first order and --aging",
    fix: 'keep both clocks synchronised (NTP / chrony) on the database server and on every worker host',
  };
}
