import { ConfigError } from './errors.js';

/**
 * Table and column names come from configuration and command lines, so they are validated before they are
 * ever quoted into SQL: letters, digits and underscores, not starting with a digit, at most 63 characters
 * (the smallest limit among the published adapters' servers). A schema-qualified table (`app.jobs`) is
 * allowed for the table name only. Quoting is the dialect's job; validation keeps quoting trivially safe.
 */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

export function validateIdentifier(name: unknown, what: string): string {
  if (typeof name !== 'string' || !IDENTIFIER.test(name)) {
    throw new ConfigError(
      `invalid ${what} ${JSON.stringify(name)}: use letters, digits and underscores, not starting with a digit, at most 63 characters`,
    );
  }
  return name;
}

/** A table name, optionally qualified by one schema: `jobs` or `app.jobs`. */
export function validateTableName(name: unknown): string {
  if (typeof name !== 'string') return validateIdentifier(name, 'table name');
  const parts = name.split('.');
  if (parts.length > 2) throw new ConfigError(`invalid table name ${JSON.stringify(name)}: at most one schema qualifier`);
  for (const part of parts) validateIdentifier(part, 'table name');
  return name;
}

/** Splits a validated `schema.table` into its parts; the schema is null for a bare name. */
export function splitTableName(table: string): [schema: string | null, name: string] {
  const dot = table.indexOf('.');
  return dot < 0 ? [null, table] : [table.slice(0, dot), table.slice(dot + 1)];
}

/** The identifier limit validateIdentifier enforces; a database with that limit truncates longer names silently. */
const MAX_DERIVED_NAME_LENGTH = 63;

/**
 * A name statusq derives from a table (an index, a notification channel), kept within 63 characters: when
 * `name` is longer it is cut and a stable hash of `table` appended, so two long tables sharing a prefix still
 * get different names, and the same table always gets the same one.
 */
export function derivedName(name: string, table: string): string {
  if (name.length <= MAX_DERIVED_NAME_LENGTH) return name;
  let hash = 0;
  for (const ch of table) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return `${name.slice(0, 50)}_${hash.toString(36)}`;
}

/**
 * A `SqlDialect.quoteIdentifier` that wraps each part of a (possibly `schema.table`) name in `quote`: `"` for
 * standard SQL, a backtick for a dialect that quotes with it. Names are validated before they get here; doubling the quote
 * character inside keeps quoting safe on its own as well.
 */
export function quoteIdentifierWith(quote: string): (name: string) => string {
  return (name) =>
    name
      .split('.')
      .map((part) => `${quote}${part.replaceAll(quote, quote + quote)}${quote}`)
      .join('.');
}
