/**
 * The Store contract: what an adapter implements and core relies on, with every capability flag and its
 * default. One piece on purpose (over 400 lines): an adapter author reads it top to bottom as the one page that
 * says what a database must do for statusq, and each part (statements, transactions, the native claim's hooks,
 * the schema support, inspection, capabilities) refers to the others.
 */
import type { OrderTimeEncoding, ResolvedTable } from '../protocol/table.js';
import type { ColumnInfo } from '../protocol/columns.js';

import type { JobId, Row, ServerCheck, SqlParam, SqlValue } from '../protocol/values.js';

// The values every layer speaks, defined in protocol/ (errors and table config use them too): re-exported here,
// where an adapter author reads the contract.
export type { JobId, Row, ServerCheck, SqlParam, SqlValue };

export interface Statement {
  sql: string;
  params: SqlParam[];
  /**
   * Its text is one a worker sends over and over with other values (the claim, the grouped settle), never
   * one that grows with its values: a store may prepare it once per connection and reuse it (an adapter whose
   * server keeps prepared statements does; see its store). Default false.
   */
  reusable?: boolean;
  /**
   * Statements that run after this one in the same transaction, and only when it changed at least one row: the
   * writes to a table's claims table (ResolvedTable.beside) that go with a guarded UPDATE of its status, which
   * alone decides whether the move happened. Run by `runStatement`; a store never sees this field.
   */
  then?: readonly Statement[];
  /**
   * Statements that run before this one in the same transaction, whatever they change: an operator's requeue
   * resets the claims table's rows of the rows it is about to requeue. Run by `runStatement`.
   */
  first?: readonly Statement[];
}

export interface ExecResult {
  /** Rows of a SELECT or of a RETURNING clause; empty otherwise. */
  rows: Row[];
  /** Rows changed by INSERT/UPDATE/DELETE. The claim and every settle are decided by this number. */
  affected: number;
  /**
   * The key a one-row INSERT generated, as the driver reports it (a store without `insertReturning` reads it
   * from the driver's result), typed as the store reads
   * ids. Absent when the INSERT generated none, and from a store that returns inserted keys with RETURNING
   * (`insertReturning`). Enqueue reads it only where neither RETURNING nor the item gave the id.
   */
  insertId?: JobId | undefined;
}

/**
 * How a dialect spells the few things that differ between SQL servers. Core builds every guarded
 * transition from these, so the status machine's SQL is written once.
 */
export interface SqlDialect {
  /** The dialect's name, for messages only: nothing outside the adapter picks behaviour by it. */
  readonly name: string;
  /** Quotes a name that `validateIdentifier` already accepted (a table may be `schema.table`). */
  quoteIdentifier(name: string): string;
  /** The placeholder for the 1-based parameter `index` (`?` or `$1`). */
  placeholder(index: number): string;
  /** The database's current time, in the representation statusq uses for its own time columns. */
  readonly now: string;
  /** The current time shifted by a parameter holding a (possibly negative) number of milliseconds. */
  nowPlusMs(msParameter: string): string;
  /**
   * A value comparable with the order column that lies `msParameter` milliseconds in the past. Used only
   * by aging, and only for the order column's encoding as `orderTimeEncoding` judged it.
   */
  orderCutoff(msParameter: string, encoding: OrderTimeEncoding): string;
  /**
   * The instant a parameter holding milliseconds since 1970-01-01 UTC names, in the representation of `now`
   * (a delayed job's `next_attempt_at` when the caller gave a time rather than a delay). Optional; without it
   * enqueue's `runAt` is a ConfigError on this store (`delayMs` needs only nowPlusMs).
   */
  atEpochMs?(msParameter: string): string;
  /**
   * `column` equals one of the values of the array parameter at `placeholder`, for an id list bound as one
   * parameter. Optional; without it an id list is `column IN (...)` with one placeholder per value. With it
   * (an array comparison such as `= ANY($1)`) a grouped settle of any size is one statement text that the server parses
   * without an IN list of hundreds of parameters, and no list runs into the 65,535-parameter limit.
   */
  anyOf?(column: string, placeholder: string): string;
  /**
   * The condition "this row is live (pending or processing) and holds the key at `placeholder`", which the key
   * index serves (KeyIndexSpec). Optional; the default `<key> = <placeholder> AND <live>` suits a partial index
   * on the key. A database whose key index is on a generated column compares that column instead, since its
   * planner would not see the expression behind it.
   */
  liveKey?(parts: { keyColumn: string; live: string; placeholder: string }): string;
  /**
   * What follows a table name in FROM to make the planner read the index `quotedIndex` (an index hint such as
   * `FORCE INDEX (...)`). Optional; without it statusq never hints. Used only by the relay's selection, whose index
   * the planner can tell from the statement alone but one adapter's server's cost model often passes over (see
   * TransitionSql.dispatchCandidates), and only when that index exists.
   */
  forceIndex?(quotedIndex: string): string;
  /**
   * How an INSERT into `table` (quoted) becomes an upsert on its `key` column: `into` is what follows INSERT
   * INTO (the table, with an alias where the update must name the existing row by one), `existing` names the
   * existing row in the update's expressions, and `clause(sets)` follows the VALUES. Optional; the default is
   * `ON CONFLICT (key) DO UPDATE SET ...` on an aliased target. A database without ON CONFLICT spells its own
   * upsert here.
   */
  upsert?(table: string, key: string): Upsert;
  /**
   * What follows a SELECT to lock the rows it reads until the transaction ends: ` FOR UPDATE`. A move of a table with
   * a claims table locks its rows with it first, so that its guarded UPDATE, a statement of its own, reads the claims
   * table as the last holder of those rows left it (a server may re-check a concurrently updated row's condition
   * against the row's newest version but other tables' as they were when the statement began). Optional; absent
   * where a transaction already excludes every other writer (a store whose transaction holds the database's one
   * write lock).
   */
  readonly forUpdate?: string;
}

