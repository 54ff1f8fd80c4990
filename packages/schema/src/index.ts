import type { Knex } from 'knex';
import type { ColumnKind, ColumnSpec, SchemaSupport, SqlValue, Statement } from '@statusq/core/adapter';

/**
 * The knex glue every adapter would otherwise write: turns core's dialect-free column descriptions into
 * knex builder calls and returns the SQL knex generates. knex only generates SQL here (it never connects,
 * so no driver is loaded); core runs the statements on the Store. Each adapter states its own answers in
 * a KnexDdl and adds what knex does not know (listing indexes, wake-ups) to make its SchemaSupport.
 */

export type AddColumn = (table: Knex.TableBuilder, name: string) => Knex.ColumnBuilder;

/** How one database spells statusq's tables through knex. */
export interface KnexDdl {
  /** The knex client whose compiler writes the SQL. */
  client: string;
  /** The column type of each kind where it differs from DEFAULT_KINDS; `time` has no default. */
  kinds: { time: AddColumn } & Partial<Record<ColumnKind, AddColumn>>;
  /** SQL for the current time as a column default, in the `time` kind's representation. */
  nowDefault: string;
  /**
   * The pending-row index. `partial`: an index on the order column WHERE status IS NULL, which only
   * pending rows enter, so the claim costs the same however many finished rows the table keeps.
   * `composite`: (status, order), for planners that serve `status IS NULL ORDER BY order` from it.
   */
  pendingIndex: 'partial' | 'composite';
  /**
   * The key index (KeyIndexSpec). `partial`: a unique index on the key column WHERE the row is live, which rows
   * without a key or settled rows never enter. `generatedColumn`: for databases without partial indexes, an
   * invisible virtual column `column` (SELECT * leaves it out) holding the key only while the row is live (NULL
   * otherwise, which a unique index lets repeat), of type `type` (which decides how keys compare), and a unique
   * index on it.
   */
  keyIndex: { kind: 'partial' } | { kind: 'generatedColumn'; column: string; type: string };
  /** Table options a created table states (engine, character set); knex writes them on CREATE TABLE only. */
  tableOptions?(table: Knex.CreateTableBuilder): void;
}

const DEFAULT_KINDS: Readonly<Record<Exclude<ColumnKind, 'time'>, AddColumn>> = {
  serialKey: (t, name) => t.bigIncrements(name),
  integer: (t, name) => t.integer(name),
  bigInteger: (t, name) => t.bigInteger(name),
  token: (t, name) => t.string(name, 255),
  text: (t, name) => t.text(name),
  longText: (t, name) => t.text(name),
};

export type KnexStatements = Pick<SchemaSupport, 'createTable' | 'addColumns' | 'createPendingIndex' | 'createPriorityIndex' | 'createKeyIndex' | 'createDispatchIndex' | 'createKindIndex' | 'createGroupIndex'>;

/**
 * SchemaSupport's statement builders for `ddl`. knex is imported on the first call, not with the adapter:
 * importing it takes about 50 ms, which a worker that never changes a table should not pay.
 */
