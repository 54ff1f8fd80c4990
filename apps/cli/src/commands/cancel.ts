import { ConfigError, Queue } from '@statusq/core';
import { validateTableConfig } from '@statusq/core/tools';
import { optionalString, tableConfig, type Flags } from '../args.js';
import { parseId, withStore, type Io } from '../with-store.js';

export async function cancel(flags: Flags, io: Io): Promise<number> {
  const config = tableConfig(flags, 'cancel');
  validateTableConfig(config);
  const texts = (flags.id as string[] | undefined) ?? [];
  // Only named rows: a cancel of every pending row at once is a prune or a DELETE, not an operator's cancel.
  if (texts.length === 0) throw new ConfigError('cancel: --id is required (repeat it for more rows)');
  const reason = optionalString(flags, 'reason');
  if (reason === '') throw new ConfigError('cancel: --reason is empty');
  return withStore(flags, 'cancel', false, async (store) => {
    const queue = await Queue.open(store, config);
    const ids = texts.map((text) => parseId(text, queue.idColumn, 'cancel'));
    const report = await queue.cancel(ids, reason);
    let line = `cancelled ${report.cancelled} row${report.cancelled === 1 ? '' : 's'} of ${config.table} (pending ones end failed; running ones' workers abort them at their next heartbeat)`;
    if (report.notCancelled.length > 0) line += `; not cancelled: ${report.notCancelled.map(({ id, reason: why }) => `${String(id)} (${why})`).join(', ')}`;
    io.out(line);
    // As requeue: a distinct code, so a script notices that some of the rows it named were not cancelled.
    return report.notCancelled.length > 0 ? 5 : 0;
  });
}
