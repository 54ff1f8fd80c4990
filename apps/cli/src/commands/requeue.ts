import { ConfigError, Queue } from '@statusq/core';
import { REQUEUE_SOURCES, formatDuration, isStatusName, requeueCause, validateTableConfig } from '@statusq/core/tools';
import { optionalDuration, required, tableConfig, type Flags } from '../args.js';
import { parseId, withStore, type Io } from '../with-store.js';

export async function requeue(flags: Flags, io: Io): Promise<number> {
  const config = tableConfig(flags, 'requeue');
  validateTableConfig(config);
  const from = required(flags, 'status', 'requeue');
  if (!isStatusName(from)) {
    throw new ConfigError(`requeue: --status must be ${REQUEUE_SOURCES.slice(0, -1).join(', ')} or ${REQUEUE_SOURCES.at(-1)} (processing recovers the rows of a crashed worker), got ${JSON.stringify(from)}`);
  }
  // A state no requeue may leave (done, pending) is refused by the state machine before the database is opened.
  requeueCause(from);
  const texts = flags.id as string[] | undefined;
  const leaseMs = optionalDuration(flags, 'lease');
  const force = flags.force === true;
  return withStore(flags, 'requeue', false, async (store) => {
    const queue = await Queue.open(store, config);
    const ids = texts?.map((text) => parseId(text, queue.idColumn, 'requeue'));
    const report = await queue.requeueReport(from, { ids, leaseMs, force });
    const rows = (n: number) => `${n} ${from} row${n === 1 ? '' : 's'}`;
    let line = `requeued ${rows(report.requeued)} of ${config.table}`;
    if (report.leaseMs !== null) {
      line += ` with an expired lease (lease ${formatDuration(report.leaseMs)}${leaseMs === undefined ? ' assumed, the default; --lease sets it' : ''})`;
      line += `; ${rows(report.live)} left: lease live (--force takes them once every worker is stopped)`;
    } else if (force && queue.table.features.leases) line += ' (--force: live leases included)';
    if (report.notRequeued.length > 0) line += `; not requeued: ${report.notRequeued.map(({ id, reason }) => `${String(id)} (${reason})`).join(', ')}`;
    io.out(line);
    // A distinct code, so a script notices that some of the rows it named were not requeued.
    return report.notRequeued.length > 0 ? 5 : 0;
  });
}
