import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { SETTLE_CHANNEL_PREFIX, notifyChannel, postgresDialect, settleChannel } from './postgres-dialect.js';

/** Shortest pause between attempts to (re)open the listening connection after one failed. */
const LISTENER_RETRY_MS = 1000;

/**
 * Longest a probe NOTIFY may take to reach the listening connection before notifications count as lost on
 * that path. Straight to the server it arrives in milliseconds; through a transaction-mode pooler never.
 */
export const NOTIFY_PROBE_TIMEOUT_MS = 5000;

/** The probe's channels: a random one each time, so no worker wakes for it and nothing else notifies it. */
const PROBE_CHANNEL_PREFIX = 'statusq_probe_';

/** Sends `NOTIFY channel, payload` the way the store's own statements go (through its pool). */
export type SendNotify = (channel: string, payload: string) => Promise<void>;

/** Whether notifications reach the listening connection: not probed yet, probed and arrived, probed and lost. */
export type NotificationDelivery = 'unknown' | 'delivered' | 'lost';

type Waiter = () => void;

/**
 * How long a settle channel stays LISTENed after its last wait ended: the waitFor watcher's reads between two
 * waits keep it, and a settle committed during one is heard, not lost to an UNLISTEN and a fresh LISTEN. Past it
 * the channel is dropped, since every settle of the table would otherwise reach this process for nothing.
 */
const SETTLE_LINGER_MS = 2_000;

/** More ids heard between two reads than this: the next read takes every awaited row instead. */
const MAX_SETTLED_IDS = 10_000;

/** A table's settle channel while Queue.waitFor waits on it (see waitForSettles). */
interface SettleChannel {
  /** The ids heard since the last wait took them. */
  readonly ids: Set<string>;
  /** Heard something that names no row (an empty payload, too many ids, a LISTEN just begun): every awaited row is read. */
  any: boolean;
  waits: number;
  readonly waiters: Set<Waiter>;
  linger: NodeJS.Timeout | null;
}

/**
 * Whether a NOTIFY sent through `send` reaches `listener` (connected, not yet listening on the probe's
 * channel): the milliseconds it took, or null when it did not arrive within `timeoutMs`. This is the
 * capability itself, whatever sits between: a transaction-mode pooler (PgBouncer's pool_mode = transaction)
 * runs the LISTEN on whichever server connection the statement got and hands that connection to other
 * clients afterwards, so the notification never comes back. Rejects, with no verdict, when the listening
 * connection fails or ends meanwhile or the NOTIFY cannot be sent.
 */
export async function notificationRoundTrip(listener: pg.Client, send: SendNotify, timeoutMs = NOTIFY_PROBE_TIMEOUT_MS): Promise<number | null> {
  const channel = `${PROBE_CHANNEL_PREFIX}${randomBytes(8).toString('hex')}`;
  const payload = randomBytes(8).toString('hex');
  let arrivedAt: number | null = null;
  let settle: (heard: boolean | Error) => void = () => undefined;
  const outcome = new Promise<boolean | Error>((resolve) => (settle = resolve));
  const onNotification = (message: pg.Notification) => {
    if (message.channel !== channel || message.payload !== payload) return;
    arrivedAt = performance.now();
    settle(true);
  };
  const onGone = () => settle(new Error('the listening connection closed during the NOTIFY probe'));
  listener.on('notification', onNotification);
  listener.on('end', onGone);
  listener.on('error', onGone);
  let timer: NodeJS.Timeout | undefined;
  try {
    await listener.query(`LISTEN ${postgresDialect.quoteIdentifier(channel)}`);
    const sentAt = performance.now();
    await send(channel, payload);
    // Timed from the send's return, so a pool slow to lend a connection does not count against delivery.
    timer = setTimeout(() => settle(false), timeoutMs);
    const heard = await outcome;
    if (heard instanceof Error) throw heard;
    if (!heard) return null;
    await listener.query(`UNLISTEN ${postgresDialect.quoteIdentifier(channel)}`);
    return (arrivedAt ?? performance.now()) - sentAt;
  } finally {
    clearTimeout(timer);
    listener.off('notification', onNotification);
    listener.off('end', onGone);
    listener.off('error', onGone);
  }
}

/**
 * PostgresStore's wake-ups: the channels of the tables the store described or claimed from, one dedicated
 * connection that LISTENs on them (opened on the first wait, see `notifyChannel`), and the waits it ends.
 * initTable and migrateTable install triggers (postgres-schema.ts) that NOTIFY on INSERT and on an UPDATE
 * back to pending. A dropped listening connection is reopened on the next wait; polling stays the fallback
 * throughout.
 *
 * A connection counts as listening only once a probe NOTIFY, sent through the store's pool, came back on
 * it (notificationRoundTrip). When one does not, notifications are lost on this path for good (a
 * transaction-mode pooler): the listener says so once (`onLost`), closes, and every wait is a plain timer.
 */
