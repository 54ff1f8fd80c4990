/**
 * Enqueue: items checked and turned into rows (payload or column values, keys, priorities, run times), inserted
 * in one transaction, in chunks or in the caller's own, deduplicated by key where asked, and published to a
 * broker after the commit. Queue's enqueue methods are this, on the queue's table.
 */
import { dispatchId } from '../broker/broker.js';
import { ConfigError, EnqueueError, SchemaError, StoreError } from '../protocol/errors.js';
import { integerIdOf } from '../store/caller-transaction.js';
import { validateIdentifier } from '../protocol/identifiers.js';
import { STORE_RETRY, withStoreRetry } from '../store/retry.js';
import type { ExecResult, JobId, SqlValue, Statement, Store } from '../store/store.js';
import { idValueIn, validateGroup, validateKind, type ResolvedTable } from '../protocol/table.js';
import { columnOverflow, type ColumnInfo } from '../protocol/columns.js';
import { executeAll, executeOne, runStatement } from '../sql/side-writes.js';
import type { NotBefore, Params, TransitionSql } from '../sql/transition-sql.js';
import { hasIndex, keyIndexName, missingColumnError } from '../sql/schema.js';
import { DELAY_LIMIT, parseDuration } from '../protocol/duration.js';
import { fitsStatementLimit, statementTooLarge } from '../sql/statement-size.js';
import { jsonText, parseRunAt, toSqlValue } from './row-values.js';
import type { EnqueueOptions, EnqueueOutcome } from './enqueue-options.js';
import { traceContextValue } from './trace-context.js';

/** The enqueue side of one Queue: its table, statements and the id column as the database declares it. */
export class Enqueuer {
  constructor(
    private readonly store: Store,
    private readonly table: ResolvedTable,
    private readonly sql: TransitionSql,
    private readonly idColumn: ColumnInfo,
    private readonly columnNames: ReadonlySet<string>,
  ) {}

