/**
 * `@statusq/core/tools`: what statusq's own tools share with core beyond the application face: the CLI (flag
 * parsing and validation, defaults it prints, exit codes), the dashboard, the bench and the conformance kit.
 * Not for applications: these names may change with any release. Applications import `@statusq/core`.
 */
export { assertAdapterInstalled, assertBrokerInstalled } from './connect.js';
export { loadKindHandlers } from './worker/handler.js';
export { parseKindLimits } from './limits/kind-concurrency.js';
export { assertDispatchColumns, besideTableName, hasIndex, keyIndexName, kindIndexName, parseColumnGroups, pendingIndexName, priorityIndexName } from './sql/schema.js';
export { type Broker, BrokerError, type DeadLetter, deadLetterFor } from './broker/broker.js';
export { type ChargeReport, type DeadWorkerReport, DEFAULT_LEASE_MS, type GivenUpRow } from './queue/queue.js';
export type { ClaimStrategy, ConnectOptions, SqlParam, StoreCapabilities, StoreWarning } from './store/store.js';
export { DEFAULT_COUNT_UP_TO, DEFAULT_EXACT_BELOW_ROWS, type MonitoringCounts, type StatusBucket } from './queue/monitoring-counts.js';
export { DEFAULT_INSTANCE_LEASE_MS, instanceHolders, validateInstanceCap } from './features/instance-slots.js';
export { DEFAULT_POLL_MIN_MS } from './worker/worker-options.js';
export { DELAY_LIMIT, formatDuration, parseDuration } from './protocol/duration.js';
export { emptyWorkerCounters, STOP_MARGIN_MS } from './worker/reports.js';
export { EXIT, validateProcessCount } from './worker/supervisor.js';
export { type InspectStatus, resolveInspectOptions } from './queue/inspect.js';
export { isStatusName, REQUEUE_SOURCES, requeueCause } from './protocol/status.js';
export { OPTIONAL_COLUMNS, type OptionalColumn, type ResolvedTable, validateTableConfig } from './protocol/table.js';
export { parseRateLimit } from './limits/rate-budget.js';
export { parseRunAt } from './queue/row-values.js';
export { parseSchedules, type ScheduledEvent } from './features/scheduler.js';
export { PROGRESS_INTERVAL_MS } from './worker/progress-writer.js';
export { READ_ONLY_CHECK_MAX_MS } from './worker/read-only-wait.js';
export { redactUrl } from './store/urls.js';
export type { WorkerEventName } from './worker/events.js';
// The doctor's view of a table: what a claim of it runs, and what its claims table keeps.
export { claimPlanStatements } from './sql/claim.js';
export { countOrphanedClaims } from './features/prune.js';
// What the CLI, dashboard and bench read of a table and a store beyond the application face.
export { BESIDE_COLUMNS, configuredColumns, DEFAULT_OPTIONAL_COLUMN_NAMES, isBesideColumn, resolveTable } from './protocol/table.js';
export { derivedName, splitTableName, validateTableName } from './protocol/identifiers.js';
export type { ColumnInfo } from './protocol/columns.js';
export type { QueryPlan, Statement } from './store/store.js';
export { raceDeadline } from './store/deadline.js';
export { sleep } from './store/retry.js';
export { secretScrubber, urlSecrets } from './store/urls.js';
