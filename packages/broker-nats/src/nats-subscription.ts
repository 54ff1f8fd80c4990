import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import { BrokerError, decodeDispatch, sleep, type ConsumeOptions, type DispatchMessage } from '@statusq/core/adapter';
import { messageOf } from './nats-errors.js';
import { REQUEST_TIMEOUT_MS, within } from './nats-timeouts.js';

/** How long one pull waits on the server for messages before the next pull replaces it. */
const PULL_EXPIRES_MS = 10_000;
/** Longest pause between two pulls that failed (JetStream restarting, the consumer being recreated). */
const MAX_PULL_BACKOFF_MS = 5_000;

/** What a pull loop needs of its broker: an interface, so that the broker imports this module and not the other way round. */
export interface PullSource {
  whenConnected(signal?: AbortSignal): Promise<void>;
  repair(): Promise<boolean>;
  confirmAck(msg: JsMsg): Promise<void>;
  release(msg: JsMsg): Promise<void>;
}

/**
 * One consume(): pulls of at most `prefetch` less what it holds unacked, one at a time. nats.js's consume()
 * pulls again as soon as messages arrive, whatever is still unacked; pulling only for free slots is what
 * keeps a consumer to its prefetch (and leaves the rest of the queue to the other consumers). A pull that
 * fails (JetStream restarting, heartbeats missed, the consumer deleted) is followed by another after a
 * bounded backoff; across a reconnect nats.js re-issues the pull itself.
 */
export class PullSubscription {
  private unacked = 0;
  private stopped = false;
  private failed = false;
  private readonly stopping = new AbortController();
  private slotFreed: (() => void) | undefined;
  private batch: ConsumerMessages | undefined;
  private loop: Promise<void> = Promise.resolve();

  constructor(
    private readonly broker: PullSource,
    private readonly consumer: Consumer,
    private readonly options: ConsumeOptions,
  ) {}

  start(): void {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    let failures = 0;
    let repairFirst = false;
    while (!this.stopped) {
      await this.freeSlot();
      await this.broker.whenConnected(this.stopping.signal);
      if (this.stopped) break;
      const started = Date.now();
      let received = 0;
      try {
        // A pull failed: the stream or consumer may be gone (deleted under us shows as "consumer deleted", no
        // responders, or a pull never answered: heartbeats missed). Putting them back is three info calls
        // when nothing is missing, so it runs after every failure, until it succeeds.
        if (repairFirst) repairFirst = !(await this.broker.repair());
        if (!repairFirst) {
          const batch = await this.consumer.fetch({ max_messages: this.options.prefetch - this.unacked, expires: PULL_EXPIRES_MS });
          if (this.stopped) {
            // Closed while the fetch was being set up: its pull request goes out on iteration only, so none is sent.
            void batch.close();
            break;
          }
          this.batch = batch;
          for await (const msg of batch) {
            received++;
            this.deliver(msg);
          }
        }
        // An empty pull that ended early is a server saying no (a 409, a 503): wait before the next.
        if (received > 0 || Date.now() - started >= PULL_EXPIRES_MS / 2) failures = 0;
        else failures++;
      } catch (error) {
        if (this.stopped) break;
        if (error instanceof BrokerError) {
          // repair() found the stream or consumer with settings statusq cannot use.
          this.fail(error);
          break;
        }
        failures++;
        repairFirst = true;
      } finally {
        this.batch = undefined;
      }
      if (failures > 0) await sleep(Math.min(MAX_PULL_BACKOFF_MS, 100 * 2 ** Math.min(failures, 6)), this.stopping.signal);
    }
  }

  private async freeSlot(): Promise<void> {
    while (!this.stopped && this.unacked >= this.options.prefetch) {
      await new Promise<void>((resolve) => {
        this.slotFreed = resolve;
      });
    }
  }

  private settled(): void {
    this.unacked--;
    this.wake();
  }

  private wake(): void {
    const resolve = this.slotFreed;
    this.slotFreed = undefined;
    resolve?.();
  }

  private deliver(msg: JsMsg): void {
    this.unacked++;
    // The first ack or release settles the delivery; later calls get the same outcome.
    let outcome: Promise<void> | undefined;
    const settle = (how: () => Promise<void>): Promise<void> => {
      outcome ??= how().finally(() => this.settled());
      return outcome;
    };
    const ack = () => settle(() => this.broker.confirmAck(msg));
    const raw = msg.string();
    let message: DispatchMessage;
    try {
      message = decodeDispatch(raw);
    } catch (error) {
      // Acked like a handled one: a body no consumer can read would only come back.
      this.options.onMalformed({ raw, error: messageOf(error), ack });
      return;
    }
    this.options.onDelivery({
      message,
      redeliveries: Math.max(0, msg.info.deliveryCount - 1),
      ack,
      release: () => settle(() => this.broker.release(msg)),
    });
  }

  /**
   * Abandons the pull in progress when the connection drops. nats.js would pull again on the reconnect, and
   * a pull of the old connection that the server still holds could then take messages to an inbox nobody
   * reads (back only after the ack wait); the loop pulls afresh once the connection is back.
   */
  dropPull(): void {
    void this.batch?.close();
  }

  /** Ends the subscription after the broker gave up, telling the consumer once. */
  fail(error: BrokerError): void {
    if (this.stopped) return;
    this.halt();
    if (!this.failed) {
      this.failed = true;
      this.options.onError(error);
    }
  }

  private halt(): void {
    this.stopped = true;
    this.stopping.abort();
    this.wake();
    void this.batch?.close();
  }

  async close(): Promise<void> {
    if (!this.stopped) this.halt();
    await within(this.loop, REQUEST_TIMEOUT_MS, () => new BrokerError('Unknown', 'the NATS pull loop did not stop within 5 s')).catch(() => undefined);
  }
}
