/**
 * `@statusq/core`: what an application uses, and nothing else (about 60 names; scripts/check-public-face.mjs holds
 * the budget): connect, the Worker and its handler types, the Queue, the Scheduler, the Supervisor, the Relay,
 * prune, instance slots, the errors, status codes and the table helpers (initTable, migrateTable).
 * Adapter and broker authors import `@statusq/core/adapter`; statusq's own tools (the CLI, its dashboard, the bench,
 * the conformance kit) import `@statusq/core/tools`, which carries no promise to applications.
 */
export { type AbuseRule, type Handler, type HandlerModule, type Job, type JobContext, type KindHandlers, loadHandler, SettleDirective } from './worker/handler.js';
export { ClaimLostError, ConfigError, describeError, EnqueueError, HandlerResultError, isRetryableStoreError, JobTimeoutError, JobTransactionError, SchemaError, StatusqError, StoreError, type StoreErrorKind } from './protocol/errors.js';
export { connect, connectBroker, type ConnectBrokerOptions, type ConnectUrlOptions } from './connect.js';
export { DEFAULT_STATUS_CODES, statusCode, type StatusName, statusName } from './protocol/status.js';
export type { EnqueueOptions, EnqueueOutcome } from './queue/enqueue-options.js';
export { type InitOptions, initTable, type MigrateOptions, type MigrateReport, migrateTable } from './sql/schema.js';
export type { InspectOptions, InspectReport } from './queue/inspect.js';
export { InstanceSlot, type InstanceSlotOptions } from './features/instance-slots.js';
export type { JobId, Row, Store } from './store/store.js';
export type { Order, TableConfig } from './protocol/table.js';
export { type PruneOptions, pruneRows } from './features/prune.js';
export { Queue, type RequeueOptions } from './queue/queue.js';
export type { RateLimit } from './limits/rate-budget.js';
export { Relay, type RelayOptions } from './features/relay.js';
export { type ScheduleDefinition, Scheduler, type SchedulerOptions } from './features/scheduler.js';
export type { StatusCounts } from './queue/monitoring-counts.js';
export type { StopReport, WorkerCounters } from './worker/reports.js';
export { Supervisor, type SupervisorEvent, type SupervisorOptions } from './worker/supervisor.js';
export { Worker } from './worker/worker.js';
export type { WorkerEvents } from './worker/events.js';
export type { WorkerOptions } from './worker/worker-options.js';
export { isReadOnlyError } from './worker/read-only-wait.js';
