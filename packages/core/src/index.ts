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
} from './errors.js';
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
} from './status.js';
export { parseDuration, formatDuration, MAX_DURATION_MS, MAX_DELAY_MS, DELAY_LIMIT, type DurationLimit } from './duration.js';
export { redactUrl } from './urls.js';
export { connect, schemeOf, adapterModuleFor, connectBroker, brokerModuleFor, assertBrokerInstalled, assertAdapterInstalled, type ConnectUrlOptions, type ConnectBrokerOptions } from './connect.js';
export * from './broker.js';
export {
  OPTIONAL_COLUMNS,
  DEFAULT_OPTIONAL_COLUMN_NAMES,
  validateTableConfig,
  type OptionalColumn,
  type Order,
  type TableConfig,
  type ResolvedTable,
  type QueueFeatures,
} from './table.js';
export type { Store, StoreCapabilities, StoreInspection, ServerFacts, ServerCheck, QueryPlan, ExplainOptions, ClaimStrategy, AdapterModule, ConnectOptions, StoreWarning, JobId, Row, SqlValue, SqlParam } from './store.js';
export * from './queue.js';
export * from './scheduler.js';
export * from './prune.js';
export * from './instance-slots.js';
export { parseRateLimit, type RateLimit } from './rate-limiter.js';
export { MAX_PROGRESS_LENGTH, PROGRESS_INTERVAL_MS } from './progress-writer.js';
export { DEFAULT_COUNT_UP_TO, DEFAULT_EXACT_BELOW_ROWS, type MonitoringCountOptions, type MonitoringCounts, type StatusBucket } from './monitoring-counts.js';
export { INSPECT_STATUSES, DEFAULT_INSPECT_LIMIT, MAX_INSPECT_LIMIT, isInspectStatus, resolveInspectOptions, type InspectStatus, type InspectOptions, type InspectReport, type InspectIdsReport } from './inspect.js';
export * from './handler.js';
export * from './events.js';
export { backoffDelay, type BackoffOptions } from './retry.js';
export * from './schema.js';
export * from './worker.js';
export * from './relay.js';
export { DEFAULT_READ_ONLY_WAIT_MS, READ_ONLY_CHECK_MAX_MS, isReadOnlyError } from './read-only-wait.js';
export * from './supervisor.js';