/** See SqlDialect.upsert. */
export interface Upsert {
  readonly into: string;
  readonly existing: string;
  /** The value the INSERT proposed for `column` (quoted), in the update's expressions. */
  proposed(column: string): string;
  clause(sets: string): string;
}

/**
 * What an adapter can do beyond the portable baseline. Core reads these flags instead of asking which
 * dialect it talks to. Every flag defaults to false (see DEFAULT_CAPABILITIES): an adapter that declares
 * nothing still works through the portable conditional-update claim and polling.
 */
export interface StoreCapabilities {
  /** `claim` takes up to `limit` rows in one call and one round trip. Default false. */
  batchClaim: boolean;
  /** The native claim skips rows other claimers hold (FOR UPDATE SKIP LOCKED, or a write lock), so it loses no claims. Default false. */
  skipLocked: boolean;
  /** UPDATE ... RETURNING is available, so a claim can return the rows it changed. Default false. */
  returning: boolean;
  /**
   * `waitForWork` is woken when rows may have arrived: the server's notifications to a listening connection, or
   * a watch on the database file. Default false: polling only.
   */
  listenNotify: boolean;
  /**
   * `waitForWork` asks the table itself whether a row is due (an idle probe: one statement that sleeps
   * and checks the claim's due condition on the server, on a connection of its own), so a wait that ends
   * without a row found nothing: the worker
   * then waits up to IDLE_PROBE_WAIT_MS between claims instead of backing off to pollMaxMs. Default false.
   */
  idleProbe: boolean;
  /**
   * INSERT ... RETURNING is available, so enqueue reads each new row's id from its own INSERT. Default false:
   * the id is the one the item set, else the statement's `ExecResult.insertId`, else unknown (null).
   */
  insertReturning: boolean;
  /**
   * INSERT ... ON CONFLICT DO NOTHING: a row that would break a unique index is skipped without an error
   * A keyed enqueue then meets a live key without failing its transaction or writing an
   * error to the server's log; without it, the INSERT fails with UniqueViolation and enqueue reads that as the
   * same answer. Default false.
   */
  insertOnConflictDoNothing: boolean;
  /**
   * Completions that store different results may share one UPDATE (`result = CASE id WHEN ... THEN ... END`),
   * the result column taking the CASE's text as it takes a bound string. For a store whose batch of statements
   * costs a round trip each (measured on one adapter's server: a worker 20 ms from its server settled 16 jobs
   * with results in 17 round trips, 30 jobs/s against 100 without results). Default false: a completion with a
   * result is its own statement (a store that pipelines its batch sends those in one round trip, and a server
   * may type a CASE of untyped values as text, which a JSON result column refuses).
   */
  groupedResults: boolean;
}

