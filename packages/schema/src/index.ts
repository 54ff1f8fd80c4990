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
  /** Table options a created table states (engine, character set); knex writes them on CREATE TABLE only. */
  tableOptions?(table: Knex.CreateTableBuilder): void;
}

const DEFAULT_KINDS: Readonly<Record<Exclude<ColumnKind, 'time'>, AddColumn>> = {
  serialKey: (t, name) => t.bigIncrements(name),
  integer: (t, name) => t.integer(name),
  token: (t, name) => t.string(name, 255),
  text: (t, name) => t.text(name),
  longText: (t, name) => t.text(name),
};

export type KnexStatements = Pick<SchemaSupport, 'createTable' | 'addColumns' | 'createPendingIndex' | 'createPriorityIndex'>;

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

  return {
    async createTable(table, columns) {
      const knex = await knexOf();
      return statementsOf(
        knex.schema.createTable(table, (t) => {
          ddl.tableOptions?.(t);
          for (const spec of columns) addColumn(knex, t, spec);
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
    async createPendingIndex(table, { name, statusColumn, orderColumn }) {
      const knex = await knexOf();
      return statementsOf(
        knex.schema.alterTable(table, (t) => {
          if (ddl.pendingIndex === 'partial') t.index([orderColumn], name, { predicate: knex.whereNull(statusColumn) });
          else t.index([statusColumn, orderColumn], name);
        }),
      );
    },
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
  };
}

function statementsOf(builder: Knex.SchemaBuilder): Statement[] {
  return builder.toSQL().map((s) => ({ sql: s.sql, params: [...s.bindings] as SqlValue[] }));
}
