// The dashboard's HTTP side: the page and its assets, the JSON API over one Queue, and the guarded actions.
// Every answer is built here; the command (command.ts) only opens the store, listens and waits for a signal.
import { readFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createAdaptorServer } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { serveStatic } from '@hono/node-server/serve-static';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ConfigError, StatusqError, StoreError, type JobId, type Queue, type StatusCounts, type StatusName } from '@statusq/core';
import { DEFAULT_LEASE_MS, resolveInspectOptions, type InspectStatus } from '@statusq/core/tools';
import { parseId } from '../with-store.js';
import { toJson } from '../json.js';
import { errorFields, type Logger } from '../log.js';
import { oneLine } from '../text.js';
import type { ErrorKind } from './api-types.js';
import { errorBody, JSON_TYPE, type DashboardEnv } from './errors.js';
import { guards, type GuardOptions } from './guards.js';
import type { ThroughputSampler } from './sampler.js';

/** The statuses an action may requeue; `processing` only rows whose lease expired. */
export const REQUEUE_STATUSES = ['failed', 'abuse', 'processing'] as const;
/** Most ids one action (requeue, cancel) may name: a page selects from a listing, and a listing holds at most 1000 rows. */
export const MAX_REQUEUE_IDS = 1000;
/** An action's body is a status or a reason, and at most MAX_REQUEUE_IDS ids. */
const MAX_BODY_BYTES = 64 * 1024;

export interface DashboardAppOptions {
  /** The table in its configured claim order (listings of pending rows). */
  queue: Queue;
  /** The same table, oldest first: its first pending row is the one that has waited longest. */
  oldestFirst: Queue;
  readOnly: boolean;
  /** --lease: processing rows are requeued only past it; undefined: the core's default. */
  leaseMs: number | undefined;
  guards: GuardOptions;
  /** Holds index.html and assets/ (the CLI: dist/dashboard, where vite builds the page). */
  assetsDir: string;
  sampler: ThroughputSampler;
  log: Logger;
  /** Hides the database URL's password in text that leaves the process (core's secretScrubber). */
  redact: (text: string) => string;
}

type Ctx = Context<DashboardEnv>;