export const DEFAULT_CAPABILITIES: Readonly<StoreCapabilities> = Object.freeze({
  batchClaim: false,
  skipLocked: false,
  returning: false,
  listenNotify: false,
  idleProbe: false,
  insertReturning: false,
  insertOnConflictDoNothing: false,
  groupedResults: false,
});

/**
 * How long a worker on a store with `idleProbe` waits between claims while idle (the probe ends the wait as
 * soon as it sees a due row). It only bounds how long a probe that wrongly saw nothing could delay a row.
 */
export const IDLE_PROBE_WAIT_MS = 30_000;

/** See Store.statementLimit. */
export interface StatementLimit {
  /** Bytes one statement may take as core's `statementBytes` counts it (SQL text with its values inline, UTF-8). */
  readonly bytes: number;
  /** The server setting behind the bound, for messages: its name and value as the adapter reads them (`<setting> = 16384`). */
  readonly setting: string;
  /** What raises it: the statement or configuration change, as the adapter words it. */
  readonly fix: string;
}

/**
 * `native`: the adapter's best safe claim (one statement or one transaction per batch; see NativeClaim),
 * which is the conditional update on a store that declares none (a server that cannot skip locked rows).
 * `conditional-update`: the seed's portable protocol: SELECT candidates, then one
 * `UPDATE ... WHERE id = ? AND status IS NULL` per candidate, owned only when it changed one row.
 */
export type ClaimStrategy = 'native' | 'conditional-update';

export interface ClaimRequest {
  /** At most this many rows. */
  limit: number;
  /** Written to the worker-id column when the table has one; every settle of these rows must present it. */
  token: string | null;
  /** Aging: rows whose order value is older than this many milliseconds are claimed first, oldest first. */
  agingMs?: number | undefined;
}

export interface ClaimResult {
  /** The rows this call owns, in status processing, as they are after the claim. */
  rows: Row[];
  /** Candidates another claimer took first (always 0 for a native claim of a store with `skipLocked`). */
  candidatesLost: number;
  /**
   * Set when the claim stopped part way (the conditional-update claim, one UPDATE per candidate): the error
   * that stopped it, while `rows` holds what the earlier UPDATEs claimed. Those rows are the caller's: run
   * or release them, then treat the claim as failed with this error. Without it a server that turned
   * read-only (or went away) between two UPDATEs would leave them in processing until their lease expired.
   */
  interruptedBy?: unknown;
}

/** Runs statements on the one connection of an open transaction (see Store.transaction). */
export interface StatementRunner {
  execute(statement: Statement): Promise<ExecResult>;
  /**
   * Queues `statement` to travel with the next statement this runner sends (or with the transaction's COMMIT),
   * for a result that can wait: its promise settles when that packet is answered. Only a store transaction
   * that sends several statements per round trip has it (multi-statement packets); absent, callers
   * `execute` instead.
   */
  defer?(statement: Statement): Promise<ExecResult>;
}

/**
 * A transaction a store lends to application code for the length of a callback (Store.lendTransaction; a
 * handler's ctx.transaction): the application writes through `handle`, and core settles the job through `runner`
 * on the same connection, so both commit or neither does.
 */
export interface LentTransaction {
  /** The driver's own handle on the transaction's connection (each adapter's docs name its type). */
  readonly handle: unknown;
  /** Runs core's statements on that connection, each within the store's query deadline. */
  readonly runner: StatementRunner;
}

/**
 * Runs statements on a connection the application holds, inside the application's own open transaction (see
 * Store.runnerFor). It never begins, commits, rolls back or retries; it rejects with StoreError, mapped by the
 * adapter's own error mapper.
 */
export interface CallerRunner extends StatementRunner {
  /**
   * The placeholder its statements must use when that is not the dialect's own: knex takes `?` on every
   * database and numbers them itself. Default: the dialect's `placeholder`.
   */
  readonly placeholder?: ((index: number) => string) | undefined;
  /**
   * Rejects with a ConfigError when the connection is not inside an open transaction, where each INSERT would
   * commit on its own; enqueue awaits it once, before its first INSERT. Absent: runnerFor itself has checked.
   */
  assertInTransaction?(): Promise<void>;
}

