import { describe, expect, it } from 'vitest';
import type * as errors from './errors.js';
import { ConfigError, StatusqError, StoreError, isStoreError } from './errors.js';

describe('statusq errors across copies of @statusq/core', () => {
  it('instanceof and isStoreError hold for an error built by another copy of the module, by brand', async () => {
    // A second instance of the same module: what an application gets when an adapter resolved its own copy.
    const secondCopy = './errors.js?second-copy';
    const other = (await import(secondCopy)) as typeof errors;
    expect(other.StoreError).not.toBe(StoreError);
    const foreign = new other.StoreError('Busy', 'locked', 'SQLITE_BUSY');
    expect(foreign instanceof StoreError).toBe(true);
    expect(foreign instanceof StatusqError).toBe(true);
    expect(isStoreError(foreign)).toBe(true);
    expect(foreign instanceof ConfigError).toBe(false);
    expect(new other.ConfigError('bad') instanceof ConfigError).toBe(true);
    expect(new other.ConfigError('bad') instanceof StoreError).toBe(false);
  });

  it('ordinary errors and look-alikes are not statusq errors', () => {
    expect(new Error('x') instanceof StatusqError).toBe(false);
    expect(isStoreError({ name: 'StoreError', kind: 'Busy' })).toBe(false);
    expect(isStoreError(null)).toBe(false);
    expect(new StoreError('Unknown', 'x', 'X') instanceof StoreError).toBe(true);
  });
});
