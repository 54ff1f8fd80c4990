import { ConfigError, StatusqError } from '../protocol/errors.js';
import type { JobId } from '../protocol/values.js';

/*
 * The broker contract: what statusq asks of a message broker that takes over dispatch (see relay.ts and
 * broker-source.ts). The table stays the record; a message only says "row `id` of `table` may be due". So a
 * broker that loses, repeats or reorders messages costs time or a wasted claim, never a job: the consumer's
 * claim is the same guarded UPDATE a polling worker runs, and the relay publishes again any pending row that
 * was claimed since its last dispatch or whose dispatch is older than the redispatch age.
 *
 * A package implements it for one broker (@statusq/broker-rabbitmq, @statusq/broker-nats) and exports
 * `connectBroker` and `schemes` (BrokerModule); core imports none of them.
 */

/** What one message carries. JSON on the wire (encodeDispatch/decodeDispatch), the same for every broker. */
export interface DispatchMessage {
  /** The table the row lives in, as the relay was configured (`schema.table` or `table`). */
  table: string;
  /** The row's id. bigint ids travel as decimal strings. */
  id: string | number;
  /** The attempt the row was on when dispatched (attempt_count + 1): for logs and dead letters only. */
  attempt: number;
}

/** A dead letter: a row that ended in failed (0), for consumers in other services. */
export interface DeadLetter extends DispatchMessage {
  /** Why it was given up (the last error, as written to last_error). */
  error: string;
}

/** One received message, to be acknowledged once the row's fate is written (or was never this consumer's). */
export interface Delivery {
  readonly message: DispatchMessage;
  /**
   * How many times the broker delivered this message before (0 on the first delivery), as the broker counts
   * it: RabbitMQ's quorum queues `x-delivery-count`, JetStream's delivery count less one. For logs and metrics.
   */
  readonly redeliveries: number;
  /** Removes the message from the broker. Idempotent; a broker that lost the channel since rejects with BrokerError ConnectionLost. */
  ack(): Promise<void>;
  /**
   * Gives the message back for redelivery (to any consumer). Used when the consumer stops before it could
   * claim the row; a message it cannot decode is acked and reported instead.
   */
  release(): Promise<void>;
}

/** A message the broker delivered that is not a DispatchMessage (another producer's, or damaged). */
export interface MalformedDelivery {
  readonly raw: string;
  readonly error: string;
  ack(): Promise<void>;
}

export interface ConsumeOptions {
  /** Most messages delivered and not yet acked at once (RabbitMQ prefetch, JetStream max_ack_pending per pull). */
  prefetch: number;
  /** Called for each message, in the order the broker delivers them. Must not throw. */
  onDelivery(delivery: Delivery): void;
  /** A message that is not a DispatchMessage: the consumer reports it and acks it. */
  onMalformed(delivery: MalformedDelivery): void;
  /**
   * The subscription broke and could not be restored (the broker went away and reconnecting gave up); the
   * consumer ends its run with the error. A broker package reconnects by itself first where its client does.
   */
  onError(error: BrokerError): void;
}

export interface Subscription {
  /** Stops deliveries; unacked messages go back to the broker when the connection closes. */
  close(): Promise<void>;
}

/**
 * One connection to a broker, for one table's queue. Publishing and consuming may both run on it.
 * Every method rejects with BrokerError.
 */
export interface Broker {
  /** `rabbitmq` or `nats`, for messages. */
  readonly name: string;
  /** Where it is connected, credentials removed: for logs. */
  readonly address: string;
  /**
   * Resolves once the broker confirmed every message (publisher confirms; JetStream's PubAck): stored by the
   * broker as durably as its queue is. Rejects (BrokerError) if any was refused or unconfirmed; the relay
   * then leaves the batch for its redispatch.
   */
  publish(messages: readonly DispatchMessage[]): Promise<void>;
  /** Starts deliveries of this queue's messages. */
  consume(options: ConsumeOptions): Promise<Subscription>;
  /** Publishes a dead letter to the broker's dead-letter queue (RabbitMQ) or subject (NATS), confirmed. */
  deadLetter(letter: DeadLetter): Promise<void>;
  /** Messages waiting in the queue (not yet delivered or unacked), for stats; null when the broker cannot tell. */
  depth(): Promise<number | null>;
  close(): Promise<void>;
}