  /**
   * enqueue, saying of each item whether it was inserted or was a duplicate of a live row with its key
   * (EnqueueOptions.key). Without keys every outcome has `duplicate: false`.
   */
  async enqueueDetailed(items: readonly unknown[], options: EnqueueOptions = {}): Promise<EnqueueOutcome[]> {
    if (!Array.isArray(items)) throw new ConfigError(`enqueue takes an array of items, got ${items === null ? 'null' : typeof items}`);
    if (options === null || typeof options !== 'object') throw new ConfigError('enqueue options must be an object');
    const describe = options.describeItem ?? ((index: number) => `item ${index + 1}`);
    const notBefore = notBeforeOf(options);
    const stamp = this.stampOf(options);
    const keyOf = this.keysOf(items, options);
    if (options.dispatchTo !== undefined && (options.transaction !== undefined || keyOf)) {
      throw new ConfigError("enqueue: dispatchTo is not taken with keys or in the caller's transaction; the relay publishes those rows");
    }
    const inserted = (ids: Array<JobId | null>) => ids.map((id) => ({ id, duplicate: false }));
    if (options.transaction !== undefined) {
      if (keyOf) throw new ConfigError("enqueue: deduplication keys are not taken in the caller's transaction yet; enqueue keyed rows on their own");
      return inserted(await this.enqueueInTransaction(options.transaction, items, describe, options.chunk, notBefore, stamp));
    }
    const rows: Array<Record<string, SqlValue>> = [];
    // Each row's key, checked with the row: one an application row sets itself, or the key option's.
    const keys: Array<string | null> = [];
    // A bad key is the key option's fault when the option gave it: named as the caller names the option.
    const keyName = options.describeKey ?? 'the key option';
    const describeKey =
      !keyOf ? describe : typeof options.key === 'string' ? () => `enqueue: ${keyName}` : options.describeKey === undefined ? describe : (index: number) => `${describe(index)}: ${keyName}`;
    items.forEach((item, index) => {
      const row = this.rowFor(item, index, describe, notBefore, stamp, keyOf?.(index));
      rows.push(row);
      keys.push(this.keyIn(row, describeKey, index));
    });
    if (keyOf || keys.some((key) => key !== null)) {
      if (options.chunk !== undefined) throw new ConfigError('enqueue: keyed rows commit one at a time; give chunk or keys, not both');
      return this.enqueueKeyed(rows, keys, describe, notBefore);
    }
    const chunk = options.chunk ?? Math.max(1, items.length);
    if (!Number.isSafeInteger(chunk) || chunk < 1) throw new ConfigError(`enqueue chunk must be a positive integer, got ${chunk}`);
    const returningId = this.store.capabilities.insertReturning;
    // Rows are written as dispatched only where their ids are known after the insert, to publish: returned, the
    // auto-increment key the driver reports (`insertId`), or the row's own. A row marked and never published would wait for the relay's redispatch age.
    const dispatching = this.dispatchesOnCommit(options, notBefore);
    const idComesBack = returningId || this.idColumn.autoIncrement === true;
    const dispatched = rows.map((row) => dispatching && (idComesBack || this.ownIdOf(row) !== null));
    const statements = rows.map((row, i) => this.sql.insert(row, { returningId, notBefore, dispatched: dispatched[i]! }));
    statements.forEach((statement, index) => this.checkStatementSize(statement, index, describe));
    const ids: Array<JobId | null> = [];
    const published: boolean[] = [];
    for (let start = 0; start < statements.length; start += chunk) {
      const slice = statements.slice(start, start + chunk);
      try {
        const results = await withStoreRetry(() => executeAll(this.store, slice), STORE_RETRY.write);
        results.forEach((result, i) => ids.push(this.insertedId(result, rows[start + i]!, returningId)));
      } catch (error) {
        if (!(error instanceof StoreError)) throw error;
        const item = error.statementIndex === undefined ? undefined : start + error.statementIndex;
        const where = item !== undefined ? describe(item) : `a row between ${describe(start)} and ${describe(start + slice.length - 1)}`;
        const message =
          options.chunk === undefined
            ? `${where} was rejected by the database, so nothing was committed: ${error.message}`
            : `${ids.length} row${ids.length === 1 ? '' : 's'} committed before ${where} failed: ${error.message}`;
        throw new EnqueueError(message, error, item, ids.length, ids);
      }
      const marked = (i: number) => dispatched[i]! && ids[i] !== null;
      const toPublish = ids.slice(start).filter((_, i) => marked(start + i));
      const went = toPublish.length > 0 && (await this.publishCommitted(options, toPublish));
      for (let i = start; i < ids.length; i++) published.push(went && marked(i));
    }
    if (options.dispatchTo === undefined) return inserted(ids);
    return ids.map((id, i) => ({ id, duplicate: false, published: published[i]! }));
  }

  /** Whether this enqueue publishes its rows itself (EnqueueOptions.dispatchTo); a ConfigError where it cannot. */
  private dispatchesOnCommit(options: EnqueueOptions, notBefore: NotBefore | undefined): boolean {
    if (options.dispatchTo === undefined) return false;
    if (typeof options.dispatchTo?.publish !== 'function') throw new ConfigError('enqueue: dispatchTo must be a broker (see connectBroker)');
    if (notBefore !== undefined) throw new ConfigError('enqueue: dispatchTo publishes at once; a delayed row is published by the relay when it is due');
    if (!this.table.columns.dispatchedAt) throw missingColumnError(this.table.table, 'dispatchedAt', 'enqueue with dispatchTo');
    return true;
  }

  /** The committed rows' messages, and whether the broker took them; rows it did not take go back to the relay. */
  private async publishCommitted(options: EnqueueOptions, ids: ReadonlyArray<JobId | null>): Promise<boolean> {
    const known = ids.filter((id): id is JobId => id !== null);
    if (known.length === 0) return false;
    try {
      await options.dispatchTo!.publish(known.map((id) => ({ table: this.table.table, id: dispatchId(id), attempt: 1 })));
      return true;
    } catch (error) {
      options.onDispatchError?.(error);
      await withStoreRetry(() => this.store.execute(this.sql.unmarkDispatched(known)), STORE_RETRY.write).catch((unmarkError: unknown) => options.onDispatchError?.(unmarkError));
      return false;
    }
  }

