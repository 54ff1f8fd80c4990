import { describeFromCatalog, integerRangeOfBits, type ColumnInfo, type StatementRunner } from '@statusq/core/adapter';

const POSTGRES_INTEGER_BITS: Readonly<Record<string, 16 | 32 | 64>> = { smallint: 16, integer: 32, bigint: 64 };

/** `Store.describeTable` on PostgreSQL: the table's columns in order, or null when there is no such table. */
export function describePostgresTable(runner: StatementRunner, table: string): Promise<ColumnInfo[] | null> {
  return describeFromCatalog(runner, table, (schema, name) => ({
    sql:
      'SELECT c.column_name AS name, c.data_type AS type, c.character_maximum_length AS max_chars, ' +
      // A serial's nextval() is its column_default; an identity or generated column has none; a domain's default
      // is the domain's. A BEFORE INSERT row trigger may fill the column too: not known then (NULL).
      "CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t WHERE t.tgrelid = cls.oid AND NOT t.tgisinternal AND (t.tgtype & 7) = 7) THEN NULL " +
      "ELSE (c.column_default IS NOT NULL OR c.is_identity = 'YES' OR c.is_generated = 'ALWAYS' OR EXISTS (SELECT 1 FROM information_schema.domains d " +
      'WHERE d.domain_schema = c.domain_schema AND d.domain_name = c.domain_name AND d.domain_default IS NOT NULL)) END AS filled_on_insert, ' +
      // Unique alone: a valid unique index (the primary key's included) of exactly this one key column, with
      // no predicate and no expression. A partial index leaves the rows outside it free to repeat the id.
      'EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] ' +
      'WHERE i.indrelid = cls.oid AND i.indisunique AND i.indisvalid AND i.indnkeyatts = 1 AND i.indpred IS NULL AND i.indexprs IS NULL ' +
      'AND a.attname = c.column_name) AS is_unique ' +
      'FROM information_schema.columns c ' +
      'JOIN pg_catalog.pg_namespace ns ON ns.nspname = c.table_schema ' +
      'JOIN pg_catalog.pg_class cls ON cls.relnamespace = ns.oid AND cls.relname = c.table_name ' +
      'WHERE c.table_schema = COALESCE($1, current_schema()) AND c.table_name = $2 ORDER BY c.ordinal_position',
    params: [schema, name],
  }), (r) => {
    // data_type names a domain's underlying type, so a domain over integer counts as integer.
    const type = String(r.type).toLowerCase();
    const bits = POSTGRES_INTEGER_BITS[type];
    const chars = r.max_chars === null || r.max_chars === undefined || !type.startsWith('character') ? null : Number(r.max_chars);
    return {
      name: String(r.name),
      type,
      unique: r.is_unique === true,
      integer: bits !== undefined,
      ...(bits !== undefined && { integerRange: integerRangeOfBits(bits) }),
      // varchar(n) and char(n) count characters; text and jsonb are unbounded for any value a worker holds.
      maxLength: chars === null ? null : { chars },
      ...(r.filled_on_insert !== null && r.filled_on_insert !== undefined && { filledOnInsert: r.filled_on_insert === true }),
    };
  });
}