/** NativeClaim.idsOnServer: how a dialect keeps a claim's ids on the server between its statements. */
export interface ClaimIdsOnServer {
  /** The statement that keeps the ids `candidates` (the locking id SELECT, parameters bound) selects. */
  collect(candidates: string): string;
  /**
   * The table reference an UPDATE or a SELECT of those rows takes in place of the table (`quotedTable`, the
   * queue table's quoted name): the ids first, each row then read by primary key, so the table itself is never
   * scanned (a scan would lock rows other claims hold, and wait on them).
   */
  rowsOf(quotedTable: string): string;
}

/**
 * The dialect hooks of a store's native claim. Core runs the claim itself (claim.ts): the candidate
 * selections (aged rows first when aging is on), their merge up to the limit, the guarded claim by ids in
 * ascending id order, the claimed rows (from RETURNING, built from the candidates, or read back) and queue
 * order. An adapter says only how its SQL differs; every member but `lockCandidates` is optional.
 *
 * Without `oneStatement`, or with aging on, the claim runs its statements in one `Store.transaction`.
 */
export interface NativeClaim {
  /**
   * Appended to each candidate SELECT of the claim: how it locks what it finds and passes over rows other
   * claimers hold (` FOR UPDATE SKIP LOCKED`). Empty where the transaction's own write lock already keeps
   * every other claimer out (a store whose transaction holds the database's one write lock).
   */
  readonly lockCandidates: string;
  /**
   * A claim without aging as one statement, returning the claimed rows (`RETURNING ${returning}`): `set` is
   * the SET list and `candidates` the locking id subquery, both with their parameters bound in that order;
   * `returning` is `*` or the quoted columns TableConfig.select asks for. Absent: the claim runs in a transaction.
   */
  oneStatement?(parts: { table: string; id: string; set: string; candidates: string; returning: string }): string;
  /**
   * Without RETURNING: the candidate SELECT reads the database's clock beside the rows (as CLAIM_CLOCK) and
   * the claim writes that value as claimed_at, so the claimed rows can be built from the locked candidates
   * instead of read back, when `claimWritesAreKnown` says nothing else changes them. Default false.
   */
  readonly clockWithCandidates?: boolean;
  /**
   * Whether the claim's UPDATE leaves a row exactly as the locked candidate plus the values it writes (no
   * ON UPDATE column, trigger or rounding of the clock). Default: not known, so the rows are read back.
   */
  claimWritesAreKnown?(table: ResolvedTable): Promise<boolean>;
  /**
   * A claim whose ids stay on the server: in a transaction that sends its statements ahead
   * (StatementRunner.defer), the locked candidates' ids go into a session value and the UPDATE and the read of
   * the claimed rows join on it, so the whole claim travels in one packet with its COMMIT, one round trip
   * (e.g. the ids aggregated into a session variable, then joined on as a table). Only where the store's
   * transactions defer; resolves to null for a table it does not fit (e.g. ids that are not integers, or a
   * server without multi-statement packets). Absent: the ids come back to the client between the two.
   */
  idsOnServer?(table: ResolvedTable): Promise<ClaimIdsOnServer | null>;
  /** Called as each native claim starts (a store with `listenNotify`: bookkeeping of the table it listens for). */
  beforeClaim?(table: ResolvedTable): void;
  /**
   * Runs the claim's transaction body (`claim`, its candidate SELECT and UPDATE) inside an admission gate the
   * database keeps, on the transaction's own connection (`tx`): at most a few claims of one table at once,
   * whichever process or host they come from (e.g. the server's named locks; see the adapter). The gate only spaces
   * claims out; the guarded UPDATE still decides every row, so a gate that cannot be had lets the claim run
   * ungated. Default: no gate.
   */
  admit?<T>(table: ResolvedTable, tx: StatementRunner, claim: () => Promise<T>): Promise<T>;
}

/**
 * The contract every adapter implements. An adapter owns a connection (or pool) and knows its dialect; it
 * executes the statements core builds, and declares through `nativeClaim` how its dialect's claim differs
 * from the portable one. Methods reject with StoreError (kind Busy, WriteConflict, ConnectionLost,
 * UniqueViolation, ReadOnly, Unsupported or Unknown) for database failures, and never retry: core's retry policy (retry.ts) is the
 * only one. An adapter that lost its connection reconnects on the next call.
 */