  /**
   * Rows of which some carry a deduplication key, one at a time in item order, each committing on its own. A keyed
   * row is inserted unless a live row holds its key (Queue.insertKeyed); a row without one as any other.
   */
  private async enqueueKeyed(rows: ReadonlyArray<Record<string, SqlValue>>, keys: ReadonlyArray<string | null>, describe: (index: number) => string, notBefore: NotBefore | undefined): Promise<EnqueueOutcome[]> {
    const returningId = this.store.capabilities.insertReturning;
    rows.forEach((row, index) => this.checkStatementSize(this.sql.insert(row, { returningId, notBefore }), index, describe));
    await this.assertKeyIndex();
    const outcomes: EnqueueOutcome[] = [];
    for (const [index, row] of rows.entries()) {
      try {
        const key = keys[index]!;
        if (key === null) {
          const result = await withStoreRetry(() => executeOne(this.store, this.sql.insert(row, { returningId, notBefore })), STORE_RETRY.write);
          outcomes.push({ id: this.insertedId(result, row, returningId), duplicate: false });
        } else {
          outcomes.push(await this.insertKeyed(row, key, notBefore));
        }
      } catch (error) {
        if (!(error instanceof StoreError)) throw error;
        const committed = outcomes.filter((o) => !o.duplicate).length;
        const message =
          committed === 0
            ? `${describe(index)} was rejected by the database, and no row of this call was committed: ${error.message}`
            : `${committed} row${committed === 1 ? '' : 's'} committed before ${describe(index)} failed: ${error.message}`;
        throw new EnqueueError(message, error, index, committed, outcomes.map((o) => o.id));
      }
    }
    return outcomes;
  }

  /**
   * One keyed row: the INSERT, and when the key index refuses it the id of the live row that holds the key. The
   * key index is the arbiter, so of any number of enqueuers racing with one key exactly one inserts. The holder
   * may settle between the refused INSERT and the read, freeing the key: then the INSERT runs again (at most
   * KEYED_INSERT_ATTEMPTS times). Where the store skips conflicts (`insertOnConflictDoNothing`), the first INSERT skips any
   * unique index's, so a later one does not: a conflict with another unique index of an application's table
   * then fails as the error it is, instead of passing for a duplicate.
   */
  private async insertKeyed(row: Record<string, SqlValue>, key: string, notBefore: NotBefore | undefined): Promise<EnqueueOutcome> {
    const returningId = this.store.capabilities.insertReturning;
    let skipConflicts = this.store.capabilities.insertOnConflictDoNothing;
    let refusal: StoreError | undefined;
    for (let attempt = 0; attempt < KEYED_INSERT_ATTEMPTS; attempt++) {
      const insert = this.sql.insert(row, { returningId, notBefore, skipConflicts });
      try {
        const result = await withStoreRetry(() => executeOne(this.store, insert), STORE_RETRY.write);
        if (result.affected > 0) return { id: this.insertedId(result, row, returningId), duplicate: false };
      } catch (error) {
        if (!(error instanceof StoreError) || error.kind !== 'UniqueViolation') throw error;
        refusal = error;
      }
      const holder = await withStoreRetry(() => this.store.execute(this.sql.liveKeyHolder(key)), STORE_RETRY.write);
      const id = holder.rows[0]?.id;
      if (typeof id === 'number' || typeof id === 'bigint' || typeof id === 'string') return { id, duplicate: true };
      skipConflicts = false;
    }
    throw refusal ?? new StoreError('WriteConflict', `the row with key ${JSON.stringify(key)} was refused ${KEYED_INSERT_ATTEMPTS} times, yet no live row holds the key`);
  }

  /**
   * One row, inserted only if `claim.update` (a guarded UPDATE of another table) changes a row, in the same
   * transaction: `claim.onlyWhere` is the FROM ... WHERE that finds the row that UPDATE just claimed (the
   * INSERT selects its values from it), so a claim lost to someone else inserts nothing. A schedule's tick is
   * claimed this way (scheduler.ts). `item` and `options` are enqueue's; the key, when given, is set on the row.
   */
  async enqueueIfClaimed(item: unknown, options: Pick<EnqueueOptions, 'priority' | 'key' | 'kind' | 'group'>, claim: { update: Statement; onlyWhere: (p: Params) => string }): Promise<{ claimed: boolean; id: JobId | null }> {
    const describe = () => 'the scheduled row';
    const stamp = this.stampOf(options);
    const row = this.rowFor(item, 0, describe, undefined, stamp, this.keysOf([item], options)?.(0));
    this.keyIn(row, describe, 0);
    const returningId = this.store.capabilities.insertReturning;
    const insert = this.sql.insert(row, { returningId, onlyWhere: claim.onlyWhere });
    this.checkStatementSize(insert, 0, describe);
    const [update, inserted] = await withStoreRetry(() => this.store.executeBatch([claim.update, insert]), STORE_RETRY.write);
    if (update!.affected !== 1) return { claimed: false, id: null };
    return { claimed: true, id: this.insertedId(inserted!, row, returningId) };
  }

