import pg from 'pg';
import { notifyChannel, postgresDialect } from './postgres-dialect.js';

/** Shortest pause between attempts to (re)open the listening connection after one failed. */
const LISTENER_RETRY_MS = 1000;

type Waiter = () => void;

/**
 * PostgresStore's wake-ups: the channels of the tables the store described or claimed from, one dedicated
 * connection that LISTENs on them (opened on the first wait, see `notifyChannel`), and the waits it ends.
 * initTable and migrateTable install triggers (postgres-schema.ts) that NOTIFY on INSERT and on an UPDATE
 * back to pending. A dropped listening connection is reopened on the next wait; polling stays the fallback
 * throughout.
 */
export class PostgresListener {
  private readonly channels = new Set<string>();
  private readonly listening = new Set<string>();
  private listener: pg.Client | null = null;
  private listenerOpening: Promise<void> | null = null;
  private listenerFailedAt = 0;
  private listenQueue: Promise<void> = Promise.resolve();
  private waiters = new Set<Waiter>();
  /** A notification arrived while nobody was waiting: the next wait returns at once. */
  private notified = false;
  private closed = false;

  /**
   * `clientConfig` is the pooled connections' (same server, types and time zone); `track` keeps the
   * listening connection's socket among the store's, so close() can cut it like the others.
   */
  constructor(
    private readonly clientConfig: pg.ClientConfig,
    private readonly queryTimeoutMs: number,
    private readonly track: (client: pg.Client) => void,
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

  /** The channels the listening connection LISTENs on; none while it is down. */
  get listeningChannels(): readonly string[] {
    return this.listener ? [...this.listening] : [];
  }

  /** Opens the listening connection now (it is otherwise opened by the first wait) and waits until it listens. */
  async listen(): Promise<void> {
    await this.ensureListener();
    await this.listenQueue;
  }

  /** Ends every wait at once and then the listening connection. */
  async close(): Promise<void> {
    this.closed = true;
    for (const wake of [...this.waiters]) wake();
    // A listener still connecting sees `closed` and ends itself.
    await this.listenerOpening;
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => undefined);
  }

  private ensureListener(): Promise<void> {
    if (this.closed || this.listener) return Promise.resolve();
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
    client.on('notification', () => this.wakeAll());
    await client.connect();
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.listener = client;
    this.syncChannels(client);
    await this.listenQueue;
    // Rows may have arrived while nobody listened (before the first wait, or while reconnecting).
    this.wakeAll();
  }

  /** LISTENs on every known channel the listener does not listen on yet, one statement at a time. */
  private syncChannels(client: pg.Client): void {
    this.listenQueue = this.listenQueue.then(async () => {
      for (const channel of this.channels) {
        if (this.listener !== client || this.listening.has(channel)) continue;
        try {
          await client.query(`LISTEN ${postgresDialect.quoteIdentifier(channel)}`);
          this.listening.add(channel);
        } catch {
          // The connection broke; `drop` resets it and the next wait reopens it.
          return;
        }
      }
    });
  }

  private wakeAll(): void {
    if (this.waiters.size === 0) {
      this.notified = true;
      return;
    }
    for (const wake of [...this.waiters]) wake();
  }
}