export interface Store {
  readonly dialect: SqlDialect;
  readonly capabilities: StoreCapabilities;
  /**
   * The most one statement may take, when the database bounds it (a server's largest-packet setting). Core splits
   * the id lists it builds (claims, grouped completions) into statements within it, and enqueue refuses a
   * row whose INSERT exceeds it before writing anything. Absent: no bound worth checking.
   */
  readonly statementLimit?: StatementLimit | undefined;
  /** The native claim's dialect hooks. Absent: `native` claims run the portable conditional update. */
  readonly nativeClaim?: NativeClaim | undefined;

  /** Runs one statement in its own transaction (autocommit). */
  execute(statement: Statement): Promise<ExecResult>;

  /**
   * Runs the statements in order in one transaction and commits once; results in the same order. Used to
   * settle many jobs with one commit. If any statement fails the whole batch is rolled back and rejected.
   */
  executeBatch(statements: readonly Statement[]): Promise<ExecResult[]>;

  /**
   * An interactive transaction on one connection: `body` runs statements whose SQL depends on earlier
   * results, then the transaction commits (or, when `body` or the commit fails, rolls back and rejects). No
   * other call of this store may run inside it. Needed by a `nativeClaim` that runs more than one statement.
   */
  transaction?<T>(body: (tx: StatementRunner) => Promise<T>): Promise<T>;

  /**
   * A transaction on one of the store's own connections, lent to application code: `body` gets the driver's
   * handle on it and a runner for core's statements on the same connection; then it commits, or, when `body` or
   * a statement fails, rolls back and rejects (with the body's own error as it threw it, unmapped). The store's
   * statements (BEGIN, COMMIT, ROLLBACK, the runner's) keep the query deadline, past which the connection is cut
   * and the server rolls back; the body's own time is the application's, bounded by its job timeout. Used by
   * JobContext.transaction. Absent: ctx.transaction takes the application's knex instead.
   */
  lendTransaction?<T>(body: (tx: LentTransaction) => Promise<T>): Promise<T>;

  /**
   * The runner for a connection or transaction the application holds (a knex transaction, the driver's own
   * connection), so enqueue writes its rows in the application's transaction (the outbox pattern). Recognises
   * the handle by its shape (core imports no driver) and throws ConfigError naming what it accepts for
   * anything else. Absent: enqueue's `transaction` option is a ConfigError.
   */
  runnerFor?(handle: unknown): CallerRunner;

  /** The table's columns, or null when the table does not exist. */
  describeTable(table: string): Promise<ColumnInfo[] | null>;

  /** How the order column holds time, judged from its declared type; see OrderTimeEncoding. */
  orderTimeEncoding(column: ColumnInfo): OrderTimeEncoding;

  /**
   * How `initTable` and `migrateTable` create and change tables on this database. A store without it
   * serves existing tables only; the schema helpers then fail with a ConfigError.
   */
  readonly schema?: SchemaSupport;

  /**
   * Resolves when new work may have arrived or after `timeoutMs`, whichever is first, or at once when the
   * signal aborts. Only stores with `listenNotify` or `idleProbe` implement it; others are polled. A wake-up
   * is a hint, not a promise of a row: the worker's next claim decides. `table` is the table the waiting
   * worker claims from (a probing store reads it; without it, a probing store just waits `timeoutMs`).
   */
  waitForWork?(timeoutMs: number, signal: AbortSignal, table?: ResolvedTable): Promise<void>;

  /**
   * Queue.waitFor's wake-up: resolves when rows of `table` may have settled, after `timeoutMs`, or at once when
   * the signal aborts. With the ids (the id column's value as text) of the rows that settled, when the store's
   * wake-up names them (a notification whose payload is the row's id); then only those rows are read again.
   * With null when it cannot say which: on a change of the database (any write, on a store that sees only
   * that), on a pace of its own (a store without notifications that reads at a steady short interval rather
   * than waitFor's backoff), on the timeout, and on an abort, which must take nothing the next call would
   * return. Unlike `waitForWork` it leaves a worker's own wake-up state alone, so a waitFor in a worker's
   * process takes none of the worker's wake-ups. Absent: waitFor polls, backing off.
   */
  waitForChange?(timeoutMs: number, signal: AbortSignal, table: ResolvedTable): Promise<readonly string[] | null>;