export function dashboardApp(options: DashboardAppOptions): Hono<DashboardEnv> {
  const { queue, oldestFirst, log, redact } = options;
  const table = queue.table;
  const leaseMs = table.features.leases ? (options.leaseMs ?? DEFAULT_LEASE_MS) : null;
  // Every string of every answer is scrubbed, not only error messages: a row's failure reason or result may
  // quote the password (a driver's error, a handler's message), and inspect and the logs hide it too.
  const json = (c: Ctx, value: unknown) => c.body(toJson(value, redact), 200, JSON_TYPE);
  const fail = (c: Ctx, status: 400 | 403 | 404 | 413 | 415 | 500 | 503, kind: ErrorKind, message: string) => c.body(errorBody(kind, redact(message)), status, JSON_TYPE);
  const database = databaseHealth(log, redact);

  const app = new Hono<DashboardEnv>();
  app.use('*', async (c, next) => {
    await next();
    c.header('X-Content-Type-Options', 'nosniff');
    // The actions are buttons: no other site may frame the page and trick a click.
    c.header('X-Frame-Options', 'DENY');
    c.header('Content-Security-Policy', "frame-ancestors 'none'");
    c.header('Referrer-Policy', 'no-referrer');
  });
  app.use('*', guards(options.guards));
  app.use('*', async (c, next) => {
    if (c.req.method !== 'POST') return next();
    if (options.readOnly) return fail(c, 403, 'ReadOnly', 'this dashboard runs with --read-only: no action is allowed');
    // A cross-site form can post text/plain or a form without a preflight; it can never post application/json.
    const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') return fail(c, 415, 'UnsupportedMediaType', `actions take Content-Type: application/json, got ${JSON.stringify(type || 'none')}`);
    return next();
  });

  app.get('/', async (c) => {
    const index = join(options.assetsDir, 'index.html');
    let page: string;
    try {
      page = await readFile(index, 'utf8');
    } catch {
      return c.text(`statusq was built without its dashboard page (${index} is missing): build apps/cli with its page (pnpm build), or install a published statusq. The JSON API under /api/ works without it.\n`, 500);
    }
    c.header('Cache-Control', 'no-cache');
    return c.html(page);
  });
  app.get(
    '/assets/*',
    async (c, next) => {
      await next();
      // vite names assets by their content hash: a changed file is a new name.
      if (c.res.status === 200) c.header('Cache-Control', 'public, max-age=31536000, immutable');
    },
    serveStatic({ root: options.assetsDir }),
  );

  // As `statusq stats --json` prints them: on a table with a kind column, the same counts per kind under `kinds`.
  // There the totals are the sums of the kinds' counts: one GROUP BY per poll of each open page, not two.
  const countsWithKinds = async (): Promise<{ counts: StatusCounts; kinds: Record<string, StatusCounts> | null }> => {
    const kinds = await queue.countsByKind();
    if (kinds === null) return { counts: await queue.counts(), kinds: null };
    const counts: StatusCounts = { pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 };
    for (const byStatus of Object.values(kinds)) for (const status of Object.keys(counts) as Array<keyof StatusCounts>) counts[status] += byStatus[status];
    return { counts, kinds };
  };

  app.get('/api/stats', async (c) => {
    const { counts, kinds } = await database.read(countsWithKinds);
    return json(c, kinds === null ? counts : { ...counts, kinds });
  });

  app.get('/api/overview', async (c) => {
    const [counted, oldest, clockMs, dispatched] = await database.read(() =>
      Promise.all([countsWithKinds(), oldestFirst.inspect({ status: 'pending', limit: 1 }), queue.store.inspection?.clockMs() ?? Promise.resolve(null), queue.dispatchedCount()]),
    );
    const { counts, kinds } = counted;
    const clock = clockMs !== null ? new Date(clockMs) : oldest.clock;
    const row = oldest.rows[0];
    const order = row?.[table.order];
    return json(c, {
      table: table.table,
      readOnly: options.readOnly,
      features: { leases: table.features.leases, retries: table.features.retries, results: table.columns.result !== undefined },
      columns: { id: table.id, status: table.status, order: table.order, ...table.columns },
      counts,
      // On a table with a kind column: counts per kind, rows without a kind under ''.
      ...(kinds !== null && { kinds }),
      // On a table fed to a broker (statusq relay): pending rows published and waiting in the broker's queue.
      dispatched,
      oldestPending: row === undefined ? null : { id: row[table.id], order, ageMs: order instanceof Date && clock !== null ? clock.getTime() - order.getTime() : null },
      clock,
      leaseMs,
    });
  });

  app.get('/api/throughput', (c) => json(c, options.sampler.read()));

  app.get('/api/rows', async (c) => {
    const status = c.req.query('status');
    const limitText = c.req.query('limit');
    if (limitText !== undefined && !/^\d+$/.test(limitText)) return fail(c, 400, 'BadRequest', `limit must be a whole number, got ${JSON.stringify(limitText)}`);
    const inspect = resolveInspectOptions({ status: status as InspectStatus | undefined, limit: limitText === undefined ? undefined : Number(limitText), kind: c.req.query('kind') });
    const report = await database.read(() => queue.inspect(inspect));
    return json(c, report);
  });

  app.get('/api/rows/:id', async (c) => {
    const id = parseId(c.req.param('id'), queue.idColumn, 'dashboard', 'id');
    const report = await database.read(() => queue.inspectIds([id]));
    const row = report.rows[0];
    if (row === undefined) return fail(c, 404, 'NotFound', `no row of ${table.table} has ${table.id} ${String(id)}`);
    return json(c, { row, clock: report.clock });
  });

  // What every action (requeue, cancel) shares: a bounded JSON body, and who asked, for the log.
  const actionBodyLimit = bodyLimit({ maxSize: MAX_BODY_BYTES, onError: (c) => fail(c as Ctx, 413, 'BadRequest', `an action's body is at most ${MAX_BODY_BYTES} bytes`) });
  const actionBody = async (c: Ctx): Promise<{ json: unknown } | Response> => {
    try {
      return { json: await c.req.json() };
    } catch (error) {
      return fail(c, 400, 'BadRequest', `the body is not JSON: ${oneLine(error)}`);
    }
  };
  const actorOf = (c: Ctx) => `${c.get('user') ?? 'anonymous'}@${getConnInfo(c).remote.address ?? 'unknown'}`;

  app.post(
    '/api/requeue',
    actionBodyLimit,
    async (c) => {
      const body = await actionBody(c);
      if (body instanceof Response) return body;
      const request = requeueRequest(body.json, queue);
      if (request.status === 'processing' && !table.features.leases) {
        return fail(c, 400, 'BadRequest', `table ${table.table} has no lease column, so the dashboard cannot tell a crashed worker's rows from running ones; stop every worker, then run statusq requeue --status processing --force`);
      }
      const who = actorOf(c);
      const what = request.ids === undefined ? 'all' : request.ids.map(String).join(',');
      try {
        const report = await database.read(() => queue.requeueReport(request.status, { ids: request.ids, ...(request.status === 'processing' ? { leaseMs: options.leaseMs } : {}) }));
        log.info(
          { action: 'requeue', who, status: request.status, ids: request.ids === undefined ? 'all' : request.ids.map(String), requeued: report.requeued, live: report.live, notRequeued: report.notRequeued.length },
          `requeue ${request.status} ${what} by ${who}: requeued ${report.requeued}${report.live > 0 ? `, ${report.live} left with a live lease` : ''}${report.notRequeued.length > 0 ? `, ${report.notRequeued.length} not requeued` : ''}`,
        );
        return json(c, { requeued: report.requeued, live: report.live, leaseMs: report.leaseMs, notRequeued: report.notRequeued });
      } catch (error) {
        log.warn({ action: 'requeue', who, status: request.status, err: errorFields(error) }, `requeue ${request.status} ${what} by ${who} failed: ${redact(oneLine(error))}`);
        throw error;
      }
    },
  );

  // Cancel takes named rows only, never "all": the ids a page selected from a listing of pending or processing rows.
  app.post(
    '/api/cancel',
    actionBodyLimit,
    async (c) => {
      const body = await actionBody(c);
      if (body instanceof Response) return body;
      const request = cancelRequest(body.json, queue);
      const who = actorOf(c);
      const what = request.ids.map(String).join(',');
      try {
        const report = await database.read(() => queue.cancel(request.ids, request.reason ?? `by ${who} (dashboard)`));
        log.info(
          // The reason as asked (null: the default, which names who asked), so the log alone says why rows were stopped.
          { action: 'cancel', who, ids: request.ids.map(String), reason: request.reason ?? null, cancelled: report.cancelled, notCancelled: report.notCancelled.length },
          `cancel ${what} by ${who}: cancelled ${report.cancelled}${report.notCancelled.length > 0 ? `, ${report.notCancelled.length} not cancelled` : ''}`,
        );
        return json(c, { cancelled: report.cancelled, notCancelled: report.notCancelled });
      } catch (error) {
        log.warn({ action: 'cancel', who, err: errorFields(error) }, `cancel ${what} by ${who} failed: ${redact(oneLine(error))}`);
        throw error;
      }
    },
  );

  app.notFound((c) => fail(c, 404, 'NotFound', `no such page: ${c.req.method} ${c.req.path}`));
  app.onError((error, c) => {
    if (error instanceof StoreError) return fail(c, 503, 'Database', `${error.kind}${error.nativeCode !== undefined ? ` ${error.nativeCode}` : ''}: ${oneLine(error.message)}`);
    if (error instanceof StatusqError) return fail(c, 400, 'BadRequest', oneLine(error.message));
    log.error({ err: errorFields(error) }, `dashboard: ${c.req.method} ${c.req.path} failed: ${redact(oneLine(error))}`);
    return fail(c, 500, 'Internal', oneLine(error));
  });
  return app;
}

