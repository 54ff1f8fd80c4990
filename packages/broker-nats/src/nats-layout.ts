import { ConfigError } from '@statusq/core';

/**
 * Where one queue lives on a NATS server. The queue (`statusq.<table>`) is the subject prefix as written;
 * stream names are the queue with each `.` turned into `_`, because a stream name is a file name on the
 * server and may hold no `.`, `*`, `>`, whitespace or path separator.
 */
export interface NatsLayout {
  readonly queue: string;
  /** The work-queue stream holding the dispatch messages: `statusq_jobs` for queue `statusq.jobs`. */
  readonly stream: string;
  readonly dispatchSubject: string;
  /**
   * Dead letters are kept in a limits stream of their own (`<stream>_dead`): a work-queue stream deletes a
   * message once any consumer acks it, while dead letters are for whoever wants to read them, as often as
   * they like.
   */
  readonly deadStream: string;
  readonly deadSubject: string;
  /** The one durable pull consumer every statusq consumer of the table shares (work-queue delivery). */
  readonly consumer: string;
}

export const CONSUMER_NAME = 'statusq-consumers';

/** Leaves room for the `_dead` suffix within the 255 bytes a stream's directory name may take. */
const MAX_QUEUE_LENGTH = 200;

/**
 * A token of the queue: no wildcard (`*`, `>`), no whitespace or control character (they end a subject on
 * the wire), no path separator (the stream name becomes a directory).
 */
const TOKEN = /^[^\s*>/\\\p{Cc}]+$/u;

/** The layout of `queue`, or a ConfigError saying why it cannot name a NATS subject and stream. */
export function natsLayout(queue: string): NatsLayout {
  const shown = JSON.stringify(queue);
  if (typeof queue !== 'string' || queue === '') throw new ConfigError('the NATS queue name is empty: give a subject prefix such as statusq.jobs');
  if (queue.length > MAX_QUEUE_LENGTH) throw new ConfigError(`the NATS queue name ${shown} is longer than ${MAX_QUEUE_LENGTH} characters`);
  if (queue.startsWith('$')) throw new ConfigError(`the NATS queue name ${shown} starts with $, which NATS reserves for its own subjects ($JS, $SYS)`);
  for (const token of queue.split('.')) {
    if (token === '') throw new ConfigError(`the NATS queue name ${shown} has an empty token: dots separate non-empty parts (statusq.app.jobs)`);
    if (!TOKEN.test(token)) {
      throw new ConfigError(`the NATS queue name ${shown} holds ${JSON.stringify(token)}: a subject token may not contain *, >, whitespace, control characters, / or \\`);
    }
  }
  const stream = queue.replaceAll('.', '_');
  return {
    queue,
    stream,
    dispatchSubject: `${queue}.dispatch`,
    deadStream: `${stream}_dead`,
    deadSubject: `${queue}.dead`,
    consumer: CONSUMER_NAME,
  };
}
