import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { HandlerError } from '../protocol/errors.js';
import type { JobId, Row } from '../store/store.js';

/** `R` is the row's type; an interface of the table's columns will do (no index signature needed). */
/**
 * The type of a job's id: the row type's `id` when it has one that can be an id, else any JobId. A table
 * whose id column has another name says its type outright (`Worker.create<Row, string>`).
 */
export type IdOf<R> = R extends { readonly id: infer I } ? (I extends JobId ? I : JobId) : JobId;

/** `P`: the payload's type, as the caller declares it for a kind (`Worker.create`'s kinds); not checked. */
export interface Job<R extends object = Row, Id extends JobId = IdOf<R>, P = unknown> {
  /** The id column's value as the database returned it (typed by the caller, not checked). */
  readonly id: Id;
  /** The row's columns as the database returned them after the claim. */
  readonly row: R;
  /** 1 for the first attempt; attempt_count + 1 when the table counts attempts. */
  readonly attempt: number;
  /** The payload column parsed as JSON, when the table has one (undefined otherwise). */
  readonly payload: P;
  /** The row's kind, when the table has a kind column (null for a row enqueued without one, or no column). */
  readonly kind: string | null;
}

/**
 * What a handler may say besides returning or throwing. `abuse` and `giveUp` decide the outcome whether
 * the handler then returns, throws, or returns/throws the value they give back.
 */
export interface JobContext {
  /** Settle to abuse (2): a business rule judged this row abusive. Never retried. */
  abuse(reason?: string): SettleDirective;
  /** Settle to failed (0) with no retry, whatever attempts remain. */
  giveUp(reason?: string): SettleDirective;
  /**
   * How far the job got: a number from 0 to 100, or a small JSON value (at most 1,000 characters as JSON), kept in
   * the row's `progress` column while it runs (`migrate --with progress`). Throttled: however often it is called,
   * the row is written at most every PROGRESS_INTERVAL_MS, with the latest value; each write is fenced by the
   * claim like a settle, so a worker that lost its claim writes nothing. Returns at once; a bad value throws.
   */
  progress(value: unknown): void;
  /**
   * Runs `body` in a database transaction and settles the job done in that same transaction, guarded by the claim
   * token: what `body` writes through `tx` and the row's move to done commit together or not at all. A worker that
   * lost the claim meanwhile (lease taken over, row requeued or cancelled, timed out) has everything rolled back and
   * gets a ClaimLostError, so the writes of a job happen once however often it runs. `tx` is the store's own driver
   * handle on the transaction's connection (each adapter's lendTransaction names its type: run statements on it,
   * never commit or release it), or, with `{ knex }`, a transaction of the application's knex instance. Resolves with `body`'s value, which is the job's result (kept in the result
   * column when the table has one); the row stays done whatever the handler does after. Once per job, before the
   * handler returns (JobTransactionError otherwise, and nothing is written).
   */
  transaction<T, Tx = unknown>(body: (tx: Tx) => T | Promise<T>, options?: { readonly knex?: unknown }): Promise<Awaited<T>>;
  /** Aborted when the claim is lost (lease taken over), an operator cancels the job (the reason: `cancelled: ...`, see Queue.cancel), or the worker stops hard. */
  readonly signal: AbortSignal;
  readonly workerId: string;
}

export type Handler<R extends object = Row, Id extends JobId = IdOf<R>, P = unknown> = (job: Job<R, Id, P>, ctx: JobContext) => unknown;

/**
 * Handlers by kind (WorkerOptions.handlers): each kind's handler sees that kind's payload type, `Kinds[kind]`,
 * as the caller declares it (`Worker.create<Row, Id, { email: { to: string } }>`).
 */
export type KindHandlers<R extends object = Row, Id extends JobId = IdOf<R>, Kinds extends object = Record<string, unknown>> = {
  readonly [K in keyof Kinds & string]: Handler<R, Id, Kinds[K]>;
};
export type AbuseRule<R extends object = Row> = (row: R) => boolean | Promise<boolean>;

/** The outcome a handler chose through its context. */
export class SettleDirective {
  constructor(
    readonly kind: 'abuse' | 'giveUp',
    readonly reason: string,
  ) {}
}

