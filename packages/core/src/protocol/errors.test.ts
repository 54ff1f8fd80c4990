import { describe, expect, it } from 'vitest';
import { ConfigError, HandlerError, SchemaError, StatusqError, StoreError, describeError, isRetryableStoreError } from './errors.js';

describe('errors', () => {
  it('carry stable codes and class names', () => {
    expect(new ConfigError('x')).toMatchObject({ code: 'CONFIG', name: 'ConfigError' });
    expect(new SchemaError('x')).toMatchObject({ code: 'SCHEMA', name: 'SchemaError' });
    expect(new HandlerError('x')).toMatchObject({ code: 'HANDLER', name: 'HandlerError' });
    const store = new StoreError('Busy', 'locked', 'SQLITE_BUSY');
    expect(store).toMatchObject({ code: 'STORE_BUSY', kind: 'Busy', nativeCode: 'SQLITE_BUSY', name: 'StoreError' });
    expect(store).toBeInstanceOf(StatusqError);
  });

  it('StoreError is retryable exactly for Busy, WriteConflict and ConnectionLost', () => {
    expect(new StoreError('Busy', '').retryable).toBe(true);
    expect(new StoreError('WriteConflict', '').retryable).toBe(true);
    expect(new StoreError('ConnectionLost', '').retryable).toBe(true);
    expect(new StoreError('UniqueViolation', '').retryable).toBe(false);
    expect(new StoreError('Unknown', '').retryable).toBe(false);
    expect(isRetryableStoreError(new Error('Busy'))).toBe(false);
  });

  it('describeError gives one line for any thrown value', () => {
    expect(describeError(new Error('boom\n  at stack'))).toBe('Error: boom at stack');
    expect(describeError(new ConfigError('bad'))).toBe('ConfigError: bad');
    expect(describeError('text')).toBe('text');
    expect(describeError({ a: 1 })).toBe('{"a":1}');
    expect(describeError(undefined)).toBe('undefined');
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(describeError(circular)).toBe('[object Object]');
    expect(describeError(10n)).toBe('10');
  });
});