/** A requeue body: `{ status, ids: [...] }` or `{ status, all: true }`, never both, never an empty list. */
function requeueRequest(body: unknown, queue: Queue): { status: StatusName; ids: JobId[] | undefined } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ConfigError('requeue: the body must be a JSON object { "status": ..., "ids": [...] } or { "status": ..., "all": true }');
  const { status, ids, all, ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new ConfigError(`requeue: unknown field${unknown.length === 1 ? '' : 's'} ${unknown.map((k) => JSON.stringify(k)).join(', ')}`);
  if (typeof status !== 'string' || !(REQUEUE_STATUSES as readonly string[]).includes(status)) {
    throw new ConfigError(`requeue: status must be ${REQUEUE_STATUSES.slice(0, -1).join(', ')} or ${REQUEUE_STATUSES.at(-1)}, got ${JSON.stringify(status ?? null)}`);
  }
  if ((ids === undefined) === (all === undefined)) throw new ConfigError('requeue: give exactly one of "ids": [...] or "all": true');
  if (all !== undefined) {
    if (all !== true) throw new ConfigError(`requeue: "all" must be true, got ${JSON.stringify(all)}`);
    return { status: status as StatusName, ids: undefined };
  }
  return { status: status as StatusName, ids: actionIds('requeue', ids, queue, ' (every row is "all": true)') };
}

