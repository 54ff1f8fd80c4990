import type { Broker, BrokerError, DeadLetter, Delivery, MalformedDelivery, Subscription } from './broker.js';
import type { JobId } from '../protocol/values.js';

/** What the worker hears from its broker besides deliveries. */
export interface DeliveryEvents {
  /** A message that names no row of this table; it was acked. */
  malformed(raw: string, reason: string): void;
  /** An ack or release the broker refused (its channel went away): the broker redelivers the message. */
  error(error: unknown, during: string): void;
  /** The subscription broke for good: the worker's run ends with this error. */
  lost(error: BrokerError): void;
}

/**
 * A worker's broker deliveries between arrival and the end of the job they name (worker option `from`). The
 * worker takes ids from here instead of the candidate SELECT, claims them with the guarded UPDATE, and tells
 * `finished` when the row's job is over; its deliveries are acked then, after the settle committed (or failed:
 * a row left in processing returns by its lease and the relay publishes it again, so a redelivery would only be
 * dropped by the claim). Deliveries of a row the claim did not get are acked at once: another owner has it, it
 * is settled, or not due (the relay publishes it again when it is due).
 */
export class DeliveryBuffer {
  private readonly waiting: Delivery[] = [];
  /** Deliveries of rows this worker claimed, by id, until the job is over. Duplicates of a row share its entry. */
  private readonly held = new Map<string, Delivery[]>();
  private subscription: Subscription | null = null;
  /**
   * Acks and dead letters sent and not yet answered: stop() waits for them, so a finished job's message is not
   * redelivered and a given-up row's dead letter is not cut off by the broker's close.
   */
  private readonly unanswered = new Set<Promise<void>>();
  /** One promise for every wait until the next delivery, so an idle worker's repeated waits pile up nothing. */
  private nextArrival: { promise: Promise<void>; resolve: () => void } | null = null;

  constructor(
    private readonly broker: Broker,
    private readonly table: string,
    private readonly prefetch: number,
    private readonly events: DeliveryEvents,
  ) {}

  async start(): Promise<void> {
    this.subscription = await this.broker.consume({
      prefetch: this.prefetch,
      onDelivery: (delivery) => this.arrived(delivery),
      onMalformed: (delivery) => this.malformed(delivery, delivery.error),
      onError: (error) => {
        this.events.lost(error);
        this.wakeWaiters();
      },
    });
  }

  /** Deliveries waiting for a claim. */
  get size(): number {
    return this.waiting.length;
  }

  /** Up to `limit` deliveries naming distinct rows, oldest first; duplicates of a taken row ride along. */
  take(limit: number): Map<string, Delivery[]> {
    const taken = new Map<string, Delivery[]>();
    const kept: Delivery[] = [];
    for (const delivery of this.waiting) {
      const key = String(delivery.message.id);
      const same = taken.get(key);
      if (same) same.push(delivery);
      else if (taken.size < limit) taken.set(key, [delivery]);
      else kept.push(delivery);
    }
    this.waiting.splice(0, this.waiting.length, ...kept);
    return taken;
  }

  /** The claim took these rows: their deliveries wait for the jobs to end. A second delivery of a held row joins it. */
  hold(key: string, deliveries: Delivery[]): void {
    const already = this.held.get(key);
    if (already) already.push(...deliveries);
    else this.held.set(key, deliveries);
  }

  /** Deliveries the claim did not get a row for: nothing for this worker to do. */
  dismiss(deliveries: readonly Delivery[]): void {
    for (const delivery of deliveries) this.ack(delivery);
  }

  /** The job of row `id` is over (settled, lost, handed back): its deliveries are acked. */
  finished(id: JobId): void {
    const key = String(id);
    const deliveries = this.held.get(key);
    if (!deliveries) return;
    this.held.delete(key);
    for (const delivery of deliveries) this.ack(delivery);
  }

  /** Resolves at the next delivery (or a broken subscription); the caller races it with its own timer. */
  arrival(): Promise<void> {
    if (this.waiting.length > 0) return Promise.resolve();
    if (!this.nextArrival) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.nextArrival = { promise, resolve };
    }
    return this.nextArrival.promise;
  }

  /**
   * Stops deliveries and gives back the ones never claimed, so another consumer takes them at once rather
   * than after this connection closes. Held ones are acked by `finished` as their jobs end; this waits for the
   * acks still unanswered, so the caller may close the broker once it resolves.
   */
  async stop(): Promise<void> {
    const subscription = this.subscription;
    this.subscription = null;
    await subscription?.close();
    const unclaimed = this.waiting.splice(0);
    await Promise.all(unclaimed.map((delivery) => delivery.release().catch((error: unknown) => this.events.error(error, 'release of a delivery'))));
    await Promise.all([...this.unanswered]);
    this.wakeWaiters();
  }

  private arrived(delivery: Delivery): void {
    if (delivery.message.table !== this.table) {
      this.malformed({ raw: JSON.stringify(delivery.message), error: '', ack: () => delivery.ack() }, `names table ${JSON.stringify(delivery.message.table)}, not ${JSON.stringify(this.table)}`);
      return;
    }
    // A redelivery of a row this worker runs right now (its ack timed out at the broker) joins the job.
    const key = String(delivery.message.id);
    const held = this.held.get(key);
    if (held) {
      held.push(delivery);
      return;
    }
    this.waiting.push(delivery);
    this.wakeWaiters();
  }

  private malformed(delivery: MalformedDelivery, reason: string): void {
    this.events.malformed(delivery.raw, reason);
    this.track(delivery.ack(), 'ack of a malformed message');
  }

  /** Publishes the dead letter of a row given up; a failure is reported (the failed row is the record). */
  deadLetter(letter: DeadLetter): void {
    this.track(this.broker.deadLetter(letter), `dead letter of job ${String(letter.id)}`);
  }

  private ack(delivery: Delivery): void {
    this.track(delivery.ack(), `ack of job ${String(delivery.message.id)}`);
  }

  private track(answer: Promise<void>, during: string): void {
    const settled = answer.catch((error: unknown) => this.events.error(error, during)).finally(() => this.unanswered.delete(settled));
    this.unanswered.add(settled);
  }

  private wakeWaiters(): void {
    const next = this.nextArrival;
    this.nextArrival = null;
    next?.resolve();
  }
}
