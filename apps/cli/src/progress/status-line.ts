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
import ansiEscapes from 'ansi-escapes';
import { ConfigError } from '@statusq/core';
import { optionalString, type Flags } from '../args.js';
import type { LogDestination } from '../log.js';

export const PROGRESS_MODES = ['auto', 'on', 'off'] as const;
export type ProgressMode = (typeof PROGRESS_MODES)[number];

/** How a status line is shown: redrawn in place on a terminal, or whole lines now and then. */
export type ProgressSurface = 'tty' | 'plain';

/** A terminal redraw at most this often, whatever the job rate. */
export const REDRAW_INTERVAL_MS = 100;
/** Without a terminal (`--progress on`), a plain line this often. */
export const PLAIN_INTERVAL_MS = 1_000;

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
