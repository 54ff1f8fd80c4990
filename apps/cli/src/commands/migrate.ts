import { ConfigError, migrateTable } from '@statusq/core';
import { parseColumnGroups, validateTableName } from '@statusq/core/tools';
import { optionalString, required, type Flags } from '../args.js';
import { describeAdditions, hasAdditions, orderFlag, withStore, type Io } from '../with-store.js';

export async function migrate(flags: Flags, io: Io): Promise<number> {
  const table = validateTableName(required(flags, 'table', 'migrate'));
  const groups = parseColumnGroups(optionalString(flags, 'with'));
  const statusColumn = optionalString(flags, 'status-column');
  const orderColumn = optionalString(flags, 'order-column');
  const idColumn = optionalString(flags, 'id-column');
  const kindColumn = optionalString(flags, 'kind-column');
  const groupColumn = optionalString(flags, 'group-column');
  const beside = flags.beside === true;
  if (idColumn !== undefined && !beside) throw new ConfigError('--id-column applies to migrate --beside only (the claims table is keyed by it)');
  const order = orderFlag(flags);
  return withStore(flags, 'migrate', false, async (store) => {
    const report = await migrateTable(store, {
      table,
      with: groups,
      ...(beside && { beside, ...(idColumn !== undefined && { idColumn }) }),
      ...(statusColumn !== undefined ? { statusColumn } : {}),
      ...(orderColumn !== undefined ? { orderColumn } : {}),
      ...(order && { order }),
      ...(kindColumn !== undefined && { kindColumn }),
      ...(groupColumn !== undefined && { groupColumn }),
    });
    if (!hasAdditions(report)) io.out(`table ${table} is up to date; nothing to do`);
    else io.out(`migrated ${table}: added ${describeAdditions(report)}`);
    if (report.addedStatus) io.out(`note: ${table} had no status column; every existing row is now pending`);
    return 0;
  });
}
