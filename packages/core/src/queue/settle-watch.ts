import type { JobId, Row, Statement, Store } from '../store/store.js';
import type { ResolvedTable } from '../protocol/table.js';

/**
 * The watcher reads its rows again WAIT_FOR_FIRST_MS after a waiter joins, doubling up to WAIT_FOR_MAX_MS
 * between reads: a job that settles quickly is seen soon, and waiters on long jobs cost one read a second
 * together. The store's settle wake-up (Store.waitForChange) ends each wait early; the backoff bounds how
 * late a wake-up that is missed or that the store does not have (a table migrated before its settle trigger,
 * notifications lost behind a pooler) leaves an outcome.
 */
export const WAIT_FOR_FIRST_MS = 10;
export const WAIT_FOR_MAX_MS = 1_000;

/** Ids per read: a statement's id list stays far below any server's statement or parameter limit. */
const IDS_PER_READ = 500;

/** What a read found of an awaited row: the row, or nothing (no row has the id, or not any more). */
type Seen = (row: Row | undefined, firstRead: boolean) => void;

interface Waiter {
  readonly id: JobId;
  readonly seen: Seen;
  /** Fails the wait (a read that failed). */
  readonly fail: (error: unknown) => void;
  read: boolean;
}

/**
 * Queue.waitFor's rows of one table, read by one loop for every waiter: each pass reads every awaited row
 * the wake-up named (or all of them) in one SELECT per IDS_PER_READ ids, so N waiters cost what one does.
 * The loop runs only while someone waits. A waiter is read once as it joins (after it is registered, so a
 * settle before that read is seen by it, and one after it by a later wake-up or the backoff).
 */
export class SettleWatcher {
  /** Waiters by id key (see `key`). */
  private readonly waiting = new Map<string, Set<Waiter>>();
  /** Ids to read on the next pass; 'all' for every awaited one. */
  private dirty: Set<string> | 'all' = new Set();
  private running = false;
  private interval = WAIT_FOR_FIRST_MS;
  /** Ends the loop's wait when a waiter joins, so its first read comes at once. */
  private nudge = new AbortController();

  constructor(
    private readonly store: Store,
    private readonly table: ResolvedTable,
    /** The row's id as the waiter's and the wake-up's ids are compared: integers by value, anything else by its text. */
    private readonly key: (id: unknown) => string,
    private readonly outcomesOf: (ids: readonly JobId[]) => Statement,
  ) {}

  /** Registers a waiter for `id`; `seen` hears every read of its row until `leave` is called. */
  watch(id: JobId, seen: Seen, fail: (error: unknown) => void): () => void {
    const key = this.key(id);
    const waiter: Waiter = { id, seen, fail, read: false };
    let set = this.waiting.get(key);
    if (!set) this.waiting.set(key, (set = new Set()));
    set.add(waiter);
    if (this.dirty !== 'all') this.dirty.add(key);
    this.interval = WAIT_FOR_FIRST_MS;
    this.nudge.abort();
    if (!this.running) {
      this.running = true;
      void this.loop();
    }
    return () => {
      set.delete(waiter);
      if (set.size === 0 && this.waiting.get(key) === set) this.waiting.delete(key);
      // The last waiter gone: the loop's wait ends now, so no timer of it keeps a finished process alive.
      if (this.waiting.size === 0) this.nudge.abort();
    };
  }

  private async loop(): Promise<void> {
    try {
      while (this.waiting.size > 0) {
        const keys = this.dirty === 'all' ? [...this.waiting.keys()] : [...this.dirty].filter((key) => this.waiting.has(key));
        this.dirty = new Set();
        for (let at = 0; at < keys.length; at += IDS_PER_READ) await this.read(keys.slice(at, at + IDS_PER_READ));
        if (this.waiting.size === 0) break;
        if (this.dirty.size > 0) continue;
        if (this.nudge.signal.aborted) this.nudge = new AbortController();
        const timeoutMs = this.interval;
        this.interval = Math.min(this.interval * 2, WAIT_FOR_MAX_MS);
        // A wake-up that fails is one that named nothing: the rows are read, and a broken store fails that read.
        const named = this.store.waitForChange ? await this.store.waitForChange(timeoutMs, this.nudge.signal, this.table).catch(() => null) : await pause(timeoutMs, this.nudge.signal);
        // A nudge put its own key in `dirty` and left the store's wake-up untaken (null).
        if (named === null) {
          if (!this.nudge.signal.aborted) this.dirty = 'all';
        } else for (const id of named) this.dirty.add(this.key(id));
      }
    } finally {
      this.running = false;
      // A waiter that joined as the loop ended must not be left without one.
      if (this.waiting.size > 0) {
        this.running = true;
        void this.loop();
      }
    }
  }

  private async read(keys: readonly string[]): Promise<void> {
    const waiters = keys.flatMap((key) => [...(this.waiting.get(key) ?? [])]);
    if (waiters.length === 0) return;
    let rows: Row[];
    try {
      rows = (await this.store.execute(this.outcomesOf([...new Map(waiters.map((w) => [this.key(w.id), w.id])).values()]))).rows;
    } catch (error) {
      for (const waiter of waiters) waiter.fail(error);
      return;
    }
    const found = new Map(rows.map((row) => [this.key(row.id), row]));
    for (const waiter of waiters) {
      const first = !waiter.read;
      waiter.read = true;
      waiter.seen(found.get(this.key(waiter.id)), first);
    }
  }
}

/** `ms`, or until `signal` aborts: the wake-up of a store that has none. Nothing it can name, so every row is read. */
function pause(ms: number, signal: AbortSignal): Promise<null> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(null);
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve(null);
    }
  });
}
