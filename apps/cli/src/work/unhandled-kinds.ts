// A worker with handlers by kind claims its kinds only: rows of any other kind wait for a worker that has them,
// and if none runs they wait for good with nothing failing. This says so in the log, once per kind per process.
import { Queue, type Store, type TableConfig } from '@statusq/core';
import { errorFields, type Logger } from '../log.js';

/**
 * How often the table is looked at again after start-up: kinds enqueued later are seen within this. The look
 * reads the pending and processing rows through the kind index (Queue.liveCountsByKind), so even every few
 * minutes it costs next to nothing beside the claims.
 */
export const UNHANDLED_KINDS_INTERVAL_MS = 300_000;
/** Past this many kinds warned about, the process stops looking: the log has made its point. */
export const MAX_UNHANDLED_KINDS_WARNED = 100;

/**
 * Warns once for each kind with pending rows, none processing, and no handler here (rows without a kind
 * included: a worker with handlers by kind never claims those). Resolves after the first look, so a short run
 * (--exit-when-empty) has logged it before it ends; returns what stops the later looks (resolving once a look under way has ended).
 */
export async function warnUnhandledKinds(store: Store, config: TableConfig, handled: readonly string[], log: Logger, intervalMs = UNHANDLED_KINDS_INTERVAL_MS): Promise<() => Promise<void>> {
  // The whole table, not the worker's view of its own kinds.
  const queue = await Queue.open(store, config);
  const mine = new Set(handled);
  const warned = new Set<string>();
  let looking: Promise<void> | null = null;
  const look = () =>
    (looking ??= queue
      .liveCountsByKind()
      .then((byKind) => {
        for (const [kind, { pending, processing }] of Object.entries(byKind ?? {}).sort(([a], [b]) => a.localeCompare(b))) {
          if (pending === 0 || processing > 0 || mine.has(kind) || warned.has(kind) || warned.size >= MAX_UNHANDLED_KINDS_WARNED) continue;
          warned.add(kind);
          const rows = `${pending} pending row${pending === 1 ? '' : 's'}`;
          if (kind === '') {
            log.warn({ kind: null, pending }, `${rows} without a kind wait, none processing: workers with handlers by kind never claim them; a worker with one --handler for every row does`);
          } else {
            log.warn({ kind, pending, handled: [...mine].sort() }, `${rows} of kind ${kind} wait, none processing, and this worker has no handler for ${kind}: start a worker that has one (--handlers DIR with ${kind}.mjs)`);
          }
        }
      })
      .catch((error: unknown) => log.debug({ err: errorFields(error) }, 'could not look for pending kinds without a handler'))
      .finally(() => (looking = null)));
  await look();
  const timer = setInterval(() => {
    if (warned.size >= MAX_UNHANDLED_KINDS_WARNED) clearInterval(timer);
    else void look();
  }, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await looking;
  };
}