  /**
   * What `statusq doctor` asks of the server (its version and settings, its clock, the plan of a claim's
   * candidate SELECT), and what Queue.monitoringCounts asks (row estimates, whether a status count is served
   * by an index). Absent: the doctor reports those facts as unknown and checks everything else, and
   * monitoringCounts counts exactly.
   */
  readonly inspection?: StoreInspection;

  /** Closes the connection; further calls reject. */
  close(): Promise<void>;
}

/** The server as an operator checking it before going live needs to know it. */
export interface ServerFacts {
  /** Product and version as the server reports them, e.g. `<product> 10.11.6`. */
  readonly version: string;
  /** The isolation level statusq's transactions run at on this store's connections. */
  readonly isolation: string;
  /** The time zone of this store's sessions, in which the database's clock is read and written. */
  readonly timeZone: string;
  /** Other settings worth showing (the server's own default time zone, a file database's journal mode), by name. */
  readonly settings: Readonly<Record<string, string>>;
}

/** How the database would run one SELECT on one table. */
export interface QueryPlan {
  /** The index the table is read through; null for a scan of the whole table. */
  index: string | null;
  /** The rows are sorted after they are read (a sort step, a temp B-tree, a filesort). */
  sorts: boolean;
  /** The plan as the database prints it, for messages. */
  text: string;
  /**
   * A condition on ExplainOptions.statusColumn bounds the index read (a seek or range on that column, or a
   * partial index whose predicate is the pending condition), as opposed to walking a whole index in order and
   * filtering. Undefined when no statusColumn was given or the adapter cannot tell.
   */
  bounded?: boolean;
}

export interface ExplainOptions {
  /**
   * Plan as for a table big enough that reading it whole costs more than going through an index: on a small
   * table (an application's table before it has grown) a planner rightly prefers a scan, which says nothing
   * about the claim once the table holds millions of finished rows. The adapter tells the planner to prefer
   * indexes where it can. Default false: the plan the planner picks now.
   */
  readonly asIfLarge?: boolean;
  /** The status column, whose pending condition should bound the read: the plan then says `bounded`. */
  readonly statusColumn?: string;
}

/** See Store.inspection. Every method reads only; none changes a row or a setting that outlives the call. */
export interface StoreInspection {
  serverFacts(): Promise<ServerFacts>;
  /** The database's current time as epoch milliseconds, read in one round trip (the caller times it). */
  clockMs(): Promise<number>;
  /** How the database would run `statement` (a SELECT on one table), without running it. */
  explain(statement: Statement, options?: ExplainOptions): Promise<QueryPlan>;
  /**
   * The planner's estimate of how many rows `statement` (a SELECT on one table) returns, read from EXPLAIN
   * without running it. Queue.monitoringCounts reads the statuses an exact count would scan from it. Absent
   * (the default): no estimate, so monitoringCounts counts every status exactly, as Queue.counts does.
   */
  estimateRows?(statement: Statement): Promise<number>;
  /**
   * The columns of `table` an INSERT may not name (generated columns, identities GENERATED ALWAYS), which
   * the doctor's INSERT privilege probe leaves out. Absent: none known, every column is named.
   */
  generatedColumns?(table: string): Promise<string[]>;
  /**
   * The server's own settings that decide whether statusq runs safely there (e.g. its replication log format,
   * whether it is read-only, its largest statement, autocommit), each a verdict with the fix; `statusq doctor` lists
   * them after the server line. Absent (the default): the adapter knows of no such setting.
   */
  serverChecks?(): Promise<ServerCheck[]>;
  /**
   * Whether `table` has the wake-ups SchemaSupport.installWakeUps gives it (a table migrated by an older version
   * may lack one, until `migrate` runs again), as one verdict whose fix the caller words; `statusq doctor`
   * lists it with the table's checks. Absent, or null: the store has no wake-ups kept in the table.
   */
  wakeUpCheck?(table: string): Promise<ServerCheck | null>;
}

