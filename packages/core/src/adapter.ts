/**
 * `@statusq/core/adapter`: what an adapter author uses. The Store contract and its capability flags, the
 * guarded transition SQL every dialect shares, the claim pipeline, deadlines, identifier validation and
 * the errors an adapter maps native failures to. Applications import `@statusq/core`.
 */
export {
  atStatement,
  ConfigError,
  describeError,
  EnqueueError,
  HandlerError,
  HandlerResultError,
  IllegalTransitionError,
  isRetryableStoreError,
  isStoreError,
  JobTimeoutError,
  SchemaError,
  StatusqError,
  StoreError,
  type StoreErrorKind,
} from './protocol/errors.js';
export {
  assertTransition,
  DEFAULT_STATUS_CODES,
  isLegalTransition,
  isStatusName,
  REQUEUE_SOURCES,
  requeueCause,
  resolveStatusCodes,
  sourcesOf,
  STATUS_NAMES,
  statusCode,
  type StatusCodes,
  statusName,
  type StatusName,
  type TransitionCause,
  TRANSITIONS,
} from './protocol/status.js';
export { derivedName, quoteIdentifierWith, splitTableName, validateIdentifier, validateTableName } from './protocol/identifiers.js';
export { parseServerUrl, redactUrl, secretScrubber, urlSecrets } from './store/urls.js';
export {
  BESIDE_COLUMNS,
  type BesideColumn,
  configuredColumns,
  DEFAULT_COLUMN_NAMES,
  DEFAULT_OPTIONAL_COLUMN_NAMES,
  idValueIn,
  isBesideColumn,
  OPTIONAL_COLUMNS,
  type OptionalColumn,
  type Order,
  type OrderTimeEncoding,
  type QueueFeatures,
  type ResolvedTable,
  resolveTable,
  type TableConfig,
  type TextColumn,
  validateTableConfig,
} from './protocol/table.js';
export {
  type ColumnInfo,
  type ColumnLimit,
  columnOverflow,
  idFitsColumn,
  type IntegerRange,
  integerRangeOfBits,
} from './protocol/columns.js';
export {
  type AdapterModule,
  type CallerRunner,
  type ClaimIdsOnServer,
  type ClaimRequest,
  type ClaimResult,
  type ClaimStrategy,
  type ColumnKind,
  type ColumnSpec,
  type ConnectOptions,
  DEFAULT_CAPABILITIES,
  type DispatchIndexSpec,
  emitStoreWarning,
  type ExecResult,
  type ExplainOptions,
  IDLE_PROBE_WAIT_MS,
  type JobId,
  type KeyIndexSpec,
  type KindIndexSpec,
  type GroupIndexSpec,
  type NativeClaim,
  type PendingIndexSpec,
  type PriorityIndexSpec,
  type QueryPlan,
  type Row,
  type SchemaSupport,
  type ServerCheck,
  type ServerFacts,
  type SqlDialect,
  type SqlParam,
  type SqlValue,
  type Statement,
  type StatementLimit,
  type StatementRunner,
  type LentTransaction,
  type SettleWakeUpSpec,
  type Store,
  type StoreCapabilities,
  type StoreInspection,
  type StoreWarning,
  type Upsert,
} from './store/store.js';
export {
  callerRunner,
  type CallerRunnerOptions,
  integerIdOf,
  KNEX_PLACEHOLDER,
  type KnexRaw,
  knexTransactionOf,
  unrecognisedHandle,
} from './store/caller-transaction.js';
export {
  type AttemptCharge,
  GIVE_UP_PAGE,
  LOOK_AHEAD_ROWS,
  MAX_ERROR_LENGTH,
  type NotBefore,
  Params,
  type QuotedTable,
  quoteTable,
  TransitionSql,
  truncateError,
} from './sql/transition-sql.js';
export {
  candidateStatements,
  CLAIM_CLOCK,
  claimConditionalUpdate,
  claimGivenIds,
  claimRows,
  keyOf,
  mergeCandidates,
  oneStatementClaim,
  orderLike,
  sortByQueueOrder,
  sortIds,
} from './sql/claim.js';
export { fitsStatementLimit, splitToFit, statementBytes, statementTooLarge } from './sql/statement-size.js';
export {
  type ClosableSocket,
  DEADLINE_URL_PARAMETERS,
  deadlineOf,
  deadlineOption,
  deadlinesFromUrl,
  endWithin,
  raceDeadline,
  SERVER_CONNECTION,
  serverConnectionOptions,
  type ServerConnectionOptions,
  settlesWithin,
  type StoreCallDeadlines,
  untilAborted,
  type UrlDeadlines,
} from './store/deadline.js';
export { ConnectionGate } from './store/connection-gate.js';
export { POOL_URL_PARAMETER, poolFromUrl, refuseUnknownUrlParameters } from './store/server-url.js';
export { sleep } from './store/retry.js';
export {
  describeFromCatalog,
  inTransaction,
  lendPooledConnection,
  type LendingOps,
  type PooledConnectionOps,
  runInOrder,
  withPooledConnection,
} from './store/pooled-connection.js';
// The broker contract and its message codec (a broker package), and the names of the tables and indexes statusq
// makes (an adapter's checks and tests).
export { besideTableName, type ColumnGroup, dispatchIndexName, hasIndex, keyIndexName, kindIndexName, groupIndexName, pendingIndexName, priorityIndexName } from './sql/schema.js';
export { type Broker, type BrokerConnectOptions, BrokerError, type BrokerErrorKind, type BrokerModule, type ConsumeOptions, type DeadLetter, decodeDispatch, type Delivery, type DispatchMessage, encodeDeadLetter, encodeDispatch, type MalformedDelivery, type Subscription } from './broker/broker.js';
export { ensureSideTable } from './sql/side-tables.js';
