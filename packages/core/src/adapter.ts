/**
 * `@statusq/core/adapter`: what an adapter author uses. The Store contract and its capability flags, the
 * guarded transition SQL every dialect shares, the claim pipeline, deadlines, identifier validation and
 * the errors an adapter maps native failures to. Applications import `@statusq/core`.
 */
export * from './errors.js';
export * from './status.js';
export * from './identifiers.js';
export * from './urls.js';
export * from './table.js';
export * from './store.js';
export * from './caller-transaction.js';
export * from './transition-sql.js';
export * from './claim.js';
export * from './statement-size.js';
export * from './deadline.js';
export { ConnectionGate } from './connection-gate.js';
export { POOL_URL_PARAMETER, poolFromUrl, refuseUnknownUrlParameters } from './server-url.js';
export { sleep } from './retry.js';
export * from './pooled-connection.js';
