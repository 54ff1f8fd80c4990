/** Child processes of a test: the handle on one (its stdout lines, its exit, its stdin) and where their scripts are. */
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isAbsolute } from 'node:path';
import { withDeadline } from './waiting.js';

/** A spawned child: its stdout lines, its exit, and its stdin. */
export class ChildHandle {
  private readonly lines: string[] = [];
  private readonly waiters: Array<{ test: (line: string) => boolean; resolve: (line: string) => void }> = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly child: ChildProcess,
    readonly label: string,
  ) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      this.lines.push(line);
      for (const w of [...this.waiters]) {
        if (w.test(line)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => this.stderr.push(chunk.toString()));
    // 'close', not 'exit': at 'exit' the child's stdout may still hold its last lines (its result), unread; on a
    // loaded machine a result() then found no JSON line from a child that had printed one.
    this.exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  }

  get pid(): number {
    return this.child.pid!;
  }

  get stdout(): string[] {
    return [...this.lines];
  }

  /** Resolves with the first stdout line (already printed or to come) that passes `test`. */
  line(test: (line: string) => boolean, what: string, timeoutMs = 20_000): Promise<string> {
    const seen = this.lines.find(test);
    if (seen !== undefined) return Promise.resolve(seen);
    return withDeadline(
      new Promise<string>((resolve) => this.waiters.push({ test, resolve })),
      timeoutMs,
      () => `${this.label}: ${what}; stdout so far: ${JSON.stringify(this.lines.slice(-5))}; stderr: ${this.stderr.join('').slice(-2000)}`,
    );
  }

  send(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }

  /** Waits for a clean exit (code 0) and returns the JSON object printed on the last stdout line. */
  async result<T>(timeoutMs = 60_000): Promise<T> {
    const { code, signal } = await withDeadline(this.exited, timeoutMs, () => `${this.label} did not exit; stderr: ${this.stderr.join('').slice(-2000)}`);
    if (code !== 0) throw new Error(`${this.label} exited with code ${code} signal ${signal}; stderr: ${this.stderr.join('').slice(-4000)}`);
    const last = this.lines.filter((l) => l.trim().startsWith('{')).at(-1);
    if (last === undefined) throw new Error(`${this.label} printed no JSON result; stdout: ${JSON.stringify(this.lines)}`);
    return JSON.parse(last) as T;
  }
}

export function moduleUrl(pathOrUrl: string): string {
  if (/^(file|data|node):/.test(pathOrUrl)) return pathOrUrl;
  if (isAbsolute(pathOrUrl)) return pathToFileURL(pathOrUrl).href;
  return pathOrUrl;
}

/** Compiled child scripts live next to this file (dist/). */
export function childScript(name: 'child-worker.js' | 'child-session.js' | 'child-relay.js'): string {
  return fileURLToPath(new URL(`./${name}`, import.meta.url));
}