export class PostgresListener {
  private readonly channels = new Set<string>();
  private readonly listening = new Set<string>();
  private listener: pg.Client | null = null;
  /** The connection being opened and probed, which close() ends so that a probe cannot hold it up. */
  private opening: pg.Client | null = null;
  private listenerOpening: Promise<void> | null = null;
  private listenerFailedAt = 0;
  private listenQueue: Promise<void> = Promise.resolve();
  private waiters = new Set<Waiter>();
  /** Settle channels by name, while waited on or lingering. */
  private readonly settles = new Map<string, SettleChannel>();
  /** A notification arrived while nobody was waiting: the next wait returns at once. */
  private notified = false;
  private closed = false;
  private verdict: NotificationDelivery = 'unknown';

  /**
   * `clientConfig`: the listening connection's (the pooled connections' own, or those of the store's
   * listenUrl); `track` keeps its socket among the store's, so close() can cut it like the others; `send`
   * sends the probe's NOTIFY through the store's pool; `onLost` hears once that notifications are lost.
   */
  constructor(
    private readonly clientConfig: pg.ClientConfig,
    private readonly queryTimeoutMs: number,
    private readonly track: (client: pg.Client) => void,
    private readonly send: SendNotify,
    private readonly onLost: () => void,
    private readonly probeTimeoutMs = NOTIFY_PROBE_TIMEOUT_MS,
  ) {}

  /** Remembers a table whose channel the listener should LISTEN on. */
  watch(table: string): void {
    const channel = notifyChannel(table);
    if (this.channels.has(channel)) return;
    this.channels.add(channel);
    if (this.listener) this.syncChannels(this.listener);
  }

  /** A claim starts: whatever a notification announced before it, this claim will see. */
  claimStarts(): void {
    this.notified = false;
  }

