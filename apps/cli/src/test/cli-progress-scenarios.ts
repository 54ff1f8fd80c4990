// `--progress`: the live status line of `work` and `enqueue --file`, off without a terminal, plain lines
// when forced on without one, and drawn on a real pseudo-terminal (util-linux `script`), where log lines must
// stay whole and the line must not pile up. Part of the CLI scenarios every dialect runs.
import { spawn } from 'node:child_process';
import { expect, it } from 'vitest';
import { cliBin, cliEnv, type CliRun } from './cli-harness.js';
import type { CliContext } from './cli-target.js';

const ESC = String.fromCharCode(27);
/** 40 rows of 100 ms at concurrency 2 (about 2 s); every tenth fails for good. */
const ROWS = 40;
const HANDLER = `export default async (job) => {
  await new Promise((resolve) => setTimeout(resolve, 100));
  if (job.payload.n % 10 === 0) throw new Error('boom ' + job.payload.n);
};`;

/**
 * The CLI under a pseudo-terminal 250 columns wide, outside CI, its standard input `input` (a file) or the
 * terminal: `stdout` is everything the terminal got.
 */
function onTerminal(cwd: string, args: readonly string[], input?: string, timeoutMs = 60_000): Promise<CliRun> {
  const quote = (arg: string) => `'${arg.replace(/'/g, `'\\''`)}'`;
  const command = `stty cols 250 rows 50; exec ${[process.execPath, cliBin, ...args].map(quote).join(' ')}${input === undefined ? '' : ` < ${quote(input)}`}`;
  const child = spawn('/usr/bin/script', ['-qfec', command, '/dev/null'], { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: cliEnv({ CI: undefined }) });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * The rows a terminal shows after `typescript`, for the few controls statusq writes: carriage return, line
 * feed, erase line (CSI 2K), erase to its end (CSI K), column 1 (CSI G); other CSI sequences (colours) are
 * dropped. Also every text the status line was drawn with (what followed each erase-line).
 */
function terminalRows(typescript: string): { rows: string[]; frames: string[] } {
  const rows: string[][] = [[]];
  const frames: string[] = [];
  let frame: string | null = null;
  let col = 0;
  const row = () => rows[rows.length - 1]!;
  for (let i = 0; i < typescript.length; i++) {
    const c = typescript[i]!;
    if (c === ESC && typescript[i + 1] === '[') {
      let j = i + 2;
      while (j < typescript.length && !/[A-Za-z]/.test(typescript[j]!)) j++;
      const params = typescript.slice(i + 2, j);
      const command = typescript[j];
      if (command === 'K' && params === '2') {
        rows[rows.length - 1] = [];
        if (frame !== null) frames.push(frame);
        frame = '';
      } else if (command === 'K') row().length = Math.min(row().length, col);
      else if (command === 'G') col = 0;
      i = j;
      continue;
    }
    if (c === '\r') col = 0;
    else if (c === '\n') {
      rows.push([]);
      col = 0;
      if (frame !== null) frames.push(frame);
      frame = null;
    } else {
      row()[col++] = c;
      if (frame !== null) frame += c;
    }
  }
  if (frame !== null) frames.push(frame);
  return { rows: rows.map((r) => Array.from(r, (ch) => ch ?? ' ').join('').trimEnd()), frames: frames.filter((f) => f.startsWith('work:') || f.startsWith('enqueue ')) };
}

/** The counts a `work:` status line shows. */
function shown(line: string): { done: number; failed: number; abuse: number; pending: number; processing: number } {
  const number = (name: string) => Number(new RegExp(`\\b${name} (\\d+)`).exec(line)?.[1] ?? NaN);
  return { done: number('done'), failed: number('failed'), abuse: number('abuse'), pending: number('pending'), processing: number('processing') };
}

export function progressScenarios(ctx: () => CliContext): void {
  const prepare = async (c: CliContext) => {
    expect((await c.statusq('init', '--db', c.db.url)).code).toBe(0);
    const rows = c.file('rows.ndjson', Array.from({ length: ROWS }, (_, i) => `{"n":${i + 1}}`).join('\n'));
    return { rows, handler: c.file('h.mjs', HANDLER) };
  };
  const workArgs = (c: CliContext, handler: string, ...more: string[]) => ['work', '--db', c.db.url, '--table', 'jobs', '--handler', handler, '--concurrency', '2', '--max-attempts', '1', '--exit-when-empty', ...more];

  it('--progress: off by default without a terminal (no line, no escape); on: a plain line a second whose last one is the table; a bad value exits 2', async () => {
    const c = ctx();
    const { rows, handler } = await prepare(c);
    const quiet = await c.statusq('enqueue', '--db', c.db.url, '--file', rows);
    expect(quiet).toMatchObject({ code: 0, stdout: `enqueued ${ROWS} rows into jobs`, stderr: '' });

    // A process: the line is drawn on its standard error.
    const run = await c.statusqProcess(...workArgs(c, handler, '--progress', 'on'));
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout + run.stderr).not.toContain(ESC);
    const lines = run.stderr.split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const line of lines) expect(line).toMatch(/^work: done \d+ failed \d+ abuse \d+ \| pending \d+ \| [\d.]+ jobs\/s \| ETA (\?|\d+:\d\d) \| retried \d+ \| processing \d+ \| elapsed \d+:\d\d \| \[[#-]{20}\] +\d+%$/);
    const table = await c.stats();
    expect(table).toMatchObject({ done: 36, failed: 4, pending: 0, processing: 0 });
    expect(shown(lines.at(-1)!)).toEqual({ done: table.done, failed: table.failed, abuse: table.abuse, pending: 0, processing: 0 });
    // The summary scripts read is unchanged.
    expect(run.stdout).toMatch(/done 36, failed 4, abuse 0, retried 0/);

    const plain = await c.statusqProcess('enqueue', '--db', c.db.url, '--file', rows, '--progress', 'on');
    expect(plain).toMatchObject({ code: 0, stdout: `enqueued ${ROWS} rows into jobs` });
    expect(plain.stderr.split('\n').at(-1)).toMatch(new RegExp(`^enqueue jobs: ${ROWS} of ${ROWS} rows inserted \\| [\\d.]+ rows/s \\| ETA 0:00 \\| elapsed \\d+:\\d\\d \\| \\[#{20}\\] 100%$`));

    for (const command of [['enqueue', '--db', c.db.url, '--file', rows], workArgs(c, handler)]) {
      const bad = await c.statusq(...command, '--progress', 'yes');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toBe('statusq: --progress must be auto, on or off, got "yes"');
    }
    expect(await c.stats()).toMatchObject({ pending: ROWS });
  });

  it('on a terminal, work draws one updating line with an ETA; a failure log line stays whole and the line is left once, equal to the table', async () => {
    const c = ctx();
    const { rows, handler } = await prepare(c);
    expect((await c.statusq('enqueue', '--db', c.db.url, '--file', rows)).code).toBe(0);
    const run = await onTerminal(c.dir, workArgs(c, handler, '--log-level', 'warn'));
    expect(run.code, run.stdout).toBe(0);
    const { rows: screen, frames } = terminalRows(run.stdout);
    expect(new Set(frames).size, run.stdout).toBeGreaterThanOrEqual(3);
    expect(frames.some((f) => /\| ETA \d+:\d\d \|/.test(f) && !f.includes('ETA 0:00'))).toBe(true);
    // Every failure's log line is on a row of its own, whole; no status line was left behind but the last.
    const failures = screen.filter((r) => r.includes('job failed: Error: boom'));
    expect(failures).toHaveLength(4);
    for (const row of failures) expect(row).toMatch(/^\[[\d-]+ [\d:.]+\] ERROR: \[\d+ [^\]]+\] job failed: Error: boom \d+$/);
    const statusRows = screen.filter((r) => r.includes('work:'));
    expect(statusRows).toHaveLength(1);
    const table = await c.stats();
    expect(shown(statusRows[0]!)).toEqual({ done: table.done, failed: table.failed, abuse: table.abuse, pending: 0, processing: 0 });
    expect(table).toMatchObject({ done: 36, failed: 4 });
  });

  it('on a terminal, work --processes 2: the launcher draws the one line, its final done count the table\'s', async () => {
    const c = ctx();
    const { rows, handler } = await prepare(c);
    expect((await c.statusq('enqueue', '--db', c.db.url, '--file', rows)).code).toBe(0);
    const run = await onTerminal(c.dir, workArgs(c, handler, '--processes', '2'));
    expect(run.code, run.stdout).toBe(0);
    const { rows: screen, frames } = terminalRows(run.stdout);
    expect(frames.length).toBeGreaterThanOrEqual(2);
    const statusRows = screen.filter((r) => r.includes('work:'));
    expect(statusRows, run.stdout).toHaveLength(1);
    const table = await c.stats();
    expect(table).toMatchObject({ done: 36, failed: 4, pending: 0 });
    expect(shown(statusRows[0]!)).toEqual({ done: table.done, failed: table.failed, abuse: table.abuse, pending: 0, processing: 0 });
    // The children's log lines (their summaries among them) are whole rows.
    expect(screen.filter((r) => /INFO: \[\d+ [^\]]+\] worked \d+ jobs in/.test(r))).toHaveLength(2);
  });

  it('on a terminal, enqueue --file shows bytes read and rows inserted; from standard input, rows without a total', async () => {
    const c = ctx();
    const { rows } = await prepare(c);
    const run = await onTerminal(c.dir, ['enqueue', '--db', c.db.url, '--file', rows, '--chunk', '10']);
    expect(run.code, run.stdout).toBe(0);
    const { rows: screen } = terminalRows(run.stdout);
    expect(screen.filter((r) => r.startsWith('enqueue jobs:'))).toEqual([expect.stringMatching(new RegExp(`^enqueue jobs: ${ROWS} of ${ROWS} rows inserted \\| .* \\| \\[#{20}\\] 100%$`))]);
    expect(screen).toContain(`enqueued ${ROWS} rows into jobs`);

    const piped = await onTerminal(c.dir, ['enqueue', '--db', c.db.url, '--file', '-'], rows);
    expect(piped.code, piped.stdout).toBe(0);
    const { rows: pipedScreen, frames } = terminalRows(piped.stdout);
    expect(frames.every((f) => !f.includes(' of ') || f.includes('rows inserted'))).toBe(true);
    expect(pipedScreen.filter((r) => r.startsWith('enqueue jobs:'))).toEqual([expect.stringMatching(new RegExp(`^enqueue jobs: ${ROWS} of ${ROWS} rows inserted \\| `))]);
    expect(await c.stats()).toMatchObject({ pending: 2 * ROWS });
  });
}
