import { StoreError, type Store, type TableConfig } from '@statusq/core';
import { OPTIONAL_COLUMNS, configuredColumns, BESIDE_COLUMNS, isBesideColumn, type ColumnInfo, type ResolvedTable, type Statement } from '@statusq/core/tools';
import { oneLine } from '../text.js';
import type { Check } from '../doctor-report.js';

/** One identifier as the catalogue names it: quoteIdentifier would split `a.b` as schema and table. */
function quoteColumn(store: Store, name: string): string {
  const [open, close] = store.dialect.quoteIdentifier('_').split('_') as [string, string];
  return `${open}${name.replaceAll(close, close + close)}${close}`;
}

/**
 * What the worker (SELECT, UPDATE) and enqueue (INSERT) need, probed with statements that match no row, each
 * in a transaction that is rolled back, so that not even a statement-level trigger leaves a trace. A store
 * without transactions is not probed: a statement there commits as it runs.
 */
export async function privilegesCheck(store: Store, config: TableConfig, columns: ColumnInfo[], table: ResolvedTable | null): Promise<Check> {
  const transaction = store.transaction?.bind(store);
  if (!transaction) {
    return { name: 'privileges', status: 'warn', detail: `unchecked: the ${store.dialect.name} adapter has no transactions to roll the probes back in`, fix: `check by hand that this URL's user may SELECT, UPDATE and INSERT on ${config.table}` };
  }
  const q = (name: string) => quoteColumn(store, name);
  const t = store.dialect.quoteIdentifier(config.table);
  const status = table?.status ?? configuredColumns(config).status;
  // Column privileges exist: every column a worker writes is named (the claims table's, there).
  const written = table ? [table.status, ...OPTIONAL_COLUMNS.filter((key) => table.columns[key] !== undefined && !(table.beside !== null && isBesideColumn(key))).map((key) => table.columns[key]!)] : [status];
  const beside = table?.beside ? { table: store.dialect.quoteIdentifier(table.beside), columns: BESIDE_COLUMNS.filter((key) => table.columns[key] !== undefined).map((key) => table.columns[key]!) } : null;
  let generated: string[] = [];
  try {
    generated = (await store.inspection?.generatedColumns?.(config.table)) ?? [];
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    // Then every column is named, and a generated one refuses that probe: the status-only one still runs.
  }
  const skip = new Set(generated.map((name) => name.toLowerCase()));
  const insert = (names: readonly string[]) => ({
    sql: `INSERT INTO ${t} (${names.map(q).join(', ')}) SELECT ${names.map(() => 'NULL').join(', ')} FROM (SELECT 1 AS one) statusq_probe WHERE 1 = 0`,
    params: [],
  });
  // Each privilege is granted when one of its probes runs. INSERT of the status column alone is refused by
  // a store that checks every other NOT NULL column without a default, even for no row, so every column an INSERT may name
  // (not a generated one, nor an identity GENERATED ALWAYS) is tried as well.
  const probes: Array<[privilege: string, needed: 'worker' | 'enqueue', statements: Statement[]]> = [
    ['SELECT', 'worker', [{ sql: `SELECT * FROM ${t} WHERE 1 = 0`, params: [] }]],
    ['UPDATE', 'worker', [{ sql: `UPDATE ${t} SET ${written.map((c) => `${q(c)} = ${q(c)}`).join(', ')} WHERE 1 = 0`, params: [] }]],
    ['INSERT', 'enqueue', [insert([status]), insert(columns.map((c) => c.name).filter((name) => !skip.has(name.toLowerCase())))]],
  ];
  if (beside) {
    // Every claim and settle writes the claims table too: workers need all three there.
    const inserted = [table!.id, ...beside.columns];
    const named = inserted.map(q).join(', ');
    probes.push(
      [`SELECT on ${table!.beside}`, 'worker', [{ sql: `SELECT * FROM ${beside.table} WHERE 1 = 0`, params: [] }]],
      [`UPDATE on ${table!.beside}`, 'worker', [{ sql: `UPDATE ${beside.table} SET ${beside.columns.map((c) => `${q(c)} = ${q(c)}`).join(', ')} WHERE 1 = 0`, params: [] }]],
      [`INSERT on ${table!.beside}`, 'worker', [{ sql: `INSERT INTO ${beside.table} (${named}) SELECT ${inserted.map(() => 'NULL').join(', ')} FROM (SELECT 1 AS one) statusq_probe WHERE 1 = 0`, params: [] }]],
    );
  }
  const granted: string[] = [];
  const missing: Array<{ privilege: string; needed: string; why: string }> = [];
  for (const [privilege, needed, statements] of probes) {
    let failure: string | null = null;
    for (const statement of statements) {
      failure = await rolledBack(transaction, statement);
      if (failure === null) break;
    }
    if (failure === null) granted.push(privilege);
    else missing.push({ privilege, needed, why: failure });
  }
  if (missing.length === 0) return { name: 'privileges', status: 'pass', detail: onTables(granted, config.table, table?.beside ?? null) };
  const workerMisses = missing.filter((m) => m.needed === 'worker');
  const detail = missing.map((m) => `${m.privilege} refused (${m.needed === 'worker' ? 'workers need it' : 'enqueue needs it; workers do not'}): ${m.why}`).join('; ');
  return {
    name: 'privileges',
    status: workerMisses.length > 0 ? 'fail' : 'warn',
    detail: granted.length > 0 ? `${granted.join(', ')} granted; ${detail}` : detail,
    fix: grants(missing.map((m) => m.privilege), t, beside?.table ?? null),
  };
}

/** Privileges by table: `UPDATE` is the table's, `UPDATE on <claims table>` the claims table's. */
function byTable(privileges: readonly string[]): { own: string[]; beside: string[] } {
  return {
    own: privileges.filter((privilege) => !privilege.includes(' on ')),
    beside: privileges.filter((privilege) => privilege.includes(' on ')).map((privilege) => privilege.split(' ')[0]!),
  };
}

/** `SELECT, UPDATE on t; SELECT, UPDATE, INSERT on t_statusq`. */
function onTables(privileges: readonly string[], table: string, claimsTable: string | null): string {
  const { own, beside } = byTable(privileges);
  return [...(own.length > 0 ? [`${own.join(', ')} on ${table}`] : []), ...(beside.length > 0 ? [`${beside.join(', ')} on ${claimsTable}`] : [])].join('; ');
}

/** The GRANTs that give the privileges refused, per table. */
function grants(refused: readonly string[], table: string, claimsTable: string | null): string {
  const { own, beside } = byTable(refused);
  const lines = [...(own.length > 0 ? [`GRANT ${own.join(', ')} ON ${table}`] : []), ...(beside.length > 0 && claimsTable ? [`GRANT ${beside.join(', ')} ON ${claimsTable}`] : [])];
  return `${lines.join('; ')} to the user of this URL`;
}

const ROLLBACK = Symbol('statusq doctor probe: roll back');

/** Null when `statement` ran, else why it failed; whatever it did is rolled back. */
async function rolledBack(transaction: NonNullable<Store['transaction']>, statement: Statement): Promise<string | null> {
  try {
    await transaction(async (tx) => {
      await tx.execute(statement);
      throw ROLLBACK;
    });
  } catch (error) {
    if (error === ROLLBACK) return null;
    return oneLine(error);
  }
  return null;
}
