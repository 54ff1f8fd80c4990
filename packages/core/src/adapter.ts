/**
 * `@statusq/core/adapter`: what an adapter author uses. The Store contract and its capability flags, the
 * guarded transition SQL every dialect shares, the claim pipeline, deadlines, identifier validation and
 * the errors an adapter maps native failures to. Applications import `@statusq/core`.
 */
export * from './protocol/errors.js';
export * from './protocol/status.js';
export * from './protocol/identifiers.js';
export * from './store/urls.js';
export * from './protocol/table.js';
export * from './protocol/columns.js';
export * from './store/store.js';
export * from './store/caller-transaction.js';
export * from './sql/transition-sql.js';
export * from './sql/claim.js';
export * from './sql/statement-size.js';
export * from './store/deadline.js';
export { ConnectionGate } from './store/connection-gate.js';
export { POOL_URL_PARAMETER, poolFromUrl, refuseUnknownUrlParameters } from './store/server-url.js';
export { sleep } from './store/retry.js';
export * from './store/pooled-connection.js';