  private keyIndexChecked: Promise<void> | undefined;

  /**
   * Keys are race-safe only through the key index: a table with a dedupe_key column but without the index (the
   * column added by hand, the index dropped) would let two enqueuers insert one key. Checked once per queue.
   */
  private assertKeyIndex(): Promise<void> {
    const schema = this.store.schema;
    if (!schema) return Promise.resolve();
    this.keyIndexChecked ??= (async () => {
      const name = keyIndexName(this.table.table);
      if (await hasIndex(this.store, schema, this.table.table, name)) return;
      throw new SchemaError(
        `table ${this.table.table} has a ${this.table.columns.dedupeKey} column but not its key index ${name}, without which two enqueuers of one key could both insert (statusq migrate --with dedupe builds it)`,
      );
    })().catch((error: unknown) => {
      this.keyIndexChecked = undefined;
      throw error;
    });
    return this.keyIndexChecked;
  }

  /** Each item's key as EnqueueOptions.key gives it, checked against the table; undefined when the call gives none. */
  private keysOf(items: readonly unknown[], options: EnqueueOptions): ((index: number) => string | null) | undefined {
    const { key } = options;
    if (key === undefined) return undefined;
    if (typeof key !== 'string' && typeof key !== 'function') throw new ConfigError(`enqueue: key must be a string or a function of the item, got ${key === null ? 'null' : typeof key}`);
    if (this.table.columns.dedupeKey === undefined) throw missingColumnError(this.table.table, 'dedupeKey', 'a deduplication key');
    if (typeof key === 'string') {
      if (items.length !== 1) throw new ConfigError(`enqueue: a key string names one row, and ${items.length} items were given; give key as a function of the item`);
      return () => key;
    }
    return (index) => key(items[index], index) ?? null;
  }

  /** The deduplication key a row carries (checked), or null. */
  private keyIn(row: Record<string, SqlValue>, describe: (index: number) => string, index: number): string | null {
    const column = this.table.columns.dedupeKey;
    if (column === undefined) return null;
    const value = row[column];
    if (value === undefined || value === null) return null;
    // Characters as the databases count them (code points: an emoji is one), not UTF-16 units.
    if (typeof value !== 'string' || value.length === 0 || columnOverflow(value, { chars: MAX_KEY_LENGTH }) !== null || value.trim() !== value) {
      throw new ConfigError(`${describe(index)}: a deduplication key is 1 to ${MAX_KEY_LENGTH} characters without surrounding whitespace, got ${JSON.stringify(value) ?? String(value)}`);
    }
    const overflow = columnOverflow(value, this.table.limits.dedupeKey);
    if (overflow !== null) throw new ConfigError(`${describe(index)}: the key does not fit column ${column}: ${overflow}`);
    return value;
  }

  /** enqueue on the caller's open transaction: the INSERTs only, one by one, never retried. */
  private async enqueueInTransaction(
    handle: unknown,
    items: readonly unknown[],
    describe: (index: number) => string,
    chunk: number | undefined,
    notBefore: NotBefore | undefined,
    stamp: Record<string, SqlValue>,
  ): Promise<Array<JobId | null>> {
    if (chunk !== undefined) throw new ConfigError('enqueue: chunk commits rows on their own, which cannot happen inside the caller\'s transaction; give chunk or transaction, not both');
    if (!this.store.runnerFor) throw new ConfigError(`enqueue: this ${this.store.dialect.name} store cannot run in the caller's transaction (its adapter has no runnerFor)`);
    const runner = this.store.runnerFor(handle);
    const returningId = this.store.capabilities.insertReturning;
    const rows = items.map((item, index) => this.rowFor(item, index, describe, notBefore, stamp));
    const insert = (row: Record<string, SqlValue>) => this.sql.insert(row, { returningId, placeholder: runner.placeholder, notBefore });
    rows.forEach((row, index) => this.checkStatementSize(insert(row), index, describe));
    await runner.assertInTransaction?.();
    const ids: Array<JobId | null> = [];
    for (const [index, row] of rows.entries()) {
      let result: ExecResult;
      try {
        result = await runStatement(runner, insert(row));
      } catch (error) {
        if (!(error instanceof StoreError)) throw error;
        throw new EnqueueError(`${describe(index)} was rejected by the database; statusq committed nothing, roll the transaction back: ${error.message}`, error, index, 0);
      }
      ids.push(this.insertedId(result, row, returningId));
    }
    return ids;
  }

