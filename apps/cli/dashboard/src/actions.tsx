// The actions, requeue and cancel: a card's or a row's button, the dialog that asks the operator to confirm
// (and, for a cancel, for an optional reason), the call, and the outcome shown after.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, type CancelResult, type Overview, type RequeueRequest, type RequeueResult, type RowId } from './api.ts';
import { formatAge } from './format.ts';

interface Asked {
  title: string;
  detail: string;
}

export type RequeueAction = Asked & { kind: 'requeue'; request: RequeueRequest };
export type CancelAction = Asked & { kind: 'cancel'; status: 'pending' | 'processing'; ids: RowId[] };

/** An action waiting for the operator's yes. */
export type Action = RequeueAction | CancelAction;

export type Outcome =
  | { action: RequeueAction; requeued: RequeueResult }
  | { action: CancelAction; cancelled: CancelResult; reason: string }
  | { action: Action; error: string };

export type Ask = ((action: Action) => void) | null;

/** Sends a confirmed action; a refusal or a lost server is an outcome too, shown like a result. */
export async function perform(action: Action, reason: string): Promise<Outcome> {
  try {
    if (action.kind === 'requeue') return { action, requeued: await api.requeue(action.request) };
    // An empty reason is left out, not sent: the server then records who asked instead.
    return { action, cancelled: await api.cancel({ ids: action.ids, ...(reason === '' ? {} : { reason }) }), reason };
  } catch (error) {
    return { action, error: error instanceof ApiError ? `${error.kind}: ${error.message}` : String(error) };
  }
}

/** The cancel of one pending or processing row, as the dialog will ask it. */
export function cancelAction(overview: Overview, status: 'pending' | 'processing', id: RowId): CancelAction {
  const after =
    status === 'pending'
      ? 'It never runs.'
      : 'Its worker aborts the handler at its next heartbeat; whatever the handler writes after that changes nothing.';
  return {
    kind: 'cancel',
    status,
    ids: [id],
    title: `Cancel ${status} row ${String(id)}?`,
    detail: `Row ${String(id)} of ${overview.table} ends failed, with "cancelled: " and the reason as its last error. ${after} A requeue of failed rows can send it back.`,
  };
}

/** The header cell over a table's column of row buttons: named for screen readers, blank to the eye. */
export function ActionsHeader() {
  return (
    <th scope="col">
      <span class="visually-hidden">actions</span>
    </th>
  );
}

/** A button that asks before it acts: nothing happens until the operator confirms `action` in the dialog. */
export function ActionButton({ testId, label, ariaLabel, small, disabled, ask, action }: { testId: string; label: string; ariaLabel?: string; small?: boolean; disabled?: boolean; ask: (action: Action) => void; action: Action }) {
  const classes = [small ? 'small' : '', action.kind === 'cancel' ? 'danger' : ''].filter(Boolean).join(' ');
  return (
    <button type="button" class={classes || undefined} data-testid={testId} aria-label={ariaLabel} disabled={disabled} onClick={() => ask(action)}>
      {label}
    </button>
  );
}

/** What a cancel's report says of one id it named: `not found`, or `status done` for a row already finished. */
function notCancelledText(reason: string): string {
  const status = /^status (\w+)$/.exec(reason)?.[1];
  return status === 'done' || status === 'failed' || status === 'abuse' ? `already finished (${status}), left as it was` : `not cancelled: ${reason}`;
}

function RequeueSummary({ action, result }: { action: RequeueAction; result: RequeueResult }) {
  return (
    <>
      <p>
        <strong data-testid="requeued-count">
          Requeued {result.requeued} {action.request.status} row{result.requeued === 1 ? '' : 's'}
        </strong>
        {result.live > 0 && `; ${result.live} still hold${result.live === 1 ? 's' : ''} a live lease${result.leaseMs === null ? '' : ` (lease ${formatAge(result.leaseMs)})`}`}.
      </p>
      {result.notRequeued.length > 0 && (
        <>
          <p>Not requeued:</p>
          <ul data-testid="not-requeued">
            {result.notRequeued.map((n) => (
              <li key={String(n.id)}>
                row {String(n.id)}: {n.reason}
              </li>
            ))}
          </ul>
        </>
      )}
    </>
  );
}

