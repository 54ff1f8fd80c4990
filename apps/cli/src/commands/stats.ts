import { Queue, type StatusCounts } from '@statusq/core';
import { validateTableConfig } from '@statusq/core/tools';
import { tableConfig, type Flags } from '../args.js';
import { withStore, type Io } from '../with-store.js';

export async function stats(flags: Flags, io: Io): Promise<number> {
  const config = tableConfig(flags, 'stats');
  validateTableConfig(config);
  return withStore(flags, 'stats', false, async (store) => {
    const queue = await Queue.open(store, config);
    const counts: StatusCounts = await queue.counts();
    // On a table fed to a broker: how many of the pending rows wait in the broker's queue.
    const dispatched = await queue.dispatchedCount();
    const shown = dispatched === null ? counts : { ...counts, dispatched };
    if (flags.json === true) io.out(JSON.stringify(shown));
    else io.out(Object.entries(shown).map(([name, n]) => `${name} ${n}`).join('  '));
    return 0;
  });
}