  /**
   * Refuses, before anything is written, a row whose INSERT the database would not take as one statement
   * (Store.statementLimit): a server that bounds statements may answer one larger than its bound by dropping
   * the connection, which looks like a network failure and would be retried to no end.
   */
  private checkStatementSize(statement: Statement, index: number, describe: (index: number) => string): void {
    const limit = this.store.statementLimit;
    if (limit && !fitsStatementLimit(statement, limit)) throw new ConfigError(`${describe(index)}: the row takes ${statementTooLarge(statement, limit)}`);
  }

  /** The id of the row `row` inserted (see enqueue). */
  private insertedId(result: ExecResult, row: Record<string, SqlValue>, returningId: boolean): JobId | null {
    if (returningId) {
      const id = result.rows[0]?.id;
      return typeof id === 'number' || typeof id === 'bigint' || typeof id === 'string' ? id : null;
    }
    const own = this.ownIdOf(row);
    if (own !== null) return own;
    // The driver reports (`insertId`) the key of whichever column is auto-increment: another column's when the id is not it.
    return this.idColumn.autoIncrement === true ? (result.insertId ?? null) : null;
  }

  /** The id a row to insert carries itself, or null when the database is to fill it. */
  private ownIdOf(row: Record<string, SqlValue>): JobId | null {
    const own = (idValueIn(this.table, row) ?? null) as SqlValue;
    if (own === null) return null;
    return this.idColumn.integer && typeof own !== 'number' ? integerIdOf(own) : (own as JobId);
  }

  /**
   * The column values enqueue's options set on every row (the priority, the kind), checked against the table: an option
   * whose column the table lacks is a SchemaError before anything is written.
   */
  private stampOf(options: EnqueueOptions): Record<string, SqlValue> {
    const stamp: Record<string, SqlValue> = {};
    if (options.priority !== undefined) {
      const { priority } = options;
      if (typeof priority !== 'number' || !Number.isInteger(priority) || priority < MIN_PRIORITY || priority > MAX_PRIORITY) {
        throw new ConfigError(`enqueue: priority must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}, got ${JSON.stringify(priority) ?? String(priority)}`);
      }
      const column = this.table.columns.priority;
      if (column === undefined) throw missingColumnError(this.table.table, 'priority', "a job's priority");
      stamp[column] = priority;
    }
    if (options.kind !== undefined) {
      const kind = validateKind(options.kind, 'enqueue: kind');
      const column = this.table.columns.kind;
      if (column === undefined) throw missingColumnError(this.table.table, 'kind', "a job's kind");
      const overflow = columnOverflow(kind, this.table.limits.kind);
      if (overflow !== null) throw new ConfigError(`enqueue: kind ${JSON.stringify(kind)} does not fit ${this.table.table}.${column}: ${overflow}`);
      stamp[column] = kind;
    }
    if (options.group !== undefined) {
      const group = validateGroup(options.group, 'enqueue: group');
      const column = this.table.columns.group;
      if (column === undefined) throw missingColumnError(this.table.table, 'group', "a job's group");
      const overflow = typeof group === 'string' ? columnOverflow(group, this.table.limits.group) : null;
      if (overflow !== null) throw new ConfigError(`enqueue: group ${JSON.stringify(group)} does not fit ${this.table.table}.${column}: ${overflow}`);
      stamp[column] = group;
    }
    const traceContext = traceContextValue(this.table);
    if (traceContext !== null) stamp[this.table.columns.traceContext!] = traceContext;
    return stamp;
  }