export interface BrokerConnectOptions {
  /**
   * The queue (RabbitMQ) or stream (NATS) name: default `statusq.<table>` (its dots kept; a schema-qualified
   * table gives `statusq.schema.table`). Two tables never share one.
   */
  queue: string;
  /** How long start-up waits for the broker before BrokerError Unreachable. Default 10 s. */
  connectTimeoutMs?: number | undefined;
  /** Warnings the package has about its setup (a classic queue where a quorum one was expected). */
  onWarning?: ((message: string) => void) | undefined;
}

export interface BrokerModule {
  /** URL schemes served, without the colon (`amqp`, `amqps`; `nats`). */
  readonly schemes: readonly string[];
  connectBroker(url: string, options: BrokerConnectOptions): Promise<Broker>;
}

export type BrokerErrorKind =
  /** Could not reach the broker at start-up within the connect timeout. */
  | 'Unreachable'
  /** The connection or channel closed under an operation. */
  | 'ConnectionLost'
  /** The broker refused a publish (nack) or did not confirm it. */
  | 'NotConfirmed'
  /** The broker refused the credentials or the queue's settings. */
  | 'Refused'
  | 'Unknown';

/** Every failure a broker package reports, with the broker's own code or message kept. */
export class BrokerError extends StatusqError {
  readonly kind: BrokerErrorKind;
  readonly nativeCode: string | number | undefined;
  constructor(kind: BrokerErrorKind, message: string, nativeCode?: string | number, options?: { cause?: unknown }) {
    super(`BROKER_${kind.toUpperCase()}`, message, options);
    this.kind = kind;
    this.nativeCode = nativeCode;
  }

  get retryable(): boolean {
    return this.kind === 'ConnectionLost' || this.kind === 'NotConfirmed';
  }
}

/** The default queue or stream name of a table's dispatch. */
export function defaultBrokerQueue(table: string): string {
  return `statusq.${table}`;
}

/** A message's bytes on the wire. */
export function encodeDispatch(message: DispatchMessage): string {
  return JSON.stringify({ table: message.table, id: message.id, attempt: message.attempt });
}

export function encodeDeadLetter(letter: DeadLetter): string {
  return JSON.stringify({ table: letter.table, id: letter.id, attempt: letter.attempt, error: letter.error });
}

/** A message's bytes back to a DispatchMessage; a ConfigError saying what is wrong for anything else. */
export function decodeDispatch(raw: string): DispatchMessage {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new ConfigError(`not JSON: ${JSON.stringify(raw.slice(0, 80))}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ConfigError('not a JSON object');
  const { table, id, attempt } = value as Record<string, unknown>;
  if (typeof table !== 'string' || table === '') throw new ConfigError('table must be a non-empty string');
  const idOk = (typeof id === 'number' && Number.isSafeInteger(id)) || (typeof id === 'string' && id !== '' && id.length <= 255);
  if (!idOk) throw new ConfigError(`id must be an integer or a non-empty string, got ${JSON.stringify(id)}`);
  if (typeof attempt !== 'number' || !Number.isSafeInteger(attempt) || attempt < 1) throw new ConfigError(`attempt must be a positive integer, got ${JSON.stringify(attempt)}`);
  return { table, id: id as string | number, attempt };
}

/** The dead letter of a row given up: `table` as the broker's queue was opened for. */
export function deadLetterFor(table: string, row: { id: JobId; attempt: number; error: string }): DeadLetter {
  return { table, id: dispatchId(row.id), attempt: row.attempt, error: row.error };
}

/** A row id as it travels: numbers stay numbers where they are exact, bigints become strings. */
export function dispatchId(id: JobId): string | number {
  return typeof id === 'bigint' ? id.toString() : id;
}

/**
 * The package that serves each published broker scheme; any other scheme `x` is `@statusq/broker-x`, as
 * adapters are found by connect().
 */
export const PUBLISHED_BROKERS: Readonly<Record<string, string>> = {
  amqp: '@statusq/broker-rabbitmq',
  amqps: '@statusq/broker-rabbitmq',
  nats: '@statusq/broker-nats',
};