/** Options every adapter's `connect` understands. */
export interface ConnectOptions {
  /** Create the database when it does not exist (a file database: the file). Default true; servers ignore it. */
  create?: boolean;
  /**
   * A URL of the same database for the store's wake-up connection alone (a `listenNotify` store's listening
   * connection), when the main URL goes through a transaction-mode pooler, which loses a listener's subscription
   * once its transaction ends. Claims and
   * settles keep going through the main URL. An adapter without such a connection refuses it (ConfigError).
   */
  listenUrl?: string;
  /**
   * Receives what the store finds wrong while it runs that an operator must hear of although nothing fails
   * (wake-ups that do not work through this URL), once per cause. Default: process.emitWarning.
   */
  onWarning?: (warning: StoreWarning) => void;
}

/** See ConnectOptions.onWarning. */
export interface StoreWarning {
  /** Short and stable, for logs and tests: `notifications-lost`. */
  readonly code: string;
  /** What happened and what it costs. */
  readonly message: string;
  /** What to change. */
  readonly fix: string;
}

/** Where a store's warnings go when the caller gave no `onWarning`: Node's process warnings, coded STATUSQ_<CODE>. */
export function emitStoreWarning(warning: StoreWarning): void {
  process.emitWarning(`${warning.message}. Fix: ${warning.fix}`, { code: `STATUSQ_${warning.code.toUpperCase().replaceAll('-', '_')}` });
}

/**
 * What an adapter package exports, so the CLI can load the one a URL's scheme names (see connect.ts) without
 * depending on every driver.
 */
export interface AdapterModule {
  /** URL schemes served, without the colon. */
  readonly schemes: readonly string[];
  connect(url: string, options?: ConnectOptions): Promise<Store>;
}

/**
 * What a column statusq creates holds. Core decides which columns a table gets and the kind of each
 * (schema.ts); the adapter decides which column type a kind has on its database.
 */
export type ColumnKind =
  /** The auto-incrementing 64-bit primary key of a table statusq creates. */
  | 'serialKey'
  /** A point in time statusq writes and compares, in the representation of the dialect's `now`. */
  | 'time'
  /** A whole number: a status code, an attempt count. */
  | 'integer'
  /** A 64-bit whole number: the claims table's key beside a table whose ids are integers of any width. */
  | 'bigInteger'
  /** A worker's claim token: a string of at most 255 characters. */
  | 'token'
  /** An error message: at most MAX_ERROR_LENGTH characters. */
  | 'text'
  /** JSON text of any size, kept as written: never a JSON type, which may re-serialise it. */
  | 'longText';

export interface ColumnSpec {
  readonly name: string;
  readonly kind: ColumnKind;
  /** Ignored for `serialKey`, which is never null. */
  readonly nullable: boolean;
  /** `now`: the database's current time in the `time` representation; 0 for a count that starts there. */
  readonly default?: 'now' | 0;
  /** Part of the table's primary key (with every other column so marked, in column order). Not with `serialKey`, which is one already. */
  readonly primaryKey?: boolean;
}

export interface PendingIndexSpec {
  readonly name: string;
  readonly statusColumn: string;
  readonly orderColumn: string;
}

/**
 * The index of a table with a priority column: pending rows by priority, highest first, then the order column
 * in `direction` (newest: descending), the claim's own ORDER BY, so the claim walks it without sorting.
 */
export interface PriorityIndexSpec extends PendingIndexSpec {
  readonly priorityColumn: string;
  readonly direction: 'newest' | 'oldest';
}

/**
 * The relay's index: pending rows by dispatched_at, then the order column. It serves both of the relay's
 * questions, rows never dispatched since their last claim (dispatched_at IS NULL, in queue order) and rows
 * dispatched before a cutoff, without reading the rows that wait in the broker.
 */
export interface DispatchIndexSpec extends PendingIndexSpec {
  readonly dispatchedColumn: string;
}

/**
 * The index of a table with a kind column: live rows (pending, and processing: `processingCode`) by kind, then
 * status and the order column, so a worker that claims some kinds reads only theirs, and a kind's fleet-wide
 * limit counts its processing rows without reading the finished ones.
 */
export interface KindIndexSpec extends PendingIndexSpec {
  readonly kindColumn: string;
  readonly processingCode: number;
}

/**
 * The index of a table with a group column: its processing rows (`processingCode`) by group, which every claim
 * under a group limit counts (limits/group-limits.ts) without reading pending or finished rows.
 */
export interface GroupIndexSpec {
  readonly name: string;
  readonly statusColumn: string;
  readonly groupColumn: string;
  readonly processingCode: number;
}