export function knexStatements(ddl: KnexDdl): KnexStatements {
  let loaded: Promise<Knex> | undefined;
  const knexOf = () => (loaded ??= import('knex').then(({ default: knexFactory }) => knexFactory({ client: ddl.client, useNullAsDefault: true })));

  const addColumn = (knex: Knex, t: Knex.TableBuilder, spec: ColumnSpec): void => {
    const column = (spec.kind === 'time' ? ddl.kinds.time : (ddl.kinds[spec.kind] ?? DEFAULT_KINDS[spec.kind]))(t, spec.name);
    // A serial key is never null, and knex writes its own key clause for it.
    if (spec.kind !== 'serialKey') {
      if (spec.nullable) column.nullable();
      else column.notNullable();
    }
    if (spec.default === 'now') column.defaultTo(knex.raw(ddl.nowDefault));
    else if (spec.default !== undefined) column.defaultTo(spec.default);
  };

  /** An index of pending rows over `columns`: partial (only pending rows enter it) or led by the status column. */
  const pendingRowsIndex = async (table: string, name: string, statusColumn: string, columns: string[]): Promise<Statement[]> => {
    const knex = await knexOf();
    return statementsOf(
      knex.schema.alterTable(table, (t) => {
        if (ddl.pendingIndex === 'partial') t.index(columns, name, { predicate: knex.whereNull(statusColumn) });
        else t.index([statusColumn, ...columns], name);
      }),
    );
  };

  return {
    async createTable(table, columns) {
      const knex = await knexOf();
      return statementsOf(
        knex.schema.createTable(table, (t) => {
          ddl.tableOptions?.(t);
          for (const spec of columns) addColumn(knex, t, spec);
          const key = columns.filter((spec) => spec.primaryKey).map((spec) => spec.name);
          if (key.length > 0) t.primary(key);
        }),
      );
    },
    async addColumns(table, columns) {
      const knex = await knexOf();
      return statementsOf(
        knex.schema.alterTable(table, (t) => {
          for (const spec of columns) addColumn(knex, t, spec);
        }),
      );
    },
    createPendingIndex: (table, { name, statusColumn, orderColumn }) => pendingRowsIndex(table, name, statusColumn, [orderColumn]),
    async createPriorityIndex(table, { name, statusColumn, orderColumn, priorityColumn, direction }) {
      const knex = await knexOf();
      // knex has no per-column direction; a raw column with `??` is quoted by knex as any other name.
      const ordered = [knex.raw('?? DESC', [priorityColumn]), knex.raw(`?? ${direction === 'newest' ? 'DESC' : 'ASC'}`, [orderColumn])];
      return statementsOf(
        knex.schema.alterTable(table, (t) => {
          if (ddl.pendingIndex === 'partial') t.index(ordered, name, { predicate: knex.whereNull(statusColumn) });
          else t.index([statusColumn, ...ordered], name);
        }),
      );
    },
    createDispatchIndex: (table, { name, statusColumn, orderColumn, dispatchedColumn }) => pendingRowsIndex(table, name, statusColumn, [dispatchedColumn, orderColumn]),
    async createKindIndex(table, { name, statusColumn, orderColumn, kindColumn, processingCode }) {
      const knex = await knexOf();
      // DDL takes no parameters: the code is inlined, and checked to be an integer before it is.
      if (!Number.isSafeInteger(processingCode)) throw new Error(`kind index: processing code must be an integer, got ${String(processingCode)}`);
      return statementsOf(
        knex.schema.alterTable(table, (t) => {
          // Pending rows for claims by kind, processing ones for a kind's limit to count; finished rows never enter.
          if (ddl.pendingIndex === 'partial') t.index([kindColumn, statusColumn, orderColumn], name, { predicate: knex.whereRaw(`(?? IS NULL OR ?? = ${processingCode})`, [statusColumn, statusColumn]) });
          else t.index([statusColumn, kindColumn, orderColumn], name);
        }),
      );
    },
    async createGroupIndex(table, { name, statusColumn, groupColumn, processingCode }) {
      const knex = await knexOf();
      // DDL takes no parameters: the code is inlined, and checked to be an integer before it is.
      if (!Number.isSafeInteger(processingCode)) throw new Error(`group index: processing code must be an integer, got ${String(processingCode)}`);
      return statementsOf(
        knex.schema.alterTable(table, (t) => {
          // Processing rows only: a group limit counts them at every claim; pending and finished rows never enter.
          if (ddl.pendingIndex === 'partial') t.index([groupColumn], name, { predicate: knex.whereRaw(`?? = ${processingCode}`, [statusColumn]) });
          else t.index([statusColumn, groupColumn], name);
        }),
      );
    },
    async createKeyIndex(table, { name, statusColumn, keyColumn, processingCode }) {
      const knex = await knexOf();
      // DDL takes no parameters: the code is inlined, and checked to be an integer before it is.
      if (!Number.isSafeInteger(processingCode)) throw new Error(`key index: processing code must be an integer, got ${String(processingCode)}`);
      const live = knex.raw(`(?? IS NULL OR ?? = ${processingCode})`, [statusColumn, statusColumn]);
      if (ddl.keyIndex.kind === 'partial') {
        return statementsOf(knex.schema.alterTable(table, (t) => t.unique([keyColumn], { indexName: name, predicate: knex.whereNotNull(keyColumn).andWhere(live) })));
      }
      const { column, type } = ddl.keyIndex;
      const expression = knex.raw(`CASE WHEN ${live.toQuery()} THEN ?? END`, [keyColumn]).toQuery();
      // One ALTER for the column and its index (knex's builder writes two): when the index fails (live rows
      // already share a key), no column is left behind to make the next migrate fail on a duplicate column.
      const sql = knex.raw(`ALTER TABLE ?? ADD COLUMN ?? ${type} GENERATED ALWAYS AS (${expression}) VIRTUAL INVISIBLE, ADD UNIQUE INDEX ?? (??)`, [table, column, name, column]).toQuery();
      return [{ sql, params: [] }];
    },
  };
}

function statementsOf(builder: Knex.SchemaBuilder): Statement[] {
  return builder.toSQL().map((s) => ({ sql: s.sql, params: [...s.bindings] as SqlValue[] }));
}