function CancelSummary({ action, result, reason }: { action: CancelAction; result: CancelResult; reason: string }) {
  // The report names only the ids left alone: every other id the action named was cancelled.
  const missed = new Map(result.notCancelled.map((n) => [String(n.id), n.reason]));
  return (
    <>
      <p>
        <strong data-testid="cancelled-count">
          Cancelled {result.cancelled} {action.status} row{result.cancelled === 1 ? '' : 's'}
        </strong>
        {reason === '' ? ' (the reason records who asked)' : ` (reason: ${reason})`}.
      </p>
      <ul data-testid="cancel-results">
        {action.ids.map((id) => {
          const why = missed.get(String(id));
          return (
            <li key={String(id)} data-id={String(id)} data-outcome={why === undefined ? 'cancelled' : why === 'not found' ? 'not-found' : 'not-cancelled'}>
              row {String(id)}: {why === undefined ? 'cancelled' : notCancelledText(why)}
            </li>
          );
        })}
      </ul>
    </>
  );
}

export function Result({ outcome, running, onDismiss }: { outcome: Outcome | null; running: Action | null; onDismiss: () => void }) {
  let body: ComponentChildren = null;
  if (running) body = <p>{running.kind === 'requeue' ? 'Requeueing…' : 'Cancelling…'}</p>;
  else if (outcome && 'error' in outcome) {
    body = (
      <p>
        <strong>Not done:</strong> {outcome.error}
      </p>
    );
  } else if (outcome && 'requeued' in outcome) body = <RequeueSummary action={outcome.action} result={outcome.requeued} />;
  else if (outcome) body = <CancelSummary action={outcome.action} result={outcome.cancelled} reason={outcome.reason} />;
  // Always in the page, so screen readers announce what is put in it.
  return (
    <div class={`result${body === null ? ' result-empty' : ''}${outcome && 'error' in outcome ? ' result-error' : ''}`} role="status" data-testid="action-result">
      <div>{body}</div>
      {body !== null && !running && (
        <button type="button" class="small secondary" onClick={onDismiss}>
          Dismiss
        </button>
      )}
    </div>
  );
}

/** Long enough for a ticket number and a sentence; the server bounds the whole body anyway. */
const REASON_MAX = 500;

export function ConfirmDialog({ action, onConfirm, onCancel }: { action: Action | null; onConfirm: (action: Action, reason: string) => void; onCancel: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [reason, setReason] = useState('');
  useEffect(() => {
    const element = dialog.current!;
    // Each cancel asks afresh: a reason typed for one row must not carry over to the next.
    if (action) setReason('');
    if (action && !element.open) element.showModal();
    if (!action && element.open) element.close();
  }, [action]);
  const confirm = () => action && onConfirm(action, reason.trim());
  const cancelling = action?.kind === 'cancel';
  return (
    // Escape closes a modal dialog by itself: onClose keeps the state in step.
    <dialog ref={dialog} aria-labelledby="confirm-title" aria-describedby="confirm-detail" data-testid="confirm-dialog" onClose={onCancel}>
      <h2 id="confirm-title">{action?.title}</h2>
      <p id="confirm-detail">{action?.detail}</p>
      {cancelling && (
        <label class="field">
          Reason (optional)
          <input
            type="text"
            data-testid="cancel-reason"
            maxLength={REASON_MAX}
            placeholder="none: the row records who asked"
            value={reason}
            onInput={(event) => setReason(event.currentTarget.value)}
            onKeyDown={(event) => {
              if (event.key === 'Enter') {
                event.preventDefault();
                confirm();
              }
            }}
          />
        </label>
      )}
      <div class="dialog-buttons">
        {/* "Cancel" would be ambiguous next to a cancel action. */}
        <button type="button" class="secondary" data-testid="confirm-cancel" onClick={onCancel}>
          {cancelling ? 'Keep it' : 'Cancel'}
        </button>
        <button type="button" class={cancelling ? 'danger' : undefined} data-testid="confirm-ok" onClick={confirm}>
          {action?.kind === 'cancel' ? `Cancel ${action.ids.length === 1 ? 'row' : `${action.ids.length} rows`}` : 'Requeue'}
        </button>
      </div>
    </dialog>
  );
}
