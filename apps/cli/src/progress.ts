// `--progress`: one live status line on standard error for `work` and `enqueue --file`.
//
// The line stays on the cursor's row (drawn as carriage return, text, erase to the end of the row), never
// followed by a newline until it stops. Every log line written while it is drawn starts by erasing the row,
// so a log line takes the row over whole and the next redraw lands on the row below: log lines stay intact,
// and the status line never piles up in the scrollback. This holds even when several processes share the
// terminal (`work --processes`: the children log, the launcher draws) because each write is one write(2) that
// needs nothing from the others: log-update's model (the cursor parked under a block it erases upwards)
// would erase a child's log line, and cli-progress saves and restores a cursor position that scrolling
// invalidates.
import { statSync } from 'node:fs';
import ansiEscapes from 'ansi-escapes';
import { ConfigError, type Queue, type SupervisorEvent, type Worker, type WorkerCounters } from '@statusq/core';
import { raceDeadline, type Store } from '@statusq/core/adapter';
import { optionalString, type Flags } from './args.js';
import type { LogDestination } from './log.js';

export const PROGRESS_MODES = ['auto', 'on', 'off'] as const;
export type ProgressMode = (typeof PROGRESS_MODES)[number];

/** How a status line is shown: redrawn in place on a terminal, or whole lines now and then. */
export type ProgressSurface = 'tty' | 'plain';

/** A terminal redraw at most this often, whatever the job rate. */
export const REDRAW_INTERVAL_MS = 100;
/** Without a terminal (`--progress on`), a plain line this often. */
export const PLAIN_INTERVAL_MS = 1_000;
/** jobs/s is measured over this last stretch, not the whole run. */
export const RATE_WINDOW_MS = 10_000;
/** The table is counted at most this often; a slow count stretches it (see pollBacklog). */
export const COUNT_INTERVAL_MS = 2_000;
/** How often a worker process under `--processes` sends its counters to the launcher. */
export const COUNTERS_INTERVAL_MS = 500;
/**
 * Set by a launcher that shows progress, for its children: `tty` or `plain`, the launcher's surface. The
 * children then send their counters over IPC and, on a shared terminal, erase its row before each log line.
 */
export const PROGRESS_IPC_VARIABLE = 'STATUSQ_PROGRESS_IPC';

const ERASE_ROW = ansiEscapes.eraseLine + ansiEscapes.cursorLeft;

/** `--progress auto|on|off` → where the line goes, or null. auto: a terminal on stderr, outside CI. */
export function progressSurface(flags: Flags, stream: { isTTY?: boolean } = process.stderr): ProgressSurface | null {
  const mode = optionalString(flags, 'progress') ?? 'auto';
  if (!(PROGRESS_MODES as readonly string[]).includes(mode)) throw new ConfigError(`--progress must be auto, on or off, got ${JSON.stringify(mode)}`);
  if (mode === 'off') return null;
  const tty = stream.isTTY === true;
  if (mode === 'auto' && (!tty || Boolean(process.env.CI))) return null;
  return tty ? 'tty' : 'plain';
}

interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/**
 * The status line: `render()` builds its text, called at most every REDRAW_INTERVAL_MS on a terminal (and
 * drawn only when the text changed or a log line took its row), every PLAIN_INTERVAL_MS otherwise.
 */
export class StatusLine {
  private timer: NodeJS.Timeout | null = null;
  private drawn = '';
  /** Whether the row under the cursor holds the line (a log line erased it otherwise). */
  private shown = false;

  constructor(
    readonly surface: ProgressSurface,
    private readonly render: () => string,
    private readonly stream: ProgressStream = process.stderr,
    /** Redraw at every tick even if the text is the same: other processes may have taken the row. */
    private readonly sharedTerminal = false,
  ) {}

