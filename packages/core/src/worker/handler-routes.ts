/**
 * Which handler runs a claimed job: the worker's one `handler`, or its `handlers` by kind. With handlers by
 * kind the worker claims only those kinds (ResolvedTable.claimKinds), so every job it gets has one; a row whose
 * kind the claim was not asked for would be a bug of the claim's, and is refused loudly rather than run by the
 * wrong code.
 */
import { ConfigError, HandlerError } from '../protocol/errors.js';
import { validateKind } from '../protocol/table.js';
import type { Handler, Job } from './handler.js';

export interface HandlerRoutes {
  /** The kinds the worker has handlers for, sorted; null: one handler for every row. */
  readonly kinds: readonly string[] | null;
  handlerFor(job: Job): Handler;
}

/** The routes of a worker's options: exactly one of `handler` and `handlers` (a non-empty map of functions). */
export function handlerRoutes(options: { handler?: unknown; handlers?: unknown }): HandlerRoutes {
  const { handler, handlers } = options;
  if (handler !== undefined && handlers !== undefined) throw new ConfigError('give a worker either handler (one for every row) or handlers (by kind), not both');
  if (handlers === undefined) {
    if (typeof handler !== 'function') throw new ConfigError('handler must be a function');
    const only = handler as Handler;
    return { kinds: null, handlerFor: () => only };
  }
  if (handlers === null || typeof handlers !== 'object' || Array.isArray(handlers)) {
    throw new ConfigError(`handlers must be an object of handler functions by kind ({ email: async (job) => ... }), got ${handlers === null ? 'null' : Array.isArray(handlers) ? 'an array' : typeof handlers}`);
  }
  const byKind = new Map<string, Handler>();
  for (const [kind, fn] of Object.entries(handlers)) {
    validateKind(kind, 'a handler\'s kind');
    if (typeof fn !== 'function') throw new ConfigError(`handlers.${kind} must be a function, got ${fn === null ? 'null' : typeof fn}`);
    byKind.set(kind, fn as Handler);
  }
  if (byKind.size === 0) throw new ConfigError('handlers has no kind: give at least one (handlers: { email: async (job) => ... })');
  return {
    kinds: [...byKind.keys()].sort(),
    handlerFor(job) {
      const found = job.kind === null ? undefined : byKind.get(job.kind);
      if (!found) throw new HandlerError(`job ${String(job.id)} is of kind ${JSON.stringify(job.kind)}, which this worker has no handler for (it claims ${[...byKind.keys()].join(', ')})`);
      return found;
    },
  };
}
