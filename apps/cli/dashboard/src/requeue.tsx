// The requeue actions: a card's button, the dialog that asks the operator to confirm, and the outcome shown
// after.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import type { RequeueRequest, RequeueResult } from './api.ts';
import { formatAge } from './format.ts';

/** A requeue waiting for the operator's yes. */
export interface Action {
  title: string;
  detail: string;
  request: RequeueRequest;
}

export type Outcome = { action: Action; result: RequeueResult } | { action: Action; error: string };

export type Ask = ((action: Action) => void) | null;

/** A card's requeue-everything button: nothing happens until the operator confirms `action` in the dialog. */
export function RequeueAll({ testId, label, disabled, ask, action }: { testId: string; label: string; disabled: boolean; ask: (action: Action) => void; action: Action }) {
  return (
    <button type="button" data-testid={testId} disabled={disabled} onClick={() => ask(action)}>
      {label}
    </button>
  );
}

export function Result({ outcome, running, onDismiss }: { outcome: Outcome | null; running: boolean; onDismiss: () => void }) {
  let body: ComponentChildren = null;
  if (running) body = <p>Requeueing…</p>;
  else if (outcome && 'error' in outcome) {
    body = (
      <p>
        <strong>Not done:</strong> {outcome.error}
      </p>
    );
  } else if (outcome) {
    const { result, action } = outcome;
    body = (
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

export function ConfirmDialog({ action, onConfirm, onCancel }: { action: Action | null; onConfirm: (action: Action) => void; onCancel: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const element = dialog.current!;
    if (action && !element.open) element.showModal();
    if (!action && element.open) element.close();
  }, [action]);
  return (
    // Escape closes a modal dialog by itself: onClose keeps the state in step.
    <dialog ref={dialog} aria-labelledby="confirm-title" aria-describedby="confirm-detail" data-testid="confirm-dialog" onClose={onCancel}>
      <h2 id="confirm-title">{action?.title}</h2>
      <p id="confirm-detail">{action?.detail}</p>
      <div class="dialog-buttons">
        <button type="button" class="secondary" data-testid="confirm-cancel" onClick={onCancel}>
          Cancel
        </button>
        <button type="button" data-testid="confirm-ok" onClick={() => action && onConfirm(action)}>
          Requeue
        </button>
      </div>
    </dialog>
  );
}