  start(): this {
    const interval = this.surface === 'tty' ? REDRAW_INTERVAL_MS : PLAIN_INTERVAL_MS;
    this.timer = setInterval(() => this.draw(), interval);
    // A status line never keeps a finished command alive.
    this.timer.unref();
    if (this.surface === 'tty') {
      // A process.exit() past a stop timeout or a recycle: the shell's prompt must not land on the line.
      process.once('exit', this.eraseAtExit);
      this.draw();
    }
    return this;
  }

  private readonly eraseAtExit = () => {
    if (this.timer !== null && this.shown) this.stream.write(ERASE_ROW);
  };

  /** A log line is about to take the row: it erases it itself (see beside); the line is redrawn below it. */
  yieldRow(): void {
    this.shown = false;
  }

  /** The last state, left in place (a terminal) or as a last plain line; nothing more is drawn. */
  stop(): void {
    if (this.timer === null) return;
    clearInterval(this.timer);
    this.timer = null;
    if (this.surface === 'tty') {
      process.off('exit', this.eraseAtExit);
      this.draw(true);
      this.stream.write('\n');
    } else this.stream.write(`${this.render()}\n`);
  }

  private draw(force = false): void {
    if (this.surface === 'plain') {
      this.stream.write(`${this.render()}\n`);
      return;
    }
    // One column short of the width: a line that fills the row would wrap and leave its head behind. A
    // terminal of unknown size (0 columns: `script` without a terminal) is taken as 80 wide.
    const text = this.render().slice(0, (this.stream.columns || 80) - 1);
    if (!force && !this.sharedTerminal && this.shown && text === this.drawn) return;
    this.stream.write(`${ERASE_ROW}${text}`);
    this.drawn = text;
    this.shown = true;
  }
}

/**
 * A log destination that shares the terminal with a status line: each line starts by erasing the row, so
 * the status line it replaces leaves nothing behind. `line` is this process's own status line, or null
 * when another process draws it (a launcher's child). Left as it is when the log does not go to a terminal.
 */
export function besideStatusLine(destination: LogDestination, line: StatusLine | null): LogDestination {
  if (!destination.isTTY) return destination;
  return {
    isTTY: true,
    write: (text) => {
      line?.yieldRow();
      destination.write(`${ERASE_ROW}${text}`);
    },
  };
}

/** Rate over the last RATE_WINDOW_MS from (time, running total) samples; the start (total 0) stays until then. */
export class RateWindow {
  private readonly samples: Array<{ at: number; total: number }>;

  constructor(start = Date.now(), private readonly windowMs = RATE_WINDOW_MS) {
    this.samples = [{ at: start, total: 0 }];
  }

  /** Records `total` at `now` and returns the per-second rate over the window up to it. */
  rate(total: number, now = Date.now()): number {
    this.samples.push({ at: now, total });
    while (this.samples.length > 2 && now - this.samples[1]!.at >= this.windowMs) this.samples.shift();
    const first = this.samples[0]!;
    const seconds = (now - first.at) / 1000;
    return seconds > 0 ? (total - first.total) / seconds : 0;
  }
}

