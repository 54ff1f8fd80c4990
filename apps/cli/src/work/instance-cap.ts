import { ConfigError, InstanceSlot, type Store, type TableConfig } from '@statusq/core';
import { DEFAULT_INSTANCE_LEASE_MS, instanceHolders, validateInstanceCap } from '@statusq/core/tools';
import { optionalDuration, optionalInteger, type Flags } from '../args.js';
import type { Logger } from '../log.js';
import type { Io } from '../with-store.js';

export interface InstanceCap {
  max: number;
  wait: boolean;
  leaseMs: number;
}

/** --max-instances, --wait and --instance-lease, checked before the database is opened; null without --max-instances. */
export function instanceCap(flags: Flags): InstanceCap | null {
  const max = optionalInteger(flags, 'max-instances');
  const leaseFlag = optionalDuration(flags, 'instance-lease');
  const wait = flags.wait === true;
  if (max === undefined) {
    if (wait || leaseFlag !== undefined) throw new ConfigError(`--${wait ? 'wait' : 'instance-lease'} needs --max-instances`);
    return null;
  }
  const leaseMs = leaseFlag ?? DEFAULT_INSTANCE_LEASE_MS;
  validateInstanceCap(max, leaseMs);
  return { max, wait, leaseMs };
}

/**
 * A slot of the table's --max-instances cap, or null when the cap is full (said in the log) and --wait was not
 * given, or a signal ended the wait. `lost` runs if the slot is lost later (this process stalled past its lease
 * and another instance took the slot): from then on this instance is over the cap.
 */
export async function takeInstanceSlot(store: Store, config: TableConfig, cap: InstanceCap, io: Io, log: Logger, lost: () => void): Promise<InstanceSlot | null> {
  const stop = new AbortController();
  const unregister = io.onSignal((signal) => {
    log.info({ signal }, `${signal}: no longer waiting for an instance slot; exiting`);
    stop.abort();
  });
  const onLost = (reason: string) => {
    log.warn({ reason }, `lost the instance slot (${reason}); draining: another instance may run in its place`);
    lost();
  };
  try {
    const options = { store, table: config, max: cap.max, leaseMs: cap.leaseMs, signal: stop.signal, onLost };
    const now = await InstanceSlot.acquire(options);
    if (now !== null || stop.signal.aborted) return await logSlot(now, log, cap, stop.signal);
    const holders = await instanceHolders(store, config);
    const who = holders.map((h) => `${h.host ?? '?'} (slot ${h.slot})`).join(', ');
    if (!cap.wait) {
      log.info({ maxInstances: cap.max, holders: holders.map((h) => h.host) }, `${cap.max} of ${cap.max} instance slots on ${config.table} are held (${who}); exiting (code 0) rather than run over --max-instances`);
      return null;
    }
    log.info({ maxInstances: cap.max, holders: holders.map((h) => h.host) }, `${cap.max} of ${cap.max} instance slots on ${config.table} are held (${who}); waiting for one`);
    return await logSlot(await InstanceSlot.acquire({ ...options, wait: true }), log, cap, stop.signal);
  } finally {
    unregister();
  }
}

/** The slot taken, said in the log; or, when a signal came while it was being taken, freed again (null: exit). */
async function logSlot(slot: InstanceSlot | null, log: Logger, cap: InstanceCap, stopped: AbortSignal): Promise<InstanceSlot | null> {
  if (slot === null) return null;
  if (stopped.aborted) {
    await slot.release();
    return null;
  }
  log.info({ slot: slot.slot, maxInstances: cap.max }, `holding instance slot ${slot.slot} of ${cap.max}`);
  return slot;
}
