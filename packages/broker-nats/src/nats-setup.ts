import { AckPolicy, DeliverPolicy, RetentionPolicy, StorageType, type ConsumerConfig, type ConsumerInfo, type JetStreamManager, type StreamInfo } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { BrokerError } from '@statusq/core/adapter';
import { isNotFound, toSetupError } from './nats-errors.js';
import type { NatsLayout } from './nats-layout.js';

export interface SetupOptions {
  ackWaitMs: number;
  onWarning: (message: string) => void;
}

/**
 * Creates the queue's streams and its shared consumer, or checks the ones already there: idempotent, so every
 * process runs it at connect and two starting at once both succeed. What an operator may tune on an existing
 * stream (limits, replicas, storage) is left as found; what statusq depends on (work-queue retention, the
 * subjects, a pull consumer with explicit acks) is checked, and a difference is BrokerError Refused saying what
 * to change. The consumer's ack wait, max deliver and max ack pending are set to this process's values: the
 * last process to connect wins, so give every process of a table the same ackWaitMs.
 */
export async function ensureLayout(jsm: JetStreamManager, layout: NatsLayout, options: SetupOptions): Promise<void> {
  const dispatch = await ensureStream(jsm, layout.stream, {
    name: layout.stream,
    subjects: [layout.dispatchSubject],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    description: `statusq dispatch messages of ${layout.queue}`,
  });
  const fix = `delete it (nats stream rm ${layout.stream}; its messages are only hints, the table is the record) so that statusq creates it, or give this table another queue`;
  if (dispatch.config.retention !== RetentionPolicy.Workqueue) {
    throw new BrokerError('Refused', `the NATS stream ${layout.stream} exists with retention "${dispatch.config.retention}"; statusq needs "workqueue" (each message removed once acked): ${fix}`, 'StreamConfig');
  }
  if (!dispatch.config.subjects?.includes(layout.dispatchSubject)) {
    throw new BrokerError('Refused', `the NATS stream ${layout.stream} exists on subjects ${JSON.stringify(dispatch.config.subjects ?? [])}, not ${layout.dispatchSubject} (another queue whose name maps to the same stream?): ${fix}`, 'StreamConfig');
  }
  if (dispatch.config.storage === StorageType.Memory) {
    options.onWarning(`the NATS stream ${layout.stream} keeps its messages in memory: a server restart loses them and the relay's redispatch has to find those rows again`);
  }

  const dead = await ensureStream(jsm, layout.deadStream, {
    name: layout.deadStream,
    subjects: [layout.deadSubject],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    description: `statusq dead letters of ${layout.queue}`,
  });
  if (!dead.config.subjects?.includes(layout.deadSubject)) {
    throw new BrokerError('Refused', `the NATS stream ${layout.deadStream} exists on subjects ${JSON.stringify(dead.config.subjects ?? [])}, not ${layout.deadSubject}: delete it (nats stream rm ${layout.deadStream}) or give this table another queue`, 'StreamConfig');
  }

  await ensureConsumer(jsm, layout, options);
}

async function ensureStream(jsm: JetStreamManager, name: string, config: Parameters<JetStreamManager['streams']['add']>[0]): Promise<StreamInfo> {
  const existing = await streamInfo(jsm, name);
  if (existing) return existing;
  try {
    return await jsm.streams.add(config);
  } catch (error) {
    // Another process created it between the look and the add (with our config the server answers that
    // add with the stream; with a different one it refuses): what is there now is what gets checked.
    const raced = await streamInfo(jsm, name);
    if (raced) return raced;
    throw toSetupError(error, `creating the NATS stream ${name} on ${JSON.stringify(config.subjects)}`);
  }
}

async function streamInfo(jsm: JetStreamManager, name: string): Promise<StreamInfo | null> {
  try {
    return await jsm.streams.info(name);
  } catch (error) {
    if (isNotFound(error)) return null;
    throw toSetupError(error, `reading the NATS stream ${name}`);
  }
}

async function ensureConsumer(jsm: JetStreamManager, layout: NatsLayout, options: SetupOptions): Promise<ConsumerInfo> {
  const tunable = {
    ack_wait: nanos(options.ackWaitMs),
    // Redelivery never ends: a message stands for a row, and the consumer's claim decides what it is worth.
    max_deliver: -1,
    // Each statusq consumer bounds its own unacked deliveries (its prefetch); a cap shared by all of them
    // would only starve the ones that start last.
    max_ack_pending: -1,
  } satisfies Partial<ConsumerConfig>;
  let info = await consumerInfo(jsm, layout);
  if (!info) {
    try {
      info = await jsm.consumers.add(layout.stream, {
        durable_name: layout.consumer,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        filter_subject: layout.dispatchSubject,
        description: 'statusq consumers of this table (shared: each message goes to one of them)',
        ...tunable,
      });
    } catch (error) {
      info = await consumerInfo(jsm, layout);
      if (!info) throw toSetupError(error, `creating the NATS consumer ${layout.consumer} on stream ${layout.stream}`);
    }
  }
  const config = info.config;
  const fix = `delete it (nats consumer rm ${layout.stream} ${layout.consumer}) so that statusq creates it`;
  if (config.deliver_subject) throw new BrokerError('Refused', `the NATS consumer ${layout.consumer} on stream ${layout.stream} is a push consumer; statusq needs a pull consumer: ${fix}`, 'ConsumerConfig');
  if (config.ack_policy !== AckPolicy.Explicit) {
    throw new BrokerError('Refused', `the NATS consumer ${layout.consumer} on stream ${layout.stream} has ack policy "${config.ack_policy}"; statusq needs "explicit": ${fix}`, 'ConsumerConfig');
  }
  if (config.filter_subject && config.filter_subject !== layout.dispatchSubject) {
    throw new BrokerError('Refused', `the NATS consumer ${layout.consumer} on stream ${layout.stream} filters ${config.filter_subject}; statusq needs ${layout.dispatchSubject}: ${fix}`, 'ConsumerConfig');
  }
  if (config.ack_wait !== tunable.ack_wait || config.max_deliver !== tunable.max_deliver || (config.max_ack_pending ?? -1) !== tunable.max_ack_pending) {
    try {
      info = await jsm.consumers.update(layout.stream, layout.consumer, tunable);
    } catch (error) {
      throw toSetupError(error, `updating the NATS consumer ${layout.consumer} on stream ${layout.stream} to ack_wait ${options.ackWaitMs} ms`);
    }
  }
  return info;
}

async function consumerInfo(jsm: JetStreamManager, layout: NatsLayout): Promise<ConsumerInfo | null> {
  try {
    return await jsm.consumers.info(layout.stream, layout.consumer);
  } catch (error) {
    if (isNotFound(error)) return null;
    throw toSetupError(error, `reading the NATS consumer ${layout.consumer} on stream ${layout.stream}`);
  }
}
