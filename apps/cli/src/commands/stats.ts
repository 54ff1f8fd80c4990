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
    // On a table with kinds, the same counts per kind: a kind whose rows only wait has no worker handling it.
    const kinds = await queue.countsByKind();
    const line = (values: object) => Object.entries(values).map(([name, n]) => `${name} ${String(n)}`).join('  ');
    if (flags.json === true) {
      io.out(JSON.stringify(kinds === null ? shown : { ...shown, kinds }));
      return 0;
    }
    io.out(line(shown));
    for (const [kind, byStatus] of Object.entries(kinds ?? {}).sort(([a], [b]) => a.localeCompare(b))) io.out(`  ${kind === '' ? '(no kind)' : `kind ${kind}`}: ${line(byStatus)}`);
    return 0;
  });
}