export interface HandlerModule {
  /** The module's one handler (a default export that is a function); absent when it exports handlers by kind. */
  handler?: Handler;
  /** Handlers by kind: a default export that is an object of functions (`export default { email, report }`). */
  handlers?: Readonly<Record<string, Handler>>;
  /** A named export `isAbuse(row)` in the module, if any; runs before the handler. */
  isAbuse?: AbuseRule;
}

/**
 * Loads a handler module: its default export is `async (job, ctx) => ...`, or an object of such functions by
 * kind (`export default { email, report }`), and an optional named export `isAbuse(row)` is the business rule.
 * The module needs no import from statusq. Anything else is a HandlerError naming the export.
 */
export async function loadHandler(path: string): Promise<HandlerModule> {
  const module = await importModule(path);
  const exported = module.default;
  if (exported === undefined) throw new HandlerError(`handler ${path} has no default export; export default async (job, ctx) => { ... }, or an object of such functions by kind`);
  const isAbuse = module.isAbuse;
  if (isAbuse !== undefined && typeof isAbuse !== 'function') throw new HandlerError(`handler ${path}: the isAbuse export is not a function`);
  const rule = isAbuse ? { isAbuse: isAbuse as AbuseRule } : {};
  if (typeof exported === 'function') return { handler: exported as Handler, ...rule };
  if (exported === null || typeof exported !== 'object' || Array.isArray(exported)) {
    throw new HandlerError(`handler ${path}: the default export is ${exported === null ? 'null' : Array.isArray(exported) ? 'an array' : `a ${typeof exported}`}, not a function or an object of functions by kind`);
  }
  const entries = Object.entries(exported as Record<string, unknown>);
  if (entries.length === 0) throw new HandlerError(`handler ${path}: the default export is an empty object; give it a function per kind ({ email: async (job) => ... })`);
  for (const [kind, fn] of entries) {
    if (typeof fn !== 'function') throw new HandlerError(`handler ${path}: the default export's ${JSON.stringify(kind)} is a ${fn === null ? 'null' : typeof fn}, not a function`);
  }
  return { handlers: Object.fromEntries(entries) as Record<string, Handler>, ...rule };
}

/**
 * Handlers by kind from a directory: each `<kind>.mjs` or `<kind>.js` file's default export (a function) is that
 * kind's handler (`handlers/email.mjs` handles kind `email`). Other files are ignored; a directory with none,
 * or a kind file whose default export is not a function, is a HandlerError naming the file.
 */
export async function loadKindHandlers(dir: string): Promise<Readonly<Record<string, Handler>>> {
  const absolute = resolve(dir);
  if (!existsSync(absolute) || !statSync(absolute).isDirectory()) throw new HandlerError(`handlers directory not found: ${dir}`);
  const files = readdirSync(absolute).filter((name) => /\.m?js$/.test(name)).sort();
  if (files.length === 0) throw new HandlerError(`handlers directory ${dir} has no .mjs or .js file; each <kind>.mjs handles that kind`);
  const handlers: Record<string, Handler> = {};
  for (const file of files) {
    const kind = file.replace(/\.m?js$/, '');
    if (kind in handlers) throw new HandlerError(`handlers directory ${dir} has two files for kind ${JSON.stringify(kind)}`);
    const exported = (await importModule(join(dir, file))).default;
    if (typeof exported !== 'function') throw new HandlerError(`handler ${join(dir, file)}: the default export is ${exported === undefined ? 'missing' : `a ${exported === null ? 'null' : typeof exported}`}, not a function (it handles kind ${JSON.stringify(kind)})`);
    handlers[kind] = exported as Handler;
  }
  return handlers;
}

async function importModule(path: string): Promise<Record<string, unknown>> {
  const absolute = resolve(path);
  if (!existsSync(absolute)) throw new HandlerError(`handler file not found: ${path}`);
  try {
    return (await import(pathToFileURL(absolute).href)) as Record<string, unknown>;
  } catch (error) {
    throw new HandlerError(`handler ${path} could not be loaded: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}