  /**
   * Resolves on a NOTIFY on one of the channels, after `timeoutMs`, or at once when `signal` aborts or a
   * notification arrived since the last claim.
   */
  async wait(timeoutMs: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted || this.closed) return;
    if (this.notified) {
      this.notified = false;
      return;
    }
    // Opening the listener is not awaited: until it is up, this wait is plain polling.
    void this.ensureListener();
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, timeoutMs));
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(done);
    });
  }

  /**
   * Queue.waitFor's wake-up (Store.waitForChange): resolves with the ids the table's settle trigger sent
   * since the last call took them, at once when there are some; null when what was heard names no row, after
   * `timeoutMs`, and when `signal` aborts (which takes nothing). The settle channel is LISTENed from the first
   * call until SETTLE_LINGER_MS after the last, apart from the workers' channels, and its LISTEN taking
   * effect counts as a settle of any row (one may have been missed before it).
   */
  async waitForSettles(table: string, timeoutMs: number, signal: AbortSignal): Promise<readonly string[] | null> {
    if (signal.aborted || this.closed) return null;
    const name = settleChannel(table);
    let channel = this.settles.get(name);
    if (!channel) {
      channel = { ids: new Set(), any: false, waits: 0, waiters: new Set(), linger: null };
      this.settles.set(name, channel);
      if (this.listener) this.syncChannels(this.listener);
    }
    if (channel.linger) clearTimeout(channel.linger);
    channel.linger = null;
    channel.waits++;
    try {
      if (!channel.any && channel.ids.size === 0) {
        void this.ensureListener();
        const heard = channel;
        const aborted = await new Promise<boolean>((resolve) => {
          const done = (wasAborted: boolean) => () => {
            clearTimeout(timer);
            signal.removeEventListener('abort', onAbort);
            heard.waiters.delete(onHeard);
            resolve(wasAborted);
          };
          const onAbort = done(true);
          const onHeard = done(false);
          const timer = setTimeout(onHeard, Math.max(0, timeoutMs));
          signal.addEventListener('abort', onAbort, { once: true });
          heard.waiters.add(onHeard);
        });
        if (aborted || this.closed) return null;
      }
      const ids = channel.any || channel.ids.size === 0 ? null : [...channel.ids];
      channel.any = false;
      channel.ids.clear();
      return ids;
    } finally {
      const lingering = channel;
      if (--lingering.waits === 0 && !this.closed) {
        lingering.linger = setTimeout(() => {
          if (this.settles.get(name) !== lingering || lingering.waits > 0) return;
          this.settles.delete(name);
          if (this.listener) this.syncChannels(this.listener);
        }, SETTLE_LINGER_MS);
        lingering.linger.unref();
      }
    }
  }

  /** The channels the listening connection LISTENs on; none while it is down. */
  get listeningChannels(): readonly string[] {
    return this.listener ? [...this.listening] : [];
  }

  /** What the last probe found; `lost` is final. */
  get delivery(): NotificationDelivery {
    return this.verdict;
  }

  /**
   * Opens the listening connection now (it is otherwise opened by the first wait) and waits until it
   * listens, or until its probe found notifications lost.
   */
  async listen(): Promise<void> {
    await this.ensureListener();
    await this.listenQueue;
  }

  /**
   * The probe alone, on a connection of its own that is closed afterwards (`statusq doctor`): the
   * milliseconds a NOTIFY took to arrive, or null when it did not within the probe's timeout. Rejects when
   * the connection cannot be opened or the NOTIFY sent.
   */
  async probe(): Promise<number | null> {
    const client = new pg.Client({ ...this.clientConfig, query_timeout: this.queryTimeoutMs });
    client.on('error', () => undefined);
    this.track(client);
    try {
      await client.connect();
      return await notificationRoundTrip(client, this.send, this.probeTimeoutMs);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** Ends every wait at once and then the listening connection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const wake of [...this.waiters]) wake();
    for (const channel of this.settles.values()) {
      if (channel.linger) clearTimeout(channel.linger);
      for (const wake of [...channel.waiters]) wake();
    }
    this.settles.clear();
    // A listener still connecting or probing is ended here; its opening sees `closed` and gives up.
    void this.opening?.end().catch(() => undefined);
    await this.listenerOpening;
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => undefined);
  }

  private ensureListener(): Promise<void> {
    if (this.closed || this.listener || this.verdict === 'lost') return Promise.resolve();
    if (this.listenerOpening) return this.listenerOpening;
    if (Date.now() - this.listenerFailedAt < LISTENER_RETRY_MS) return Promise.resolve();
    const opening = this.openListener().then(
      () => undefined,
      () => {
        this.listenerFailedAt = Date.now();
      },
    );
    this.listenerOpening = opening.finally(() => {
      this.listenerOpening = null;
    });
    return this.listenerOpening;
  }

  private async openListener(): Promise<void> {
    // pg's own per-statement timeout bounds the LISTENs; on a pipelining connection it destroys the socket.
    const client = new pg.Client({ ...this.clientConfig, query_timeout: this.queryTimeoutMs });
    this.track(client);
    const drop = () => {
      if (this.listener === client) {
        this.listener = null;
        this.listening.clear();
        this.listenerFailedAt = 0;
      }
    };
    client.on('error', drop);
    client.on('end', drop);
    client.on('notification', (message) => {
      if (message.channel.startsWith(PROBE_CHANNEL_PREFIX)) return;
      const settled = this.settles.get(message.channel);
      if (settled) this.heardSettle(settled, message.payload ?? '');
      // A settle channel just UNLISTENed may still deliver; it is never the workers' business.
      else if (!this.isSettleChannel(message.channel)) this.wakeAll();
    });
    this.opening = client;
    let tookMs: number | null;
    try {
      await client.connect();
      if (this.closed) throw new Error('the store closed');
      tookMs = await notificationRoundTrip(client, this.send, this.probeTimeoutMs);
      if (this.closed) throw new Error('the store closed');
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    } finally {
      this.opening = null;
    }
    if (tookMs === null) {
      this.verdict = 'lost';
      await client.end().catch(() => undefined);
      // The waits in progress keep their timers: from here on the worker polls.
      this.onLost();
      return;
    }
    this.verdict = 'delivered';
    this.listener = client;
    this.syncChannels(client);
    await this.listenQueue;
    // Rows may have arrived while nobody listened (before the first wait, or while reconnecting).
    this.wakeAll();
  }

  /**
   * LISTENs on every known channel (the workers' and the waited-on settle channels) the listener does not
   * listen on yet, and UNLISTENs settle channels no longer waited on, one statement at a time.
   */
  private syncChannels(client: pg.Client): void {
    this.listenQueue = this.listenQueue.then(async () => {
      const wanted = [...this.channels, ...this.settles.keys()];
      const dropped = [...this.listening].filter((channel) => this.isSettleChannel(channel) && !this.settles.has(channel));
      try {
        for (const channel of wanted) {
          if (this.listener !== client || this.listening.has(channel)) continue;
          await client.query(`LISTEN ${postgresDialect.quoteIdentifier(channel)}`);
          this.listening.add(channel);
          const settled = this.settles.get(channel);
          if (settled) this.heardSettle(settled, '');
        }
        for (const channel of dropped) {
          if (this.listener !== client) return;
          await client.query(`UNLISTEN ${postgresDialect.quoteIdentifier(channel)}`);
          this.listening.delete(channel);
        }
      } catch {
        // The connection broke; `drop` resets it and the next wait reopens it.
        return;
      }
    });
  }

  private isSettleChannel(channel: string): boolean {
    return this.settles.has(channel) || channel.startsWith(SETTLE_CHANNEL_PREFIX);
  }

  /** A settle of the row named `payload` (empty: of some row) reached its channel. */
  private heardSettle(channel: SettleChannel, payload: string): void {
    if (payload === '' || channel.ids.size >= MAX_SETTLED_IDS) {
      channel.any = true;
      channel.ids.clear();
    } else if (!channel.any) channel.ids.add(payload);
    for (const wake of [...channel.waiters]) wake();
  }

  private wakeAll(): void {
    if (this.waiters.size === 0) {
      this.notified = true;
      return;
    }
    for (const wake of [...this.waiters]) wake();
  }
}
