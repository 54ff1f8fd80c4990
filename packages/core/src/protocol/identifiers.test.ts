import { describe, expect, it } from 'vitest';
import { ConfigError } from './errors.js';
import { derivedName, quoteIdentifierWith, splitTableName, validateIdentifier, validateTableName } from './identifiers.js';

describe('identifier validation', () => {
  it('accepts letters, digits and underscores not starting with a digit, up to 63 characters', () => {
    for (const name of ['jobs', 'table_a', '_x', 'A1', 'a'.repeat(63), 'Status']) expect(validateIdentifier(name, 'column')).toBe(name);
  });

  it('rejects anything else with a ConfigError naming what was wrong', () => {
    for (const name of ['jobs; DROP TABLE x', '1abc', 'a-b', 'a'.repeat(64), '', ' jobs', 'jobs ', 'a"b', 'a`b', "a'b", 'a.b', 'naïve', 'a\nb', 'a;b', 'a--b']) {
      expect(() => validateIdentifier(name, 'order column'), JSON.stringify(name)).toThrow(ConfigError);
    }
    for (const value of [undefined, null, 42, {}, ['jobs']]) expect(() => validateIdentifier(value, 'column')).toThrow(ConfigError);
    expect(() => validateIdentifier('1abc', 'order column')).toThrow(/invalid order column "1abc"/);
  });

  it('allows one schema qualifier on table names only', () => {
    expect(validateTableName('app.jobs')).toBe('app.jobs');
    expect(validateTableName('jobs')).toBe('jobs');
    for (const name of ['a.b.c', '.jobs', 'jobs.', 'app.1jobs', '1app.jobs', 'app.jo-bs', 'app..jobs']) {
      expect(() => validateTableName(name), name).toThrow(ConfigError);
    }
    expect(() => validateTableName(undefined)).toThrow(ConfigError);
    expect(() => validateIdentifier('app.jobs', 'column')).toThrow(ConfigError);
  });
});

describe('names derived from a table', () => {
  it('splitTableName: the schema and the name, the schema null for a bare name', () => {
    expect(splitTableName('app.jobs')).toEqual(['app', 'jobs']);
    expect(splitTableName('jobs')).toEqual([null, 'jobs']);
  });

  it('derivedName: unchanged up to 63 characters; longer ones cut with a hash of the table', () => {
    expect(derivedName('x'.repeat(63), 't')).toBe('x'.repeat(63));
    const long = derivedName('x'.repeat(64), 'table_one');
    expect(long).toMatch(/^x{50}_[0-9a-z]+$/);
    expect(derivedName('x'.repeat(64), 'table_two')).not.toBe(long);
  });

  it('quoteIdentifierWith: each part of a schema-qualified name quoted, the quote character doubled inside', () => {
    expect(quoteIdentifierWith('"')('app.jobs')).toBe('"app"."jobs"');
    expect(quoteIdentifierWith('`')('jobs')).toBe('`jobs`');
    expect(quoteIdentifierWith('`')('a`b')).toBe('`a``b`');
    expect(quoteIdentifierWith('"')('a"b')).toBe('"a""b"');
  });
});
