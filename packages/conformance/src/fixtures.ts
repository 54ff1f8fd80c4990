/**
 * What the adapter under test supplies so that the suite never writes SQL for one database: its fixture
 * tables in its own DDL, and (optionally) how to read its query plans. Adapters export these from their
 * `./testing` entry; they need not import these types, the shapes are checked where they are passed to
 * `runConformance`.
 */
import type { ExplainOptions, QueryPlan, Statement, Store } from '@statusq/core/adapter';

/** Statements that create a table named `table` on an empty database, run in order. */
export type TableDdl = (table: string) => string[];

/**
 * Tables the start-up checks must judge. Every one has `id`, `date` and `status` (and `k` where the key is
 * wider than id); the suite inserts rows with `(id, k, date)` or `(id, date)`, dates as
 * 'YYYY-MM-DD HH:MM:SS.SSS'.
 * - sharedId: PRIMARY KEY (id, k), so two rows may share an id: refused.
 * - uniqueId: the same key plus a unique index on id alone: accepted.
 * - partialUniqueId: the same key plus a unique index on id that covers only some rows (`WHERE k = 1`):
 *   refused. Null where the database has no partial index.
 * - textStatus: a VARCHAR(8) status column: refused.
 * - untypedStatus: a status column declared without a type that still keeps the integers statusq writes:
 *   accepted. Null where a column must have a type.
 * - bounded: payload VARCHAR(10), result VARCHAR(10) and last_error VARCHAR(20), and an id and a date the
 *   database fills (an auto-increment key, a default of the current time), for enqueue: accepted, with the
 *   bounds reported where the database enforces them (`ConformanceOptions.enforcesTextLength`).
 * - defaultId: a text id the database fills with a default of its own (a random UUID), a payload column, a
 *   date it fills, and an integer column it numbers itself where it has one beside the key (an
 *   auto-increment or identity `seq`; a store's rowid, where it has one, is implicit), for enqueue: the ids it returns
 *   are the id column's, never the numbered column's.
 * - assignedId: an integer id the application assigns, as in the seed's table_a where its id is no rowid: no
 *   default, no auto-increment or identity, and not the rowid of a store that has one (BIGINT, not INTEGER,
 *   PRIMARY KEY).
 *   A row enqueued without its id is refused before the INSERT; a schedule without one at start-up.
 */
export type CheckedTable = 'sharedId' | 'uniqueId' | 'partialUniqueId' | 'textStatus' | 'untypedStatus' | 'bounded' | 'defaultId' | 'assignedId';

export interface FixtureTables {
  /**
   * The seed's application table: business rows with `id` (an integer primary key), `date` (a time, NOT
   * NULL), `url` and `kind` (text, NOT NULL; `kind` drives the fixture handler) and `status` (a small
   * integer, NULL for pending), plus an index of its own that serves the pending rows in date order. With
   * `{ ownIndex: false }` that index is left out, so only the one statusq's migrate adds can serve them.
   */
  tableA(table: string, options?: { ownIndex?: boolean }): string[];
  /** See CheckedTable. */
  checked: Readonly<Record<CheckedTable, TableDdl | null>>;
}

/** How the database would run one SELECT on one table: the Store contract's own (Store.inspection). */
export type { QueryPlan };

/** Reading the database's query plans: enables the `[needs queryPlans]` case. */
export interface QueryPlans {
  /** Refreshes the planner's statistics of `table`, so plans reflect the rows now in it. */
  analyze(store: Store, table: string): Promise<void>;
  /**
   * How the database would run `statement` (a SELECT on one table), without running it. With
   * `statusColumn`, the plan says whether a condition on that column bounds the index read (`bounded`).
   */
  explain(store: Store, statement: Statement, options?: ExplainOptions): Promise<QueryPlan>;
}
