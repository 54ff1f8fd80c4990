import type { Store } from '@statusq/core';

/** What an adapter hands the conformance suite. */
export interface ConformanceOptions {
  /** Shown in the top-level describe block, e.g. `sqlite`. */
  name: string;
  /**
   * Absolute path or file URL of the adapter's built module (its `dist/index.js`), which exports
   * `connect(url)`. Child processes import it to open their own connections.
   */
  adapterModule: string;
  /** A fresh, empty database for one test (SQLite: a new temp file). Called once per test. */
  url: () => string | Promise<string>;
  /**
   * Opens a new connection (store) to the database at `url`. Called several times per test: the race tests
   * give every worker its own store. Default: the adapter module's `connect(url)`.
   */
  createStore?: (url: string) => Promise<Store>;
  /**
   * Opens a store that gives up on a lock held by another connection almost at once (SQLite: a busy
   * timeout of a few ms). Enables the Busy test; without it that test is skipped.
   */
  createImpatientStore?: (url: string) => Promise<Store>;
  /** Removes what `url()` created (SQLite: the temp directory). Called after each test. */
  dropDatabase?: (url: string) => void | Promise<void>;
  /**
   * Multiplies the job counts of the race and multi-process tests (default 1: 3,000 jobs in-process,
   * 4,000 rows across processes). Lower it for a slow server, never below what still races.
   */
  scale?: number;
}
