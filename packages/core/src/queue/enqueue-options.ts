/** What enqueue takes and gives back: its options and each item's outcome (Queue.enqueue, Queue.enqueueDetailed). */
import type { Broker } from '../broker/broker.js';
import type { JobId } from '../store/store.js';

export interface EnqueueOptions {
  /** Commit every `chunk` rows on their own instead of all rows in one transaction. Not with `transaction`. */
  chunk?: number | undefined;
  /** How messages name item `index` (0-based); default `item N`. The CLI names file lines. */
  describeItem?: ((index: number) => string) | undefined;
  /** How messages name the key option when a key it gave is refused; default `the key option`. The CLI says `--key`. */
  describeKey?: string | undefined;
  /**
   * The application's open transaction, to write the rows in (the outbox pattern: the jobs commit with the
   * application's own writes, or not at all). What the adapter takes (Store.runnerFor): a knex transaction
   * (`trx`), or the driver's connection that began it (the client, pooled client, connection or database
   * object of the adapter's own driver; see its runnerFor). It must be inside an open transaction: one that is not (each INSERT would commit
   * on its own) is a ConfigError before anything is written. statusq runs only the INSERTs on it: no BEGIN,
   * COMMIT or ROLLBACK, and no retry, since a retry inside someone else's transaction could repeat or reorder
   * writes the caller cannot see.
   */
  transaction?: unknown;
  /**
   * Delayed jobs: the rows are pending but not claimed before `delayMs` milliseconds from the database's now
   * (never this process's clock). Needs a `next_attempt_at` column (`migrate --with delays`, or `retries`);
   * a table without one is a SchemaError before anything is written. Not with `runAt`.
   */
  delayMs?: number | undefined;
  /**
   * Delayed jobs: the rows are not claimed before this instant (a Date, or ISO 8601 text with a time zone:
   * `2026-12-01T10:00:00Z`), as the database's clock reads it. A time already past is due at once. Not with
   * `delayMs`.
   */
  runAt?: Date | string | undefined;
  /**
   * The rows' priority: higher is claimed first (then the queue order). An integer from -2147483648 to
   * 2147483647; rows enqueued without one have 0. Needs a `priority` column (`migrate --with priority`).
   */
  priority?: number | undefined;
  /**
   * The rows' kind: which handler runs them (a worker's `handlers` by kind). 1 to 100 letters, digits or
   * `_ . : / -`. Rows enqueued without one have none, and only a worker with a single `handler` claims them.
   * Needs a kind column (`migrate --with kinds`, or the application's own through `columns.kind`).
   */
  kind?: string | undefined;
  /**
   * The rows' group (a URL's host, a tenant): workers with a group limit (`groupConcurrency`, `groupRate`) keep
   * each group within it fleet-wide. Text of 1 to 255 characters or a whole number. Needs a group column
   * (`migrate --with groups`, or the application's own through `columns.group`).
   */
  group?: string | number | undefined;
  /**
   * Deduplication key: while a row with this key is pending or processing, enqueueing it again inserts nothing
   * and reports that row's id (EnqueueOutcome.duplicate); once the row settles (done, abuse, failed) the key is
   * free. A string is the key of the one item of the call; for several items, a function gives each item's key
   * (null or undefined: that item has none). A key is 1 to 255 characters without surrounding whitespace, and
   * keys compare exactly ('Key' and 'key' are two). Race-safe: the database's key index decides between
   * enqueuers at the same moment. Keyed rows commit one at a time, in item order (not with `chunk`). Needs a
   * `dedupe_key` column and its index (`migrate --with dedupe`; tables `init` makes have both). An item of an
   * application's table may set the `dedupe_key` column itself instead.
   */
  key?: string | ((item: unknown, index: number) => string | null | undefined) | undefined;
  /**
   * Publishes each new row to this broker right after the commit, so a consumer (a worker with `from`) starts
   * it without waiting for the relay's next pass: the lowest pick-up a table on a store without `listenNotify` can
   * have. The rows are written as dispatched; a publish that fails un-marks them and the relay publishes them
   * (the enqueue still succeeds: the rows are committed). A process that dies between the commit and the
   * publish leaves them to the relay's redispatch age. Not with delays, keys or the caller's transaction (the
   * relay publishes those), nor where the insert cannot tell the new row's id (no RETURNING and no
   * auto-increment id: the relay publishes those too); EnqueueOutcome.published says which rows went. Needs
   * the dispatch column (`migrate --with dispatch`).
   */
  dispatchTo?: Broker | undefined;
  /** With dispatchTo: called when the publish failed and the rows were left to the relay (the enqueue still resolves). */
  onDispatchError?: ((error: unknown) => void) | undefined;
}

/** What enqueue did with one item (Queue.enqueueDetailed). */
export interface EnqueueOutcome {
  /** The inserted row's id, or for a duplicate the id of the live row that holds the key (see Queue.enqueue on ids). */
  id: JobId | null;
  /** True when nothing was inserted because a pending or processing row already holds the item's key. */
  duplicate: boolean;
  /**
   * With dispatchTo: true when the broker confirmed this row's message. False when the publish failed (the
   * relay publishes the row) or the row's id did not come back from the insert. Absent without dispatchTo.
   */
  published?: boolean;
}