  private rowFor(item: unknown, index: number, describe: (index: number) => string, notBefore: NotBefore | undefined, stamp: Record<string, SqlValue>, key?: string | null): Record<string, SqlValue> {
    const row = this.columnValuesOf(item, index, describe, notBefore, stamp);
    if (this.idColumn.filledOnInsert === false && this.ownIdOf(row) === null) {
      // Refused before any row is sent: the database's own words ("Field 'id' doesn't have a default value") name no fix.
      throw new ConfigError(`${describe(index)}: gives no ${this.table.id}, and ${this.table.table}.${this.table.id} gets none from the database (no AUTO_INCREMENT, identity, serial or DEFAULT): give each row its ${this.table.id}`);
    }
    if (key === undefined || key === null) return row;
    const column = this.table.columns.dedupeKey!;
    if (Object.keys(row).some((name) => name.toLowerCase() === column.toLowerCase())) {
      throw new ConfigError(`${describe(index)}: sets ${column} itself, and enqueue's key option gives one too; give one or the other`);
    }
    return { ...row, [column]: key };
  }

  private columnValuesOf(item: unknown, index: number, describe: (index: number) => string, notBefore: NotBefore | undefined, stamp: Record<string, SqlValue>): Record<string, SqlValue> {
    const payloadColumn = this.table.columns.payload;
    if (payloadColumn) {
      const text = jsonText(item, `${describe(index)}: the payload`);
      if (text === undefined) throw new ConfigError(`${describe(index)}: payload is not JSON-serialisable`);
      // Refused here, before any row of the batch is inserted, rather than by the database mid-batch.
      const overflow = columnOverflow(text, this.table.limits.payload);
      if (overflow !== null) throw new ConfigError(`${describe(index)}: the payload does not fit column ${payloadColumn}: ${overflow}`);
      return { [payloadColumn]: text, ...stamp };
    }
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      throw new ConfigError(`${describe(index)}: table ${this.table.table} has no payload column, so each item must be an object of column values`);
    }
    const row: Record<string, SqlValue> = {};
    for (const [key, value] of Object.entries(item)) {
      validateIdentifier(key, 'column name');
      if (!this.columnNames.has(key.toLowerCase())) throw new SchemaError(`${describe(index)}: table ${this.table.table} has no column ${JSON.stringify(key)}`);
      if (key.toLowerCase() === this.table.status.toLowerCase()) {
        throw new SchemaError(`${describe(index)}: the status column is set by statusq; enqueue leaves it NULL (pending)`);
      }
      if (notBefore && key.toLowerCase() === this.table.columns.nextAttemptAt?.toLowerCase()) {
        throw new ConfigError(`${describe(index)}: sets ${key} itself, and a delay or run time was given too; give one or the other`);
      }
      if (Object.keys(stamp).some((name) => name.toLowerCase() === key.toLowerCase())) {
        throw new ConfigError(`${describe(index)}: sets ${key} itself, and enqueue's options set it too; give one or the other`);
      }
      row[key] = toSqlValue(value, `${describe(index)}: column ${key}`);
    }
    return { ...row, ...stamp };
  }
}

/** The longest deduplication key: the dedupe_key column statusq creates is VARCHAR(255). */
const MAX_KEY_LENGTH = 255;
/** INSERTs of one keyed row before giving up: each refused one means a live holder existed a moment before. */
const KEYED_INSERT_ATTEMPTS = 5;

/** A priority is an INTEGER column's value on every dialect. */
const MIN_PRIORITY = -2_147_483_648;
const MAX_PRIORITY = 2_147_483_647;

/** The first due time enqueue's options ask for, checked; undefined when the rows are due at once. */
function notBeforeOf(options: EnqueueOptions): NotBefore | undefined {
  const { delayMs, runAt } = options;
  if (delayMs !== undefined && runAt !== undefined) throw new ConfigError('enqueue: give delayMs or runAt, not both');
  if (delayMs !== undefined) return { delayMs: Math.round(parseDuration(delayMs, 'enqueue: delayMs', DELAY_LIMIT)) };
  if (runAt !== undefined) return { atEpochMs: parseRunAt(runAt, 'enqueue: runAt') };
  return undefined;
}
