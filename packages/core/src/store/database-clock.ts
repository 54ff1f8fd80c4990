import { StoreError, describeError } from '../protocol/errors.js';
import type { Store } from './store.js';

/**
 * The database's clock as seen from this process: every time statusq compares across processes and hosts
 * (leases, delays, schedule ticks, rate-limit budgets) is the database's, never a worker's own. Read once, then
 * kept as an offset from this process's clock; read again with sync() (a process clock can be stepped).
 */
export class DatabaseClock {
  /** The database's clock minus this process's, from the last read. */
  private offsetMs = 0;

  constructor(
    private readonly store: Store,
    private readonly onError: (error: StoreError) => void = () => undefined,
  ) {}

  now(): number {
    return Date.now() + this.offsetMs;
  }

  /**
   * Reads the database's clock; true when the offset is now the database's (a store without inspection keeps this
   * process's, and says true). A failed read keeps the last offset and says false: it is an outage the next
   * statement meets and reports.
   */
  async sync(): Promise<boolean> {
    const inspection = this.store.inspection;
    if (!inspection) return true;
    try {
      const before = Date.now();
      const db = await inspection.clockMs();
      this.offsetMs = db - (before + Date.now()) / 2;
      return true;
    } catch (error) {
      this.onError(new StoreError('Unknown', `reading the database's clock failed: ${describeError(error)}`));
      return false;
    }
  }
}
