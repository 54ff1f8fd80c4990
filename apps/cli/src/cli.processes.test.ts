// `statusq work --processes P` as a user runs it: the launcher and its children are real OS processes
// over one SQLite file.
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { childPids, cliBin, cliEnv, launchCli, logLines, parseStats, runCli, until, writeFixture } from './test/cli-harness.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

let dir: string;
let db: string;
const launched: ChildProcess[] = [];

const statusq = (...args: string[]) => runCli(dir, args);
const stats = () => parseStats(statusq('stats', '--db', db, '--table', 'jobs', '--json'));

/** Starts the launcher in the background; resolves with its exit code and output when it ends. */
function launch(...args: string[]) {
  const run = launchCli(dir, args);
  launched.push(run.child);
  return run;
}

const file = (name: string, text: string) => writeFixture(dir, name, text);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'statusq-processes-'));
  db = `sqlite:${join(dir, 'q.db')}`;
  expect(statusq('init', '--db', db).code).toBe(0);
  const rows = Array.from({ length: 1500 }, (_, i) => JSON.stringify({ n: i })).join('\n');
  expect(statusq('enqueue', '--db', db, '--file', file('rows.ndjson', rows)).code).toBe(0);
});

afterEach(() => {
  for (const child of launched.splice(0)) {
    if (child.exitCode === null && child.pid) for (const pid of [...childPids(child.pid), child.pid]) process.kill(pid, 'SIGKILL');
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('statusq work --processes', () => {
  it('runs P worker processes that drain the queue together and exit 0', async () => {
    const handler = file('slow.mjs', 'export default async () => { await new Promise((r) => setTimeout(r, 1)); };');
    const run = await launch('work', '--db', db, '--table', 'jobs', '--handler', handler, '--processes', '3', '--concurrency', '4', '--exit-when-empty').ended;
    expect(run.code, run.stderr).toBe(0);
    const summaries = logLines(run.stdout).filter((line) => line.msg.startsWith('worked '));
    expect(summaries).toHaveLength(3);
    expect(new Set(summaries.map((line) => line.pid)).size).toBe(3);
    const handled = summaries.map((line) => Number(/done (\d+)/.exec(line.msg)![1]));
    expect(handled.reduce((a, b) => a + b, 0)).toBe(1500);
    expect(stats()).toEqual({ pending: 0, processing: 0, done: 1500, abuse: 0, failed: 0, other: 0 });
  });

  it('restarts a child killed with SIGKILL; its claims come back by lease and every row ends done', async () => {
    const handler = file('slow.mjs', 'export default async () => { await new Promise((r) => setTimeout(r, 10)); };');
    const run = launch('work', '--db', db, '--table', 'jobs', '--handler', handler, '--processes', '2', '--concurrency', '4', '--lease', '1s', '--exit-when-empty');
    await until('two worker processes', () => childPids(run.child.pid!).length === 2);
    await until('some rows done', () => stats().done > 100);
    const [victim] = childPids(run.child.pid!);
    process.kill(victim!, 'SIGKILL');
    const result = await run.ended;
    expect(result.code, result.stderr).toBe(0);
    const warnings = logLines(result.stdout).filter((line) => line.level === 'warn').map((line) => line.msg);
    expect(warnings).toContain(`worker process ${victim} killed by SIGKILL`);
    expect(warnings.filter((msg) => /^restarting worker process \d in \d+ ms$/.test(msg))).toHaveLength(1);
    expect(stats()).toEqual({ pending: 0, processing: 0, done: 1500, abuse: 0, failed: 0, other: 0 });
  });

  it('drains on SIGTERM: running jobs finish, no row is left processing, exit 0', async () => {
    const handler = file('slower.mjs', 'export default async () => { await new Promise((r) => setTimeout(r, 100)); };');
    const run = launch('work', '--db', db, '--table', 'jobs', '--handler', handler, '--processes', '2', '--concurrency', '4');
    await until('some rows done', () => stats().done >= 20);
    run.child.kill('SIGTERM');
    const result = await run.ended;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('SIGTERM: draining 2 worker processes');
    const after = stats();
    expect(after.processing).toBe(0);
    expect(after.pending + after.done).toBe(1500);
    expect(after.pending).toBeGreaterThan(0);
  });

  it('stops with a clear error when children keep crashing at start-up', async () => {
    // Crashes only in the children: the launcher itself loads the handler once to validate it.
    const handler = file('crash.mjs', "if (process.env.STATUSQ_SUPERVISED === '1') process.exit(3);\nexport default async () => {};");
    const run = await launch('work', '--db', db, '--table', 'jobs', '--handler', handler, '--processes', '2').ended;
    expect(run.code).toBe(1);
    expect(logLines(run.stdout).filter((line) => line.level === 'error').map((line) => line.msg)).toEqual([
      expect.stringMatching(/crashed at start-up 5 times in a row \(last: exit code 3\); giving up/),
    ]);
    expect(stats()).toEqual({ pending: 1500, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
  });

  it('a worker process whose launcher died while it started claims nothing and exits 0 instead of running on as an orphan', async () => {
    // As a launcher killed right after forking leaves it: the IPC channel is closed before the child listens for
    // its 'disconnect', an event that has then already passed.
    const child = fork(cliBin, ['work', '--db', db, '--table', 'jobs', '--handler', file('ok.mjs', 'export default async () => {};'), '--poll-max', '50ms'], {
      env: cliEnv({ STATUSQ_SUPERVISED: '1' }),
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    launched.push(child);
    child.disconnect();
    let stdout = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    // 'exit' and the end of stdout, not 'close': with the channel disconnected before the spawn, Node never emits it.
    const [[code]] = (await Promise.all([once(child, 'exit'), once(child.stdout!, 'end')])) as [[number | null], unknown];
    expect(code).toBe(0);
    expect(logLines(stdout.trim()).map((line) => line.msg)).toContainEqual('the launcher exited while this worker process was starting; exiting without claiming (code 0)');
    expect(stats()).toEqual({ pending: 1500, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
  });

  it('rejects bad input in the launcher before any child starts', () => {
    const run = statusq('work', '--db', db, '--table', 'jobs', '--handler', join(dir, 'missing.mjs'), '--processes', '2');
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(`statusq: handler file not found: ${join(dir, 'missing.mjs')}`);
    expect(statusq('work', '--db', db, '--table', 'jobs', '--handler', file('ok.mjs', 'export default async () => {};'), '--processes', '0').code).toBe(2);
  });
});
