import { ConfigError, IllegalTransitionError } from './errors.js';

/** The lifecycle states of a job. `pending` is always SQL NULL; the others are configurable codes. */
export type StatusName = 'pending' | 'processing' | 'done' | 'abuse' | 'failed';

/** The codes stored in the status column for every state but pending (which is NULL). */
export interface StatusCodes {
  processing: number;
  done: number;
  abuse: number;
  failed: number;
}

/** The seed's codes: NULL pending, 9 processing, 1 done, 2 abuse, 0 failed. */
export const DEFAULT_STATUS_CODES: Readonly<StatusCodes> = Object.freeze({
  processing: 9,
  done: 1,
  abuse: 2,
  failed: 0,
});

export function resolveStatusCodes(partial: Partial<StatusCodes> | undefined): StatusCodes {
  const codes = { ...DEFAULT_STATUS_CODES, ...partial };
  const seen = new Map<number, string>();
  for (const [name, code] of Object.entries(codes)) {
    if (!Number.isSafeInteger(code)) throw new ConfigError(`status code for ${name} must be an integer, got ${String(code)}`);
    const other = seen.get(code);
    if (other) throw new ConfigError(`status codes for ${other} and ${name} are both ${code}; each state needs its own code`);
    seen.set(code, name);
  }
  return codes;
}

/**
 * Why a guarded UPDATE touches a row. Each cause is one guarded UPDATE in `transition-sql.ts`, whose WHERE
 * is built from this table's source states (`sourcesOf`): this table is the only place that says which
 * causes may move a row from which state to which.
 */
export type TransitionCause =
  | 'claim' // a worker takes a pending row
  | 'heartbeat' // the holder extends its lease; the status stays, but the guard is a state like any other
  | 'progress' // the holder's handler reports how far it got (ctx.progress); the status stays, guarded the same way
  | 'complete' // the handler returned
  | 'giveUp' // the handler failed for good (or threw with no retries left)
  | 'abuse' // a business rule judged the row abusive (from pending or while processing)
  | 'retry' // a scheduled retry: attempt_count + 1, next_attempt_at set, last_error kept
  | 'release' // a draining worker hands an unfinished claim back without counting an attempt
  | 'leaseExpired' // the reaper found a claim whose lease ran out (to pending, or failed when attempts are used up)
  | 'ownerDied' // the launcher saw the worker process holding the claim die while its handler ran (as leaseExpired, at once)
  | 'requeue' // an operator sends failed or abuse rows back to pending (attempts start over)
  | 'requeueProcessing' // an operator sends rows stuck in processing back to pending (the attempt counts)
  | 'cancel'; // an operator fails rows for good, pending or running (a running one's worker finds its claim gone)

export const TRANSITIONS: Readonly<Record<TransitionCause, ReadonlyArray<readonly [StatusName, StatusName]>>> = {
  claim: [['pending', 'processing']],
  heartbeat: [['processing', 'processing']],
  progress: [['processing', 'processing']],
  complete: [['processing', 'done']],
  giveUp: [['processing', 'failed']],
  abuse: [
    ['pending', 'abuse'],
    ['processing', 'abuse'],
  ],
  retry: [['processing', 'pending']],
  release: [['processing', 'pending']],
  ownerDied: [
    ['processing', 'pending'],
    ['processing', 'failed'],
  ],
  leaseExpired: [
    ['processing', 'pending'],
    ['processing', 'failed'],
  ],
  requeue: [
    ['failed', 'pending'],
    ['abuse', 'pending'],
  ],
  requeueProcessing: [['processing', 'pending']],
  cancel: [
    ['pending', 'failed'],
    ['processing', 'failed'],
  ],
};

export function isLegalTransition(from: StatusName, to: StatusName, cause: TransitionCause): boolean {
  return TRANSITIONS[cause].some(([f, t]) => f === from && t === to);
}

/** Throws IllegalTransitionError unless `cause` may move a row from `from` to `to`. */
export function assertTransition(from: StatusName, to: StatusName, cause: TransitionCause): void {
  if (!isLegalTransition(from, to, cause)) throw new IllegalTransitionError(from, to, cause);
}

/** The operator's requeue causes: each sends rows of its own source states back to pending. */
const REQUEUE_CAUSES = ['requeue', 'requeueProcessing'] as const satisfies readonly TransitionCause[];

/** The states an operator may requeue rows from, in the table's order. */
export const REQUEUE_SOURCES: readonly StatusName[] = Object.freeze(REQUEUE_CAUSES.flatMap((cause) => sourcesOf(cause, 'pending')));

/**
 * The cause of an operator's requeue of `from` rows. Throws IllegalTransitionError when no requeue may
 * move such a row (done is final; pending is where requeue sends rows), before any statement is built.
 */
export function requeueCause(from: StatusName): (typeof REQUEUE_CAUSES)[number] {
  const cause = REQUEUE_CAUSES.find((c) => isLegalTransition(from, 'pending', c));
  if (cause) return cause;
  throw new IllegalTransitionError(from, 'pending', 'requeue', `only ${REQUEUE_SOURCES.slice(0, -1).join(', ')} or ${REQUEUE_SOURCES.at(-1)} rows can be requeued`);
}

export const STATUS_NAMES: readonly StatusName[] = Object.freeze(['pending', 'processing', 'done', 'abuse', 'failed']);

export function isStatusName(value: string): value is StatusName {
  return (STATUS_NAMES as readonly string[]).includes(value);
}

/** The states a cause may start from: the guard of its UPDATE. */
export function sourcesOf(cause: TransitionCause, to?: StatusName): StatusName[] {
  return [...new Set(TRANSITIONS[cause].filter(([, t]) => to === undefined || t === to).map(([f]) => f))];
}

export function statusName(code: number | null, codes: StatusCodes): StatusName | undefined {
  if (code === null) return 'pending';
  for (const name of ['processing', 'done', 'abuse', 'failed'] as const) if (codes[name] === code) return name;
  return undefined;
}

export function statusCode(name: StatusName, codes: StatusCodes): number | null {
  return name === 'pending' ? null : codes[name];
}
