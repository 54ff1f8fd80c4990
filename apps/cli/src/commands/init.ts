import { initTable } from '@statusq/core';
import { parseColumnGroups, validateTableName } from '@statusq/core/tools';
import { optionalString, type Flags } from '../args.js';
import { describeAdditions, hasAdditions, orderFlag, withStore, type Io } from '../with-store.js';

export async function init(flags: Flags, io: Io): Promise<number> {
  const table = validateTableName(optionalString(flags, 'table') ?? 'jobs');
  const groups = parseColumnGroups(optionalString(flags, 'with'));
  const order = orderFlag(flags);
  return withStore(flags, 'init', true, async (store) => {
    const report = await initTable(store, table, { with: groups, ...(order && { order }) });
    if (report.created) io.out(`created table ${table}`);
    else if (report.migrated && hasAdditions(report.migrated)) io.out(`table ${table} exists; added ${describeAdditions(report.migrated)}`);
    else io.out(`table ${table} already exists; nothing to do`);
    return 0;
  });
}
