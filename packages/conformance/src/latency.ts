import type { Store } from '@statusq/core';

/**
 * A store that passes every call to `inner` (the optional members only where `inner` has them), for a test's
 * wrapper to replace the few calls it changes: one place that knows what a Store is made of.
 */
export function delegatingStore(inner: Store): Store {
  const store: Store = {
    dialect: inner.dialect,
    capabilities: inner.capabilities,
    statementLimit: inner.statementLimit,
    nativeClaim: inner.nativeClaim,
    execute: (s) => inner.execute(s),
    executeBatch: (s) => inner.executeBatch(s),
    describeTable: (t) => inner.describeTable(t),
    orderTimeEncoding: (c) => inner.orderTimeEncoding(c),
    close: () => inner.close(),
  };
  if (inner.transaction) store.transaction = (body) => inner.transaction!(body);
  if (inner.lendTransaction) store.lendTransaction = (body) => inner.lendTransaction!(body);
  if (inner.runnerFor) store.runnerFor = (handle) => inner.runnerFor!(handle);
  if (inner.waitForWork) store.waitForWork = (ms, signal, table) => inner.waitForWork!(ms, signal, table);
  return store;
}

/**
 * The same store, with a macrotask of "network latency" before every call. In-process drivers that run
 * synchronously otherwise never let two workers' SELECT and UPDATE interleave, so the
 * race between candidate selection and the conditional UPDATE would never happen in a test.
 */
export function withLatency(inner: Store): Store {
  const hop = () => new Promise<void>((resolve) => setImmediate(resolve));
  const store: Store = {
    dialect: inner.dialect,
    capabilities: inner.capabilities,
    statementLimit: inner.statementLimit,
    execute: async (s) => {
      await hop();
      return inner.execute(s);
    },
    executeBatch: async (s) => {
      await hop();
      return inner.executeBatch(s);
    },
    describeTable: (t) => inner.describeTable(t),
    orderTimeEncoding: (c) => inner.orderTimeEncoding(c),
    nativeClaim: inner.nativeClaim,
    close: () => inner.close(),
  };
  if (inner.transaction) {
    store.transaction = async (body) => {
      await hop();
      return inner.transaction!(body);
    };
  }
  if (inner.waitForWork) store.waitForWork = (ms, signal, table) => inner.waitForWork!(ms, signal, table);
  return store;
}
