import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Checks over when runs started and ended, by the wall clock every process of this machine shares: how many
 * overlapped (a concurrency limit), and how close together they started (a rate).
 */

/** A run's start and end, in epoch milliseconds. */
export interface RunTime {
  start: number;
  end: number;
}

/** The most runs that overlapped; an end and a start at the same millisecond do not. */
export function mostAtOnce(runs: readonly RunTime[]): number {
  const events = runs.flatMap((run) => [[run.start, 1], [run.end, -1]] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, step] of events) most = Math.max(most, (now += step));
  return most;
}

/**
 * Pairs of starts closer together than a rate of one per `intervalMs` allows after a burst of `burst`, as
 * `i..j: gap`: empty when the rate held. A start is granted on the database's clock at the claim and runs a
 * moment later, so the handlers' clock may see starts closer than the grants were by up to the claim's delay:
 * `slackMs` of it over any span, and spans of fewer than burst + 2 starts are not judged.
 */
export function paceViolations(starts: readonly number[], intervalMs: number, burst: number, slackMs: number): string[] {
  const sorted = [...starts].sort((a, b) => a - b);
  const violations: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + burst + 2; j < sorted.length; j++) {
      const gap = sorted[j]! - sorted[i]!;
      if (gap < (j - i - burst) * intervalMs - slackMs) violations.push(`${i}..${j}: ${gap} ms`);
    }
  }
  return violations;
}

/** A run as a ledger module records it: its label (a kind, a group) and row id beside its times. */
export interface LedgerRun extends RunTime {
  label: string;
  id: number;
}

/**
 * A handler module in `dir` that child processes and this one load alike (loadHandler): each run waits `runMs`,
 * then appends `label id start end` to a ledger file; `label` is a JavaScript expression over `job` (`job.kind`).
 * With `kinds`, the module exports handlers by kind, every one the same run. `read` parses the ledger.
 */
export function runLedgerModule(dir: string, options: { label: string; runMs: number; kinds?: readonly string[] }): { handlerPath: string; read(): LedgerRun[] } {
  const ledgerPath = join(dir, 'runs.txt');
  const handlerPath = join(dir, 'ledger-handler.mjs');
  writeFileSync(
    handlerPath,
    [
      "import { appendFileSync } from 'node:fs';",
      `const LEDGER = ${JSON.stringify(ledgerPath)};`,
      'const run = async (job) => {',
      '  const start = Date.now();',
      `  await new Promise((resolve) => setTimeout(resolve, ${options.runMs}));`,
      `  appendFileSync(LEDGER, \`\${${options.label}} \${job.id} \${start} \${Date.now()}\\n\`);`,
      '};',
      options.kinds === undefined ? 'export default run;' : `export default { ${options.kinds.map((kind) => `${JSON.stringify(kind)}: run`).join(', ')} };`,
      '',
    ].join('\n'),
  );
  return {
    handlerPath,
    read: () =>
      readFileSync(ledgerPath, 'utf8').trim().split('\n').map((line) => {
        const [label, id, start, end] = line.split(' ');
        return { label: label!, id: Number(id), start: Number(start), end: Number(end) };
      }),
  };
}