/**
 * The index that makes deduplication keys race-safe: unique over `keyColumn` among live rows only (pending:
 * status NULL, or processing: `processingCode`), so a second live row with a key is refused by the database
 * itself while a settled row frees its key. Rows without a key are not in it, or hold NULL, which a unique index
 * lets repeat.
 */
export interface KeyIndexSpec {
  readonly name: string;
  readonly statusColumn: string;
  readonly keyColumn: string;
  /** The status code of a processing row (9 unless the table's codes say otherwise); a validated integer. */
  readonly processingCode: number;
}

/** What a settle wake-up (SchemaSupport.installWakeUps) needs of the table beyond its status column. */
export interface SettleWakeUpSpec {
  /** The id column, whose value names the settled row; null when the table has none by that name (the wake-up then names no row). */
  readonly idColumn: string | null;
  /** The status code of a processing row: a row settles when its status becomes a value other than this and NULL. */
  readonly processingCode: number;
}

/**
 * The DDL an adapter supplies for `initTable` / `migrateTable`. Core decides what to create (columns,
 * index name, when) and runs the statements with `execute`, one at a time; the adapter decides how its
 * database spells it. The builders are asynchronous so an adapter can load its DDL generator only when a
 * schema call is made (a worker never needs one). Names reach here validated.
 */
export interface SchemaSupport {
  /** CREATE TABLE with these columns, in this order. */
  createTable(table: string, columns: readonly ColumnSpec[]): Promise<Statement[]>;
  /** Adds these columns to an existing table. */
  addColumns(table: string, columns: readonly ColumnSpec[]): Promise<Statement[]>;
  /**
   * The index that serves the claim: pending rows (`status IS NULL`) in the order column's order. Its
   * shape is the adapter's choice (a partial index, or a composite one the planner uses the same way).
   */
  createPendingIndex(table: string, index: PendingIndexSpec): Promise<Statement[]>;
  /**
   * The index that serves the claim on a table with a priority column (see PriorityIndexSpec). Optional: without
   * it `migrate --with priority` is a ConfigError on this store, since every claim would sort the pending rows.
   */
  createPriorityIndex?(table: string, index: PriorityIndexSpec): Promise<Statement[]>;
  /**
   * The key index (see KeyIndexSpec): a partial unique index where the database has them, or a unique index on a
   * generated column that holds the key only while the row is live. Optional: without it `migrate --with dedupe`
   * is a ConfigError on this store, since keys would not be race-safe.
   */
  createKeyIndex?(table: string, index: KeyIndexSpec): Promise<Statement[]>;
  /**
   * The dispatch index (see DispatchIndexSpec), made by `migrate --with dispatch`. Optional: without it the relay
   * still works, but each of its passes reads every pending row already waiting in the broker.
   */
  createDispatchIndex?(table: string, index: DispatchIndexSpec): Promise<Statement[]>;
  /** The kind index (see KindIndexSpec), made by `migrate --with kinds`. Optional: without it a claim by kind walks the pending index. */
  createKindIndex?(table: string, index: KindIndexSpec): Promise<Statement[]>;
  /** The group index (see GroupIndexSpec), made by `migrate --with groups`. Optional: without it a group limit's count reads the processing rows another way. */
  createGroupIndex?(table: string, index: GroupIndexSpec): Promise<Statement[]>;
  /**
   * A query for the names of the indexes on table `name` in `schema` (null: the connection's default),
   * one row per index with the name in column `name`.
   */
  indexNames(schema: string | null, name: string): Statement;
  /**
   * Makes writes to the table wake waiting workers (for `waitForWork`), and, when `settles` is given (the column
   * group `await`), settles wake Queue.waitFor (for `waitForChange`), e.g. with triggers, through `store`. Null
   * installs no settle wake-up and leaves one already there. Idempotent; called after every create and migrate,
   * so a migrate adds what an older version did not install. Adapters that are only polled leave it out.
   */
  installWakeUps?(store: Store, table: string, statusColumn: string, settles: SettleWakeUpSpec | null): Promise<void>;
  /**
   * Drops a table statusq created (the doctor's scratch table) and whatever `installWakeUps` left that
   * nothing else uses any more. Absent: `DROP TABLE <quoted name>` is all it takes.
   */
  dropTable?(table: string): Promise<Statement[]>;
}