/** A cancel body: `{ ids: [...], reason?: "..." }`, a non-empty list of at most MAX_REQUEUE_IDS ids. */
function cancelRequest(body: unknown, queue: Queue): { ids: JobId[]; reason: string | undefined } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ConfigError('cancel: the body must be a JSON object { "ids": [...], "reason": "..." }');
  const { ids, reason, ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new ConfigError(`cancel: unknown field${unknown.length === 1 ? '' : 's'} ${unknown.map((k) => JSON.stringify(k)).join(', ')}`);
  if (reason !== undefined && (typeof reason !== 'string' || reason.length === 0)) throw new ConfigError(`cancel: "reason" must be a non-empty string, got ${JSON.stringify(reason)}`);
  return { reason: reason as string | undefined, ids: actionIds('cancel', ids, queue) };
}

/**
 * An action's `ids`: a non-empty array of at most MAX_REQUEUE_IDS, each parsed as `requeue --id` parses one.
 * Strings are accepted because the API sends back as strings the ids a JSON number cannot hold exactly.
 */
function actionIds(action: 'requeue' | 'cancel', ids: unknown, queue: Queue, whenEmpty = ''): JobId[] {
  if (!Array.isArray(ids) || ids.length === 0) throw new ConfigError(`${action}: "ids" must be a non-empty array${whenEmpty}`);
  if (ids.length > MAX_REQUEUE_IDS) throw new ConfigError(`${action}: at most ${MAX_REQUEUE_IDS} ids at once, got ${ids.length}`);
  return ids.map((id) => {
    if ((typeof id !== 'number' || !Number.isSafeInteger(id)) && typeof id !== 'string') throw new ConfigError(`${action}: an id is an integer or a string, got ${JSON.stringify(id)}`);
    return parseId(String(id), queue.idColumn, 'dashboard', 'id');
  });
}

/**
 * Runs the database reads and writes of requests, and logs an outage once when it starts (each poll of each
 * open page would otherwise log it again) and once when the database answers again. The store reconnects by
 * itself; until it can, requests answer 503.
 */
function databaseHealth(log: Logger, redact: (text: string) => string) {
  let down = false;
  return {
    async read<T>(work: () => Promise<T>): Promise<T> {
      try {
        const result = await work();
        if (down) {
          down = false;
          log.info('the database answers again');
        }
        return result;
      } catch (error) {
        if (error instanceof StoreError && !down) {
          down = true;
          log.warn({ err: errorFields(error) }, `the database does not answer (${error.kind}): ${redact(oneLine(error))}; the API answers 503 until it does`);
        }
        throw error;
      }
    },
  };
}

export interface ListeningDashboard {
  /** The port it listens on (the one chosen when 0 was asked). */
  readonly port: number;
  close(): Promise<void>;
}

export async function listen(app: Hono<DashboardEnv>, host: string, port: number): Promise<ListeningDashboard> {
  const server = createAdaptorServer({ fetch: app.fetch }) as Server;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => reject(new ConfigError(`dashboard: cannot listen on ${host}:${port}: ${error.code ?? error.message}`)));
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Open pages keep connections alive; shutting down must not wait for them.
        server.closeAllConnections();
      }),
  };
}
