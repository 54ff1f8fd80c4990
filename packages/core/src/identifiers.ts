import { ConfigError } from './errors.js';

/**
 * Table and column names come from configuration and command lines, so they are validated before they are
 * ever quoted into SQL: letters, digits and underscores, not starting with a digit, at most 63 characters
 * (PostgreSQL's limit, the smallest of the three dialects). A schema-qualified table (`app.jobs`) is
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
