import { fork, type ChildProcess } from 'node:child_process';
import { ConfigError } from '../protocol/errors.js';
import { backoffDelay } from '../store/retry.js';

/**
 * Exit codes shared by `statusq work` and its launcher, so a supervisor (systemd, Kubernetes, this
 * launcher) can tell what happened from the number alone.
 */
export const EXIT = {
  /** Finished: the queue was empty (--exit-when-empty) or a signal drained every job. */
  ok: 0,
  /** A runtime failure: the database kept failing, or children kept crashing at start-up. */
  failure: 1,
  /** Bad input: flags, names, handler; retrying cannot help, so it is never restarted. */
  badInput: 2,
  /**
   * Stopped past --stop-timeout: jobs still running were aborted and their rows handed back to the queue (or
   * left to their leases when the database did not answer), and the process exited without waiting for
   * their handlers, so none of them can still run when another worker takes the row.
   */
  handedBack: 3,
  /**
   * Recycled: a handler outlived --job-timeout and its grace period; its row was settled as a failed attempt
   * and the process exited to end the handler. Restart it (the launcher does, at once).
   */
  recycled: 4,
  /** `enqueue --wait --timeout D`: the row had not finished when D ran out (timeout(1)'s code, which scripts know). */
  timedOut: 124,
  /** Stopped hard: a second signal, or the grace period ran out with jobs still running. */
  stoppedHard: 130,
} as const;

export interface SupervisorOptions {
  /** Number of worker processes. */
  processes: number;
  /** The script each child runs (with node), and its arguments. */
  modulePath: string;
  args: readonly string[];
  env?: NodeJS.ProcessEnv;
  /** Delay between starting one child and the next, so they do not hit the database at the same instant. Default 200 ms. */
  staggerMs?: number;
  /** First restart delay after a crash; doubles per consecutive crash of that child, with jitter, up to restartMaxMs. Defaults 500 ms and 30 s. */
  restartBaseMs?: number;
  restartMaxMs?: number;
  /** A child that dies sooner than this after starting crashed at start-up. Default 5 s. */
  minUptimeMs?: number;
  /** Start-up crashes in a row (across children) after which the launcher gives up. Default 5. */
  maxStartupCrashes?: number;
  /** After the first SIGTERM/SIGINT, children get this long to drain before they are killed. Default 30 s. */
  gracePeriodMs?: number;
  /** Where children's stdout/stderr go. Default: inherited. */
  stdio?: 'inherit' | 'pipe';
}

export type SupervisorEvent =
  | { type: 'started'; slot: number; pid: number; restart: number }
  /**
   * `report`: what the child wrote to its report pipe (the file descriptor in STATUSQ_REPORT_FD), read to the
   * end: written synchronously, it survives the child's death, so the child can leave word in an exit hook.
   */
  | { type: 'exited'; slot: number; pid: number; code: number | null; signal: NodeJS.Signals | null; uptimeMs: number; report: string }
  | { type: 'restarting'; slot: number; delayMs: number }
  /** A message the child sent over its IPC channel (`process.send`), e.g. its metrics; not logged. */
  | { type: 'message'; slot: number; pid: number; message: unknown }
  | { type: 'draining'; signal: string }
  | { type: 'gave-up'; reason: string };

/** The child's file descriptor for its report pipe (0-2 are stdio, 3 the IPC channel). */
const REPORT_FD = 4;

interface Slot {
  index: number;
  child: ChildProcess | null;
  startedAt: number;
  restarts: number;
  consecutiveCrashes: number;
  finished: boolean;
  timer: NodeJS.Timeout | null;
}

/**
 * Runs P copies of a worker script as child processes and keeps them running: staggered starts, restart
 * with backoff when one dies, a stop with a clear error when children keep crashing at start-up, and a
 * drain on stop(): children get SIGTERM (they stop claiming and finish their jobs), and are killed once the
 * grace period ends; their claims then return to the queue by lease. Each child opens its own database
 * connections after it starts: nothing is inherited from the parent but arguments and environment.
 *
 * Children run in their own process group, so a terminal's Ctrl-C reaches only the launcher (which then
 * drains them once) rather than every process at once; each child has an IPC channel to the launcher and
 * drains by itself if the launcher dies.
 */
/** The bound of SupervisorOptions.processes, checked where it is parsed too (the CLI's --processes), before anything starts. */
export function validateProcessCount(processes: unknown, name = 'processes'): void {
  if (typeof processes !== 'number' || !Number.isSafeInteger(processes) || processes < 1 || processes > 1024) {
    throw new ConfigError(`${name} must be an integer from 1 to 1024, got ${String(processes)}`);
  }
}

export class Supervisor {
  private readonly slots: Slot[] = [];
  private stopping = false;
  private hard = false;
  private failure: { code: number; reason: string } | null = null;
  /** A child stopped past its stop timeout and handed jobs back; the launcher reports it the same way. */
  private handedBack = false;
  private finish!: (code: number) => void;
  private readonly done: Promise<number>;
  private readonly options: Required<Omit<SupervisorOptions, 'env'>> & { env: NodeJS.ProcessEnv };
  private graceTimer: NodeJS.Timeout | null = null;
  private startupCrashes = 0;

  constructor(
    options: SupervisorOptions,
    private readonly onEvent: (event: SupervisorEvent) => void = () => {},
  ) {
    validateProcessCount(options.processes);
    this.options = {
      staggerMs: 200,
      restartBaseMs: 500,
      restartMaxMs: 30_000,
      minUptimeMs: 5_000,
      maxStartupCrashes: 5,
      gracePeriodMs: 30_000,
      stdio: 'inherit',
      env: process.env,
      ...options,
    };
    this.done = new Promise((resolve) => (this.finish = resolve));
  }

