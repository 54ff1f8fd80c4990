// The doctor's look at a table with kinds: its rows by kind, and each kind whose rows wait with no worker taking
// them. A worker with handlers by kind claims its kinds only, so a kind nobody has a handler for stays pending
// for good, and nothing else says so: no error, no failed row, only a backlog that grows.
import { Queue, StoreError, type StatusCounts, type Store, type TableConfig } from '@statusq/core';
import { formatDuration } from '@statusq/core/tools';
import { oneLine, wholeUnits } from '../text.js';
import type { Check } from '../doctor-report.js';
import type { CommandLine } from './command-line.js';

/**
 * How long a kind's oldest due row may wait, with none of its rows processing, before the doctor warns. Long
 * enough that a queue a worker drains in bursts (a fleet scaled to zero between them, a worker restarting)
 * does not warn; short enough that a kind no worker handles is seen the day it starts.
 */
export const DEFAULT_STALLED_AFTER_MS = 600_000;

export interface KindReport {
  checks: Check[];
  /** Rows by status per kind (rows without a kind under ''), as `stats --json` prints them under `kinds`. */
  counts: Record<string, StatusCounts>;
}

/** Null on a table without a kind column: nothing is added to the report there. */
export async function kindChecks(store: Store, config: TableConfig, stalledAfterMs: number, statusq: CommandLine): Promise<KindReport | null> {
  let queue: Queue;
  let counts: Record<string, StatusCounts> | null;
  let due: Awaited<ReturnType<Queue['duePendingByKind']>>;
  try {
    queue = await Queue.open(store, config);
    counts = await queue.countsByKind();
    due = await queue.duePendingByKind();
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    return { checks: [{ name: 'kinds', status: 'fail', detail: `the rows of ${config.table} could not be counted by kind: ${oneLine(error)}` }], counts: {} };
  }
  if (counts === null || due === null) return null;
  const kinds = Object.keys(counts).sort((a, b) => a.localeCompare(b));
  const named = (kind: string) => (kind === '' ? '(no kind)' : kind);
  const summary = kinds.map((kind) => {
    const shown = Object.entries(counts[kind]!).filter(([, n]) => n > 0).map(([status, n]) => `${n} ${status}`);
    return `${named(kind)} ${shown.join(', ')}`;
  });
  const checks: Check[] = [{ name: 'kinds', status: 'pass', detail: kinds.length === 0 ? `${config.table} has a kind column and no rows yet` : `rows by kind: ${summary.join('; ')}` }];
  const table = queue.table.table;
  const kindColumn = typeof config.columns?.kind === 'string' ? ['--kind-column', config.columns.kind] : [];
  for (const kind of Object.keys(due).sort((a, b) => a.localeCompare(b))) {
    const { due: waiting, waitedMs } = due[kind]!;
    // A kind with a row processing has a worker; one whose order column holds no time cannot be judged by age.
    if (waitedMs === null || waitedMs <= stalledAfterMs || (counts[kind]?.processing ?? 0) > 0) continue;
    const rows = `${waiting} due pending row${waiting === 1 ? '' : 's'}`;
    const waited = `the oldest waiting ${wholeUnits(waitedMs)} (over --stalled-after ${formatDuration(stalledAfterMs)}) and none processing`;
    checks.push(
      kind === ''
        ? {
            name: 'kind (none)',
            status: 'warn',
            detail: `${rows} without a kind, ${waited}: only a worker with one handler for every row claims them; workers with handlers by kind leave them`,
            fix: `start a worker with one handler: ${statusq('work', '--table', table, ...kindColumn, '--handler', 'FILE')}, or give the rows a kind`,
          }
        : {
            name: `kind ${kind}`,
            status: 'warn',
            detail: `${rows} of kind ${kind}, ${waited}: no running worker seems to have a handler for ${kind}`,
            fix: `start a worker with a handler for ${kind}: ${statusq('work', '--table', table, ...kindColumn, '--handlers', 'DIR')} (DIR/${kind}.mjs), or --handler with a default export that has ${kind}`,
          },
    );
  }
  return { checks, counts };
}
