import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';

/**
 * An idle worker on a database that changed since waiting began stays asleep at least this long, so an
 * application that writes other tables of the same file hundreds of times a second costs an idle worker at
 * most 1000 / MIN_WAIT_MS empty claims a second (a claim on an empty pending index: ~20 us), and a new row
 * waits at most this much longer than it would for NOTIFY.
 */
export const MIN_WAIT_MS = 20;

type Waiter = () => void;

/**
 * SqliteStore's wake-ups: SQLite has no NOTIFY, but every commit of any process writes the database file or
 * its -wal/-journal beside it, so a watch on their directory (inotify on Linux, FSEvents on macOS, one per
 * store, opened on the first wait) hears another process's INSERT within a millisecond or two. Without it an
 * idle worker polls at pollMaxMs (1 s by default), so a job enqueued by a web process after a quiet spell
 * waited up to a second; with it, a worker that sleeps 30 s between polls is woken at once (the bench's
 * `idle-pickup` scenario). A change is not proof of a new row (a settle, a checkpoint or another table's
 * write also change the file): it only ends the wait early, and the worker's claim decides. Polling stays
 * the fallback: a directory that cannot be watched (a network file system, a watch limit reached) leaves the
 * waits plain timeouts.
 */
export class SqliteWakeUps {
  private readonly directory: string;
  private readonly names: ReadonlySet<string>;
  private watcher: FSWatcher | null = null;
  private watchFailed = false;
  private readonly waiters = new Set<Waiter>();
  /** The database changed since the last claim started: the next wait returns (after MIN_WAIT_MS) at once. */
  private changed = false;
  private closed = false;

  constructor(filename: string) {
    const path = resolve(filename);
    this.directory = dirname(path);
    const base = basename(path);
    this.names = new Set([base, `${base}-wal`, `${base}-journal`]);
  }

  /** A claim starts: whatever changed before it, this claim will see. */
  claimStarts(): void {
    this.changed = false;
  }

  /** Resolves when the database changed (no sooner than MIN_WAIT_MS), after `timeoutMs`, or at once when `signal` aborts. */
  async wait(timeoutMs: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted || this.closed) return;
    this.ensureWatching();
    await new Promise<void>((done) => {
      let earliest: NodeJS.Timeout | null = null;
      const end = () => {
        clearTimeout(timer);
        if (earliest) clearTimeout(earliest);
        signal.removeEventListener('abort', end);
        this.waiters.delete(onChange);
        done();
      };
      const startedAt = performance.now();
      const onChange = () => {
        // Heard by this wait: the next one sleeps until the next change (claimStarts clears it too).
        this.changed = false;
        if (earliest) return;
        earliest = setTimeout(end, Math.max(0, MIN_WAIT_MS - (performance.now() - startedAt)));
      };
      const timer = setTimeout(end, Math.max(0, timeoutMs));
      signal.addEventListener('abort', end, { once: true });
      this.waiters.add(onChange);
      if (this.changed) onChange();
    });
  }

  /**
   * Resolves on the next change of the database (a settle too), after `timeoutMs`, or at once when `signal`
   * aborts: Queue.waitFor's wake-up. It leaves `changed` alone, which belongs to the worker's claims, so a
   * waitFor in a worker's process takes none of its wake-ups; and it has no MIN_WAIT_MS, since what it reads
   * on waking is the awaited rows by id, in one SELECT.
   */
  async waitForChange(timeoutMs: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted || this.closed) return;
    this.ensureWatching();
    await new Promise<void>((done) => {
      const end = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', end);
        this.waiters.delete(end);
        done();
      };
      const timer = setTimeout(end, Math.max(0, timeoutMs));
      signal.addEventListener('abort', end, { once: true });
      this.waiters.add(end);
    });
  }

  /** Whether the directory is watched (for tests: a wait before this is true may hear nothing). */
  get watching(): boolean {
    return this.watcher !== null;
  }

  /** Ends every wait at once and stops watching. */
  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = null;
    for (const wake of [...this.waiters]) wake();
  }

  private ensureWatching(): void {
    if (this.watcher || this.watchFailed || this.closed) return;
    try {
      const watcher = watch(this.directory, { persistent: false }, (_event, name) => {
        // Some platforms do not name the file; then any change in the directory counts.
        if (name === null || this.names.has(String(name))) this.noteChange();
      });
      watcher.on('error', () => {
        watcher.close();
        if (this.watcher === watcher) this.watcher = null;
        this.watchFailed = true;
      });
      this.watcher = watcher;
      // A row may have arrived between the claim that found nothing and this watch: the first wait claims again.
      this.noteChange();
    } catch {
      this.watchFailed = true;
    }
  }

  private noteChange(): void {
    this.changed = true;
    for (const wake of [...this.waiters]) wake();
  }
}
