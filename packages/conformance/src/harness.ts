/**
 * What every conformance test stands on, gathered in one import: a fresh database per test, stores and
 * workers the suite tracks (so afterEach can prove none was left open or running), child processes, bounded
 * waits instead of sleeps, and small helpers to read the table back. Each part lives in its own file.
 */
export { FAST, TestEnv, drainingJobs, type StartedWorker } from './test-env.js';
export { ChildHandle, childScript, moduleUrl } from './child-handle.js';
export { withLatency } from './latency.js';
export { delay, deferred, flushEventLoop, nextEvent, waitFor, withDeadline, type Deferred } from './waiting.js';
export { Ledger, countsOf, idKey, placeholders, readRow, readRows, statusOf, toMs } from './rows.js';