  /** Starts the children; resolves with the launcher's exit code once every child has ended. */
  run(): Promise<number> {
    for (let i = 0; i < this.options.processes; i++) {
      const slot: Slot = { index: i, child: null, startedAt: 0, restarts: 0, consecutiveCrashes: 0, finished: false, timer: null };
      this.slots.push(slot);
      slot.timer = setTimeout(() => this.spawn(slot), i * this.options.staggerMs);
    }
    return this.done;
  }

  /** First call drains (SIGTERM to children, kill after the grace period); a second call kills at once. */
  stop(signal = 'SIGTERM'): void {
    if (this.stopping) {
      this.killAll();
      return;
    }
    this.stopping = true;
    this.onEvent({ type: 'draining', signal });
    for (const slot of this.slots) {
      if (slot.timer) clearTimeout(slot.timer);
      slot.timer = null;
      slot.child?.kill('SIGTERM');
    }
    this.graceTimer = setTimeout(() => this.killAll(), this.options.gracePeriodMs);
    this.graceTimer.unref();
    this.settleIfAllEnded();
  }

  get pids(): number[] {
    return this.slots.flatMap((s) => (s.child?.pid !== undefined && s.child.exitCode === null ? [s.child.pid] : []));
  }

  private killAll(): void {
    this.hard = true;
    for (const slot of this.slots) {
      if (slot.timer) clearTimeout(slot.timer);
      slot.timer = null;
      slot.child?.kill('SIGKILL');
    }
    this.settleIfAllEnded();
  }

  private spawn(slot: Slot): void {
    slot.timer = null;
    if (this.stopping) return this.settleIfAllEnded();
    const output = this.options.stdio === 'inherit' ? 'inherit' : 'pipe';
    const child = fork(this.options.modulePath, [...this.options.args], {
      env: { ...this.options.env, STATUSQ_SUPERVISED: '1', STATUSQ_REPORT_FD: String(REPORT_FD) },
      stdio: ['ignore', output, output, 'ipc', 'pipe'],
      detached: true,
    });
    let report = '';
    (child.stdio[REPORT_FD] as NodeJS.ReadableStream | null)?.on('data', (chunk: Buffer) => (report += chunk.toString()));
    slot.child = child;
    slot.startedAt = Date.now();
    if (child.pid !== undefined) this.onEvent({ type: 'started', slot: slot.index, pid: child.pid, restart: slot.restarts });
    child.on('message', (message: unknown) => {
      if (child.pid !== undefined) this.onEvent({ type: 'message', slot: slot.index, pid: child.pid, message });
    });
    child.on('error', () => {
      // A failed fork surfaces as an exit with no pid; the exit handler decides what follows.
    });
    // 'close' rather than 'exit': it comes once the report pipe has been read to its end.
    child.on('close', (code, signal) => this.exited(slot, child, code, signal, report));
  }

  private exited(slot: Slot, child: ChildProcess, code: number | null, signal: NodeJS.Signals | null, report: string): void {
    const uptimeMs = Date.now() - slot.startedAt;
    slot.child = null;
    this.onEvent({ type: 'exited', slot: slot.index, pid: child.pid ?? -1, code, signal, uptimeMs, report });
    if (code === EXIT.ok) {
      slot.finished = true;
      // One child found the queue empty; the others will too. Nothing to restart.
      return this.settleIfAllEnded();
    }
    if (code === EXIT.handedBack) this.handedBack = true;
    if (code === EXIT.recycled && !this.stopping) {
      // Not a crash: the child ended itself to get rid of a stuck handler, and is replaced at once.
      slot.restarts++;
      this.onEvent({ type: 'restarting', slot: slot.index, delayMs: 0 });
      slot.timer = setTimeout(() => this.spawn(slot), 0);
      return;
    }
    if (code === EXIT.badInput) {
      this.giveUp(EXIT.badInput, 'a worker process rejected its configuration (exit code 2); not restarting');
      return;
    }
    if (this.stopping) return this.settleIfAllEnded();
    if (uptimeMs < this.options.minUptimeMs) {
      this.startupCrashes++;
      if (this.startupCrashes >= this.options.maxStartupCrashes) {
        this.giveUp(EXIT.failure, `worker processes crashed at start-up ${this.startupCrashes} times in a row (last: ${describeExit(code, signal)}); giving up`);
        return;
      }
    } else {
      this.startupCrashes = 0;
      slot.consecutiveCrashes = 0;
    }
    const delayMs = backoffDelay(slot.consecutiveCrashes++, { baseMs: this.options.restartBaseMs, maxMs: this.options.restartMaxMs });
    slot.restarts++;
    this.onEvent({ type: 'restarting', slot: slot.index, delayMs });
    slot.timer = setTimeout(() => this.spawn(slot), delayMs);
  }

  private giveUp(code: number, reason: string): void {
    this.failure ??= { code, reason };
    this.onEvent({ type: 'gave-up', reason });
    if (!this.stopping) this.stop('give-up');
    this.settleIfAllEnded();
  }

  private settleIfAllEnded(): void {
    const running = this.slots.some((s) => s.child !== null || (s.timer !== null && !this.stopping));
    if (running || this.slots.length === 0) return;
    if (!this.stopping && !this.slots.every((s) => s.finished)) return;
    if (this.graceTimer) clearTimeout(this.graceTimer);
    this.finish(this.failure?.code ?? (this.hard ? EXIT.stoppedHard : this.handedBack ? EXIT.handedBack : EXIT.ok));
  }

  /** Why the launcher gave up, if it did. */
  get failureReason(): string | null {
    return this.failure?.reason ?? null;
  }
}

function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `killed by ${signal}` : `exit code ${code}`;
}
