import { ConfigError } from '../protocol/errors.js';
import type { Queue, GivenUpRow } from '../queue/queue.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import type { Broker, BrokerError } from '../broker/broker.js';
import { deadLetterFor } from '../broker/broker.js';
import { DeliveryBuffer } from '../broker/broker-source.js';
import { claimGivenIds } from '../sql/claim.js';
import type { JobId, Row } from '../store/store.js';
import type { ClaimSource, ClaimedBatch, SettleStep } from './seams.js';

export interface BrokerClaimEvents {
  error(error: unknown, during: string): void;
  /** The subscription broke for good: the run ends with this error. */
  lost(error: BrokerError): void;
}

/**
 * Claims from a broker's deliveries (worker option `from`): the rows the messages name, by id with the guarded
 * UPDATE, instead of the candidate SELECT. A message whose row it did not get is acked at once (settled,
 * another owner's, or not due: the relay publishes it again when due); a claim that failed gives its messages
 * back for redelivery. It is also the step after a settle that tells the broker's dead-letter queue of a row
 * given up; the row's failed status is the record and is committed, so a dead letter that fails is reported,
 * not retried.
 */
export class BrokerClaims implements ClaimSource, SettleStep {
  private readonly deliveries: DeliveryBuffer;

  constructor(
    private readonly queue: Queue,
    broker: Broker,
    prefetch: number,
    private readonly nextToken: () => string,
    private readonly events: BrokerClaimEvents,
  ) {
    const table = queue.table.table;
    this.deliveries = new DeliveryBuffer(broker, table, prefetch, {
      malformed: (raw, reason) => events.error(new ConfigError(`a broker message that names no row of ${table} was acked and dropped: ${reason} (${raw.slice(0, 200)})`), 'broker delivery'),
      error: (error, during) => events.error(error, during),
      lost: (error) => events.lost(error),
    });
  }

  start(): Promise<void> {
    return this.deliveries.start();
  }

  async claim(limit: number): Promise<ClaimedBatch | null> {
    const taken = this.deliveries.take(limit);
    if (taken.size === 0) return null;
    const token = this.nextToken();
    const ids = [...taken.values()].map((same) => same[0]!.message.id);
    let rows: Row[];
    try {
      rows = await withStoreRetry(() => claimGivenIds(this.queue.store, this.queue.table, ids, token), {
        ...STORE_RETRY.claim,
        onRetry: (error) => this.events.error(error, 'claim (retrying)'),
      });
    } catch (error) {
      for (const same of taken.values()) for (const delivery of same) delivery.release().catch((releaseError: unknown) => this.events.error(releaseError, 'release of a delivery'));
      throw error;
    }
    const owned = new Set(rows.map((row) => String(row[this.queue.table.id])));
    for (const [key, same] of taken) {
      if (owned.has(key)) this.deliveries.hold(key, same);
      else this.deliveries.dismiss(same);
    }
    return { rows, token, candidatesLost: taken.size - rows.length };
  }

  finished(id: JobId): void {
    this.deliveries.finished(id);
  }

  arrival(): Promise<void> {
    return this.deliveries.arrival();
  }

  givenUp(row: GivenUpRow): void {
    this.deliveries.deadLetter(deadLetterFor(this.queue.table.table, row));
  }

  async stop(): Promise<void> {
    await this.deliveries.stop().catch((error: unknown) => this.events.error(error, 'broker unsubscribe'));
  }
}