/** `h:mm:ss`, or `m:ss` under an hour. */
export function clock(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = String(seconds % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

const BAR_WIDTH = 20;

/** `[######--------------]  30%` */
export function bar(fraction: number): string {
  const clamped = Math.min(1, Math.max(0, Number.isFinite(fraction) ? fraction : 0));
  const filled = Math.round(clamped * BAR_WIDTH);
  return `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${String(Math.floor(clamped * 100)).padStart(3)}%`;
}

/** Time to do `left` at `rate` per second; `?` while nothing moves. */
function eta(left: number, rate: number): string {
  if (left <= 0) return clock(0);
  return rate > 0 ? clock((left / rate) * 1000) : '?';
}

/** part of whole, a whole of nothing being complete. */
function fraction(part: number, whole: number): number {
  return whole <= 0 ? 1 : part / whole;
}

function perSecond(rate: number): string {
  return rate >= 100 ? String(Math.round(rate)) : rate.toFixed(1);
}

/** A work run's outcomes so far: this process's worker, or the sum of a launcher's children. */
export interface WorkTally {
  done: number;
  failed: number;
  abuse: number;
  retried: number;
}

function settled(t: WorkTally): number {
  return t.done + t.failed + t.abuse;
}

export function tallyOf(counters: WorkerCounters): WorkTally {
  return { done: counters.completed, failed: counters.failed, abuse: counters.abused, retried: counters.retried };
}

/** The table's unfinished rows as last counted; `estimated`: past the count's cap, the planner's estimate. */
export interface Backlog {
  pending: number;
  processing: number;
  estimated: boolean;
}

/**
 * The one place the status line counts the table: Queue.monitoringCounts, as statusq_queue_rows, so a
 * table with millions of finished rows is not read whole every few seconds.
 */
export async function countBacklog(queue: Pick<Queue, 'monitoringCounts'>): Promise<Backlog> {
  const { counts, estimated } = await queue.monitoringCounts();
  return { pending: counts.pending, processing: counts.processing, estimated: estimated.includes('pending') || estimated.includes('processing') };
}

/**
 * Counts the backlog now, then again COUNT_INTERVAL_MS after each count ends (never two at once), or five
 * times as long as the last count took if that is longer: a table where counting is slow is counted
 * seldom. A failed count keeps the last numbers. Returns a stop function.
 */
export function pollBacklog(count: () => Promise<Backlog>, onCount: (backlog: Backlog) => void, intervalMs = COUNT_INTERVAL_MS): () => void {
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const tick = () => {
    const started = Date.now();
    count()
      .then(onCount, () => undefined)
      .finally(() => {
        if (stopped) return;
        timer = setTimeout(tick, Math.max(intervalMs, 5 * (Date.now() - started)));
        timer.unref();
      });
  };
  tick();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

/**
 * What `work` shows: the outcomes of this run, the table's backlog, jobs/s over the last seconds, the time
 * since it started; with --exit-when-empty a bar of done against what is left and an ETA at the recent rate.
 */
export class WorkProgress {
  private backlog: Backlog | null = null;
  /** Jobs settled when the backlog was counted: those settled since came out of it. */
  private settledAtCount = 0;
  private readonly window = new RateWindow();
  private readonly started = Date.now();
  readonly line: StatusLine;

  constructor(surface: ProgressSurface, private readonly tally: () => WorkTally, private readonly untilEmpty: boolean, sharedTerminal = false) {
    this.line = new StatusLine(surface, () => this.text(), process.stderr, sharedTerminal);
  }

  counted(backlog: Backlog): void {
    this.backlog = backlog;
    this.settledAtCount = settled(this.tally());
  }

  text(): string {
    const t = this.tally();
    const done = settled(t);
    const rate = this.window.rate(done);
    // The count is up to seconds old; the bar and the ETA take off what settled since (rows enqueued since
    // show at the next count).
    const left = this.backlog === null ? null : Math.max(0, this.backlog.pending + this.backlog.processing - (done - this.settledAtCount));
    // Most telling first: a narrow terminal cuts the end of the line.
    const about = this.backlog?.estimated ? '~' : '';
    const parts = [`done ${t.done} failed ${t.failed} abuse ${t.abuse}`, `pending ${about}${this.backlog?.pending ?? '?'}`, `${perSecond(rate)} jobs/s`];
    if (this.untilEmpty) parts.push(`ETA ${left === null ? '?' : eta(left, rate)}`);
    parts.push(`retried ${t.retried}`, `processing ${about}${this.backlog?.processing ?? '?'}`, `elapsed ${clock(Date.now() - this.started)}`);
    if (this.untilEmpty) parts.push(bar(left === null ? 0 : fraction(done, done + left)));
    return `work: ${parts.join(' | ')}`;
  }
}

/** The IPC message a worker process sends its launcher with its counters; `statusq` tells it from others. */
interface TallyMessage {
  statusq: 'progress';
  tally: WorkTally;
}

function isTallyMessage(message: unknown): message is TallyMessage {
  return typeof message === 'object' && message !== null && (message as TallyMessage).statusq === 'progress' && typeof (message as TallyMessage).tally === 'object';
}

/**
 * A worker process under a launcher that shows progress sends it its counters every interval over the IPC
 * channel (the metrics snapshots' channel). The returned function sends the last ones and resolves once
 * they are written, so the launcher's final line counts the last jobs of a clean exit.
 */
export function sendTallyToLauncher(worker: Worker, intervalMs = COUNTERS_INTERVAL_MS): () => Promise<void> {
  const send = () =>
    new Promise<void>((resolve) => {
      if (!process.send || !process.connected) return resolve();
      const message: TallyMessage = { statusq: 'progress', tally: tallyOf(worker.counters) };
      process.send(message, undefined, {}, () => resolve());
    });
  const timer = setInterval(() => void send(), intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await send();
  };
}

/** The launcher's sum of its children's tallies; a child that ended keeps its last one, as the run's. */
export class ChildTallies {
  private readonly byPid = new Map<number, WorkTally>();

  received(pid: number, message: unknown): void {
    if (isTallyMessage(message)) this.byPid.set(pid, message.tally);
  }

  total(): WorkTally {
    const sum: WorkTally = { done: 0, failed: 0, abuse: 0, retried: 0 };
    for (const t of this.byPid.values()) {
      sum.done += t.done;
      sum.failed += t.failed;
      sum.abuse += t.abuse;
      sum.retried += t.retried;
    }
    return sum;
  }
}

/**
 * What `enqueue --file` shows: while reading, the bytes read of the file's size (none for standard input);
 * while inserting, the rows committed of those read. Rates over the last seconds, an ETA where there is a total.
 */
export class EnqueueProgress {
  bytesRead = 0;
  rowsRead = 0;
  rowsInserted = 0;
  private inserting = false;
  private window = new RateWindow();
  private readonly started = Date.now();
  readonly line: StatusLine;

  constructor(surface: ProgressSurface, private readonly table: string, private readonly fileSize: number | null) {
    this.line = new StatusLine(surface, () => this.text());
  }

  /**
   * `store` as Queue.enqueue uses it, counting the rows of each batch it commits: reading is over, from now
   * on the rows inserted are what moves. Without --chunk that is one batch, all rows at the end.
   */
  countingInserts(store: Store): Store {
    this.inserting = true;
    this.window = new RateWindow();
    const executeBatch = async (statements: Parameters<Store['executeBatch']>[0]) => {
      const results = await store.executeBatch(statements);
      this.rowsInserted += statements.length;
      return results;
    };
    return new Proxy(store, {
      get: (target, key) => {
        if (key === 'executeBatch') return executeBatch;
        const value: unknown = Reflect.get(target, key, target);
        // Bound to the store itself: an adapter's private fields are not on the proxy.
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  text(): string {
    const elapsed = `elapsed ${clock(Date.now() - this.started)}`;
    let parts: string[];
    if (this.inserting) {
      const rate = this.window.rate(this.rowsInserted);
      const left = this.rowsRead - this.rowsInserted;
      parts = [`${this.rowsInserted} of ${this.rowsRead} rows inserted`, `${perSecond(rate)} rows/s`, `ETA ${eta(left, rate)}`, elapsed, bar(fraction(this.rowsInserted, this.rowsRead))];
    } else if (this.fileSize === null) parts = [`${this.rowsRead} rows read`, megabytes(this.bytesRead), elapsed];
    else {
      const rate = this.window.rate(this.bytesRead);
      const left = this.fileSize - this.bytesRead;
      parts = [`${this.rowsRead} rows read`, `${megabytes(this.bytesRead)} of ${megabytes(this.fileSize)}`, `ETA ${eta(left, rate)}`, elapsed, bar(fraction(this.bytesRead, this.fileSize))];
    }
    return `enqueue ${this.table}: ${parts.join(' | ')}`;
  }
}

/** The line of `enqueue --file FILE`, started; null without progress or without --file. */
export function enqueueProgress(surface: ProgressSurface | null, table: string, file: string | undefined): EnqueueProgress | null {
  if (surface === null || file === undefined) return null;
  let size: number | null = null;
  if (file !== '-') {
    try {
      size = statSync(file).size;
    } catch {
      // Reading it says why, in the command's own words.
    }
  }
  const progress = new EnqueueProgress(surface, table, size);
  progress.line.start();
  return progress;
}

function megabytes(bytes: number): string {
  return `${(bytes / 1_048_576).toFixed(1)} MB`;
}

/** How long the last count before the final line may take; past it the line keeps the numbers it had. */
const FINAL_COUNT_DEADLINE_MS = 2_000;

/** What `work` wires in: where its log lines go beside the line, what the launcher observes, and the stop. */
export interface WorkProgressHandle {
  logBeside(destination: LogDestination): LogDestination;
  /** The launcher's supervisor events (the children's tallies arrive as `message` events). */
  observe(event: SupervisorEvent): void;
  /** Counts the table a last time and leaves the final line; a child sends its last tally. */
  stop(): Promise<void>;
}

const NO_PROGRESS: WorkProgressHandle = { logBeside: (destination) => destination, observe: () => undefined, stop: async () => undefined };

/**
 * The progress of one `work` process: drawn by itself, or, under a launcher that shows it (the
 * PROGRESS_IPC_VARIABLE), sent to the launcher, its log lines erasing the launcher's line on a shared terminal.
 */
export function workProgress(surface: ProgressSurface | null, worker: Worker, untilEmpty: boolean): WorkProgressHandle {
  const launcherSurface = process.env.STATUSQ_SUPERVISED === '1' ? process.env[PROGRESS_IPC_VARIABLE] : undefined;
  if (launcherSurface === 'tty' || launcherSurface === 'plain') {
    const lastTally = sendTallyToLauncher(worker);
    return { ...NO_PROGRESS, logBeside: (d) => (launcherSurface === 'tty' ? besideStatusLine(d, null) : d), stop: lastTally };
  }
  if (surface === null) return NO_PROGRESS;
  return drawWorkProgress(new WorkProgress(surface, () => tallyOf(worker.counters), untilEmpty), () => countBacklog(worker.queue), async () => undefined);
}

/**
 * `work --processes` with progress: the launcher draws one line from its children's tallies (children
 * never draw) and counts the table itself over its own connection. `children` is the environment variable
 * to set for them.
 */
export async function launcherProgress(surface: ProgressSurface | null, openQueue: () => Promise<{ queue: Queue; close: () => Promise<void> }>, untilEmpty: boolean): Promise<WorkProgressHandle & { children: NodeJS.ProcessEnv }> {
  if (surface === null) return { ...NO_PROGRESS, children: {} };
  const tallies = new ChildTallies();
  const { queue, close } = await openQueue();
  const drawn = drawWorkProgress(new WorkProgress(surface, () => tallies.total(), untilEmpty, true), () => countBacklog(queue), close);
  return {
    ...drawn,
    observe: (event) => {
      if (event.type === 'message') tallies.received(event.pid, event.message);
    },
    children: { [PROGRESS_IPC_VARIABLE]: surface },
  };
}

function drawWorkProgress(progress: WorkProgress, count: () => Promise<Backlog>, close: () => Promise<void>): WorkProgressHandle {
  const stopCounting = pollBacklog(count, (backlog) => progress.counted(backlog));
  progress.line.start();
  return {
    logBeside: (destination) => besideStatusLine(destination, progress.line),
    observe: () => undefined,
    stop: async () => {
      stopCounting();
      try {
        progress.counted(await raceDeadline(count(), FINAL_COUNT_DEADLINE_MS, () => new Error('the final count took too long')));
      } catch {
        // The database is gone or slow: the line keeps the numbers it last had.
      }
      progress.line.stop();
      await close();
    },
  };
}
