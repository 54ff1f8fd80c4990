/**
 * `@statusq/core`: what an application uses — the worker, the queue, the supervisor, errors, status codes,
 * the table helpers (initTable, migrateTable) and the types of the Store contract it passes around.
 * Adapter authors import `@statusq/core/adapter`, which adds the SQL builders, the claim pipeline and the
 * helpers an adapter needs.
 */
export {
  StatusqError,
  ConfigError,
  SchemaError,
  IllegalTransitionError,
  HandlerError,
  HandlerResultError,
  JobTimeoutError,
  StoreError,
  EnqueueError,
  isRetryableStoreError,
  isStoreError,
  describeError,
  type StoreErrorKind,
} from './protocol/errors.js';
export {
  DEFAULT_STATUS_CODES,
  STATUS_NAMES,
  TRANSITIONS,
  REQUEUE_SOURCES,
  isLegalTransition,
  assertTransition,
  requeueCause,
  isStatusName,
  statusName,
  statusCode,
  sourcesOf,
  resolveStatusCodes,
  type StatusName,
  type StatusCodes,
  type TransitionCause,
} from './protocol/status.js';
export { parseDuration, formatDuration, MAX_DURATION_MS, MAX_DELAY_MS, DELAY_LIMIT, type DurationLimit } from './protocol/duration.js';
export { redactUrl } from './store/urls.js';
export { connect, schemeOf, adapterModuleFor, connectBroker, brokerModuleFor, assertBrokerInstalled, assertAdapterInstalled, type ConnectUrlOptions, type ConnectBrokerOptions } from './connect.js';
export * from './broker/broker.js';
export {
  OPTIONAL_COLUMNS,
  DEFAULT_OPTIONAL_COLUMN_NAMES,
  validateTableConfig,
  type OptionalColumn,
  type Order,
  type TableConfig,
  type ResolvedTable,
  type QueueFeatures,
} from './protocol/table.js';
export type { Store, StoreCapabilities, StoreInspection, ServerFacts, ServerCheck, QueryPlan, ExplainOptions, ClaimStrategy, AdapterModule, ConnectOptions, StoreWarning, JobId, Row, SqlValue, SqlParam } from './store/store.js';
export * from './queue/queue.js';
export type { EnqueueOptions, EnqueueOutcome } from './queue/enqueue-options.js';
export { parseRunAt, toSqlValue } from './queue/row-values.js';
export * from './features/scheduler.js';
export * from './features/prune.js';
export * from './features/instance-slots.js';
export { parseRateLimit, type RateLimit } from './features/rate-limiter.js';
export { MAX_PROGRESS_LENGTH, PROGRESS_INTERVAL_MS } from './worker/progress-writer.js';
export { DEFAULT_COUNT_UP_TO, DEFAULT_EXACT_BELOW_ROWS, type MonitoringCountOptions, type MonitoringCounts, type StatusBucket, type StatusCounts } from './queue/monitoring-counts.js';
export { INSPECT_STATUSES, DEFAULT_INSPECT_LIMIT, MAX_INSPECT_LIMIT, isInspectStatus, resolveInspectOptions, type InspectStatus, type InspectOptions, type InspectReport, type InspectIdsReport } from './queue/inspect.js';
export * from './worker/handler.js';
export * from './worker/events.js';
export { backoffDelay, type BackoffOptions } from './store/retry.js';
export { COLUMN_GROUPS, assertDispatchColumns, besideTableName, dispatchIndexName, hasIndex, initTable, keyIndexName, migrateTable, missingColumnError, parseColumnGroups, pendingIndexName, priorityIndexName, type ColumnGroup, type InitOptions, type InitReport, type MigrateOptions, type MigrateReport } from './sql/schema.js';
export { INSTANCE_COLUMNS, RATE_LIMIT_COLUMNS, SCHEDULE_COLUMNS, ensureSideTable, insertSideRow, sideTableName, type SideTable } from './sql/side-tables.js';
export * from './worker/worker.js';
export * from './features/relay.js';
export { DEFAULT_READ_ONLY_WAIT_MS, READ_ONLY_CHECK_MAX_MS, isReadOnlyError } from './worker/read-only-wait.js';
export * from './worker/supervisor.js';
