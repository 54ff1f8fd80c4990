import { Queue, pruneRows, type StatusName } from '@statusq/core';
import { DELAY_LIMIT, EXIT, parseDuration, validateTableConfig } from '@statusq/core/tools';
import { optionalDuration, optionalInteger, optionalString, required, tableConfig, type Flags } from '../args.js';
import { withStore, type Io } from '../with-store.js';

export async function prune(flags: Flags, io: Io): Promise<number> {
  const config = tableConfig(flags, 'prune');
  validateTableConfig(config);
  const statuses = required(flags, 'status', 'prune').split(',').map((s) => s.trim()).filter(Boolean) as StatusName[];
  const olderThan = required(flags, 'older-than', 'prune');
  const olderThanMs = parseDuration(olderThan, '--older-than', DELAY_LIMIT);
  const batch = optionalInteger(flags, 'batch');
  const archive = optionalString(flags, 'archive');
  const dryRun = flags['dry-run'] === true;
  const pauseMs = optionalDuration(flags, 'pause');
  const byOrderColumn = flags['by-order-column'] === true;
  return withStore(flags, 'prune', false, async (store) => {
    const queue = await Queue.open(store, config);
    const stop = new AbortController();
    const unregister = io.onSignal(() => stop.abort());
    try {
      const report = await pruneRows(queue, { statuses, olderThanMs, byOrderColumn, ...(batch !== undefined && { batch }), ...(archive !== undefined && { archive }), ...(pauseMs !== undefined && { pauseMs }), dryRun, signal: stop.signal });
      const when = report.ageColumn === queue.table.order ? 'queued' : 'finished';
      const what = `${statuses.join(', ')} row${report.removed === 1 ? '' : 's'} of ${config.table} ${when} more than ${olderThan} ago (by ${report.ageColumn})`;
      if (report.dryRun) {
        const kept = report.withoutFinishedAt ? `; ${report.withoutFinishedAt} finished row${report.withoutFinishedAt === 1 ? ' has' : 's have'} no finished_at and stay${report.withoutFinishedAt === 1 ? 's' : ''} (--by-order-column judges them by ${queue.table.order})` : '';
        const orphans = report.orphansRemoved ? `, and ${report.orphansRemoved} row${report.orphansRemoved === 1 ? '' : 's'} of ${queue.table.beside} whose row is gone` : '';
        io.out(`would ${archive === undefined ? 'delete' : `move to ${archive}`} ${report.removed} ${what}${kept}${orphans}; nothing changed (--dry-run)`);
      }
      else {
        const done = archive === undefined ? `deleted ${report.removed} ${what}` : `moved ${report.removed} ${what} to ${archive}${report.createdArchive ? ' (created)' : ''}`;
        const orphans = report.orphansRemoved ? `; removed ${report.orphansRemoved} row${report.orphansRemoved === 1 ? '' : 's'} of ${queue.table.beside} whose row is gone` : '';
        io.out(`${done} in ${report.batches} batch${report.batches === 1 ? '' : 'es'}${orphans}${report.interrupted ? '; interrupted: the rest stay' : ''}`);
      }
      return report.interrupted ? EXIT.stoppedHard : EXIT.ok;
    } finally {
      unregister();
    }
  });
}
