import type { Queue, SupervisorEvent, Worker, WorkerCounters } from '@statusq/core';
import { raceDeadline } from '@statusq/core/tools';
import type { LogDestination } from '../log.js';
import { RateWindow, bar, clock, eta, fraction, perSecond } from './format.js';
import { StatusLine, besideStatusLine, type ProgressSurface } from './status-line.js';

/** The table is counted at most this often; a slow count stretches it (see pollBacklog). */
export const COUNT_INTERVAL_MS = 2_000;
/** How often a worker process under `--processes` sends its counters to the launcher. */
export const COUNTERS_INTERVAL_MS = 500;

/**
 * Set by a launcher that shows progress, for its children: `tty` or `plain`, the launcher's surface. The
 * children then send their counters over IPC and, on a shared terminal, erase its row before each log line.
 */
export const PROGRESS_IPC_VARIABLE = 'STATUSQ_PROGRESS_IPC';

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
