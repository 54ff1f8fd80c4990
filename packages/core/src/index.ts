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
export {
  connect,
  schemeOf,
  adapterModuleFor,
  connectBroker,
  brokerModuleFor,
  assertBrokerInstalled,
  assertAdapterInstalled,
  type ConnectUrlOptions,
  type ConnectBrokerOptions,
} from './connect.js';
export {
  type Broker,
  type BrokerConnectOptions,
  BrokerError,
  type BrokerErrorKind,
  type BrokerModule,
  type ConsumeOptions,
  type DeadLetter,
  deadLetterFor,
  decodeDispatch,
  defaultBrokerQueue,
  type Delivery,
  dispatchId,
  type DispatchMessage,
  encodeDeadLetter,
  encodeDispatch,
  type MalformedDelivery,
  PUBLISHED_BROKERS,
  type Subscription,
} from './broker/broker.js';
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
export {
  type ChargeReport,
  type DeadWorkerReport,
  DEFAULT_LEASE_MS,
  type GivenUpRow,
  Queue,
  type RequeueOptions,
  type RequeueReport,
} from './queue/queue.js';
export type { EnqueueOptions, EnqueueOutcome } from './queue/enqueue-options.js';
export { parseRunAt, toSqlValue } from './queue/row-values.js';
export {
  MAX_CATCH_UP,
  parseSchedules,
  type ScheduleDefinition,
  type ScheduledEvent,
  Scheduler,
  type SchedulerOptions,
} from './features/scheduler.js';
export {
  DEFAULT_PRUNE_BATCH,
  MAX_PRUNE_BATCH,
  PRUNABLE_STATUSES,
  type PruneOptions,
  type PruneReport,
  pruneRows,
} from './features/prune.js';
export {
  DEFAULT_INSTANCE_LEASE_MS,
  type InstanceHolder,
  instanceHolders,
  InstanceSlot,
  type InstanceSlotOptions,
  MAX_INSTANCES,
  validateInstanceCap,
} from './features/instance-slots.js';
export { parseRateLimit, type RateLimit } from './limits/rate-budget.js';
export { MAX_PROGRESS_LENGTH, PROGRESS_INTERVAL_MS } from './worker/progress-writer.js';
export {
  DEFAULT_COUNT_UP_TO,
  DEFAULT_EXACT_BELOW_ROWS,
  type MonitoringCountOptions,
  type MonitoringCounts,
  type StatusBucket,
  type StatusCounts,
} from './queue/monitoring-counts.js';
export {
  INSPECT_STATUSES,
  DEFAULT_INSPECT_LIMIT,
  MAX_INSPECT_LIMIT,
  isInspectStatus,
  resolveInspectOptions,
  type InspectStatus,
  type InspectOptions,
  type InspectReport,
  type InspectIdsReport,
} from './queue/inspect.js';
export {
  type AbuseRule,
  type Handler,
  type HandlerModule,
  type IdOf,
  type Job,
  type JobContext,
  loadHandler,
  SettleDirective,
} from './worker/handler.js';
export { TypedEmitter, type WorkerEventName, type WorkerEvents } from './worker/events.js';
export { backoffDelay, type BackoffOptions } from './store/retry.js';
export {
  COLUMN_GROUPS,
  assertDispatchColumns,
  besideTableName,
  dispatchIndexName,
  hasIndex,
  initTable,
  keyIndexName,
  migrateTable,
  missingColumnError,
  parseColumnGroups,
  pendingIndexName,
  priorityIndexName,
  type ColumnGroup,
  type InitOptions,
  type InitReport,
  type MigrateOptions,
  type MigrateReport,
} from './sql/schema.js';
export {
  INSTANCE_COLUMNS,
  RATE_LIMIT_COLUMNS,
  SCHEDULE_COLUMNS,
  ensureSideTable,
  insertSideRow,
  sideTableName,
  type SideTable,
} from './sql/side-tables.js';
export { Worker } from './worker/worker.js';
export { DEFAULT_POLL_MAX_MS, DEFAULT_POLL_MIN_MS, defaultWorkerId, type WorkerOptions } from './worker/worker-options.js';
export { emptyWorkerCounters, HAND_BACK_DEADLINE_MS, STOP_MARGIN_MS, type StopReport, type WorkerCounters } from './worker/reports.js';
export {
  DEFAULT_REDISPATCH_MS,
  DEFAULT_RELAY_BATCH,
  Relay,
  type RelayCounters,
  type RelayEvents,
  type RelayOptions,
} from './features/relay.js';
export { DEFAULT_READ_ONLY_WAIT_MS, READ_ONLY_CHECK_MAX_MS, isReadOnlyError } from './worker/read-only-wait.js';
export { EXIT, Supervisor, type SupervisorEvent, type SupervisorOptions, validateProcessCount } from './worker/supervisor.js';
