import { describeFromCatalog, integerRangeOfBits, splitTableName, type ColumnInfo, type ColumnLimit, type StatementRunner } from '@statusq/core/adapter';

const MYSQL_INTEGER_BITS: Readonly<Record<string, 8 | 16 | 24 | 32 | 64>> = { tinyint: 8, smallint: 16, mediumint: 24, int: 32, bigint: 64 };

/** Room in a packet for the rest of a settle statement around the value (table, column names, token). */
const STATEMENT_OVERHEAD_BYTES = 4096;

/** `Store.describeTable` on MySQL/MariaDB: the table's columns in order, or null when there is no such table. */
export async function describeMysqlTable(runner: StatementRunner, table: string): Promise<ColumnInfo[] | null> {
  const columns = await describeColumns(runner, table);
  if (columns === null || !(await hasBeforeInsertTrigger(runner, table))) return columns;
  // A BEFORE INSERT trigger may set a column itself (NEW.id = ...): whether an INSERT without it gets a value is
  // not known then, and nothing is refused on a guess.
  return columns.map(({ filledOnInsert: _unknown, ...column }) => column);
}

/**
 * Whether `table` has a BEFORE INSERT trigger: a statement of its own, since the column query beside it must
 * fit MariaDB's smallest max_allowed_packet (1 KB).
 */
async function hasBeforeInsertTrigger(runner: StatementRunner, table: string): Promise<boolean> {
  const [schema, name] = splitTableName(table);
  const { rows } = await runner.execute({
    sql: "SELECT 1 AS found FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = COALESCE(?, DATABASE()) AND EVENT_OBJECT_TABLE = ? AND ACTION_TIMING = 'BEFORE' AND EVENT_MANIPULATION = 'INSERT' LIMIT 1",
    params: [schema, name],
  });
  return rows.length > 0;
}

function describeColumns(runner: StatementRunner, table: string): Promise<ColumnInfo[] | null> {
  return describeFromCatalog(runner, table, (schema, name) => ({
    sql:
      'SELECT c.COLUMN_NAME AS name, c.COLUMN_TYPE AS type, c.DATA_TYPE AS data_type, ' +
      'c.CHARACTER_MAXIMUM_LENGTH AS max_chars, c.CHARACTER_OCTET_LENGTH AS max_bytes, @@max_allowed_packet AS packet, c.EXTRA AS extra, c.COLUMN_DEFAULT AS column_default, ' +
      // Unique alone: a unique index (the primary key's included) whose only key part is this column. A
      // prefix of the column is enough: rows sharing the id would share the prefix too.
      'EXISTS (SELECT 1 FROM information_schema.STATISTICS s WHERE s.TABLE_SCHEMA = c.TABLE_SCHEMA AND s.TABLE_NAME = c.TABLE_NAME ' +
      'AND s.COLUMN_NAME = c.COLUMN_NAME AND s.NON_UNIQUE = 0 AND s.SEQ_IN_INDEX = 1 AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS o ' +
      'WHERE o.TABLE_SCHEMA = s.TABLE_SCHEMA AND o.TABLE_NAME = s.TABLE_NAME AND o.INDEX_NAME = s.INDEX_NAME AND o.SEQ_IN_INDEX = 2)) AS is_unique ' +
      'FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = COALESCE(?, DATABASE()) AND c.TABLE_NAME = ? ORDER BY c.ORDINAL_POSITION',
    params: [schema, name],
  }), (r) => {
    const dataType = String(r.data_type).toLowerCase();
    const type = String(r.type).toLowerCase();
    const bits = MYSQL_INTEGER_BITS[dataType];
    return {
      name: String(r.name),
      type,
      unique: Number(r.is_unique) === 1,
      integer: bits !== undefined,
      // COLUMN_TYPE says `int(10) unsigned`; DATA_TYPE only `int`.
      ...(bits !== undefined && { integerRange: integerRangeOfBits(bits, /\bunsigned\b/.test(type)) }),
      maxLength: mysqlTextLimit(dataType, r.max_chars, r.max_bytes, r.packet),
      // EXTRA lists the column's attributes (`auto_increment`, `DEFAULT_GENERATED`, `on update ...`).
      autoIncrement: /\bauto_increment\b/i.test(String(r.extra ?? '')),
      // MariaDB writes a column's DEFAULT NULL as the text NULL (MySQL as SQL NULL): that fills nothing.
      filledOnInsert: /\b(auto_increment|generated)\b/i.test(String(r.extra ?? '')) || (r.column_default !== null && r.column_default !== undefined && r.column_default !== 'NULL'),
    };
  });
}

/**
 * How much text a column takes in one statement: VARCHAR(n)/CHAR(n) count characters, the TEXT/BLOB types
 * bytes. mysql2 sends values inside the statement text, escaped (a quote or backslash doubles), and the
 * server refuses a statement longer than max_allowed_packet and drops the connection, so whatever the type,
 * a value of up to half the packet (less the statement around it) is all one statement is sure to carry.
 */
export function mysqlTextLimit(dataType: string, maxChars: unknown, maxBytes: unknown, packet: unknown): ColumnLimit | null {
  const isText = maxBytes !== null && maxBytes !== undefined;
  if (!isText && dataType !== 'json') return null;
  // A packet of less than 8 KB (MariaDB takes 1 KB) keeps half of itself for the statement around the value:
  // a settle's SQL is 200-400 bytes, and a value of all quotes takes twice its size.
  const overhead = Math.min(STATEMENT_OVERHEAD_BYTES, Math.floor(Number(packet) / 2));
  const statementBytes = Math.max(0, Math.floor((Number(packet) - overhead) / 2));
  if (dataType === 'char' || dataType === 'varchar') return { chars: Number(maxChars), bytes: statementBytes };
  return { bytes: isText ? Math.min(Number(maxBytes), statementBytes) : statementBytes };
}
