import { StoreError } from '../protocol/errors.js';
import type { ExecResult, Statement, StatementRunner, Store } from '../store/store.js';

/**
 * Statements that carry writes to a claims table (Statement.first and Statement.then, on a table whose claim state
 * is kept beside it) run with them in one transaction; everything else runs as the store runs it.
 */

/** Whether any of `statements` carries writes that must share its transaction. */
export function hasSideWrites(statements: readonly Statement[]): boolean {
  return statements.some((s) => (s.first?.length ?? 0) > 0 || (s.then?.length ?? 0) > 0);
}

/** Runs `statement` on `runner` (inside a transaction): its `first`, itself, then its `then` when it changed a row. */
export async function runStatement(runner: StatementRunner, statement: Statement): Promise<ExecResult> {
  for (const before of statement.first ?? []) await runner.execute(before);
  const { first: _first, then, ...own } = statement;
  const result = await runner.execute(own);
  if (result.affected > 0) for (const after of then ?? []) await runner.execute(after);
  return result;
}

/** One statement on `store`: in autocommit, or with its side writes in a transaction of its own. */
export async function executeOne(store: Store, statement: Statement): Promise<ExecResult> {
  return hasSideWrites([statement]) ? (await runInTransaction(store, [statement]))[0]! : store.execute(statement);
}

/** Statements on `store` in one transaction committed once (Store.executeBatch), with their side writes where they carry any. */
export function executeAll(store: Store, statements: readonly Statement[]): Promise<ExecResult[]> {
  return hasSideWrites(statements) ? runInTransaction(store, statements) : store.executeBatch(statements);
}

/** Runs `statements` with their side writes in one transaction of `store`, committed once; results in order. */
export function runInTransaction(store: Store, statements: readonly Statement[]): Promise<ExecResult[]> {
  if (!store.transaction) throw new StoreError('Unknown', `the ${store.dialect.name} store has no transactions, which a table with a claims table needs`, 'NO_TRANSACTION');
  return store.transaction(async (tx) => {
    const results: ExecResult[] = [];
    for (const statement of statements) results.push(await runStatement(tx, statement));
    return results;
  });
}
