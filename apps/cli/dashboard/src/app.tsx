// The dashboard page: counts, throughput, the oldest pending row, rows in processing, recent failures and
// abuse rows, and the requeue actions (each confirmed in a dialog, its outcome shown), unless read-only.
import type { ComponentChildren } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, api, type Counts, type Overview, type RequeueRequest, type RequeueResult, type RowsReport, type StatusName } from './api.ts';
import { ThroughputChart } from './chart.tsx';
import { ageAt, cellText, formatAge, formatCount, formatRate, ratesOf, rowId } from './format.ts';
import { LIST_LIMIT, POLL_MS, usePoll, type Problem, type Snapshot } from './poll.ts';

const STATUSES: readonly StatusName[] = ['pending', 'processing', 'done', 'failed', 'abuse', 'other'];

/** A requeue waiting for the operator's yes. */
interface Action {
  title: string;
  detail: string;
  request: RequeueRequest;
}

type Outcome = { action: Action; result: RequeueResult } | { action: Action; error: string };

export function App() {
  const { snapshot, problem, refresh } = usePoll();
  const [pending, setPending] = useState<Action | null>(null);
  const [running, setRunning] = useState(false);
  const [outcome, setOutcome] = useState<Outcome | null>(null);

  const run = async (action: Action) => {
    setPending(null);
    setRunning(true);
    try {
      setOutcome({ action, result: await api.requeue(action.request) });
    } catch (error) {
      setOutcome({ action, error: error instanceof ApiError ? `${error.kind}: ${error.message}` : String(error) });
    } finally {
      setRunning(false);
      refresh();
    }
  };

  const overview = snapshot?.overview;
  // Actions need a live answer that says writes are allowed: none under a banner or before the first read.
  const ask = overview && !overview.readOnly && problem === null && !running ? setPending : null;

  return (
    <>
      <header class="top">
        <h1>
          statusq <span class="table-name">{overview ? overview.table : '…'}</span>
        </h1>
        <div class="meta">
          {overview?.readOnly && (
            <span class="badge" data-testid="read-only">
              read-only
            </span>
          )}
          {snapshot && <Updated snapshot={snapshot} />}
        </div>
      </header>
      {problem && <Banner problem={problem} />}
      <Result outcome={outcome} running={running} onDismiss={() => setOutcome(null)} />
      {snapshot === null ? (
        problem === null && <p class="loading">Loading…</p>
      ) : (
        <main>
          <Tiles counts={snapshot.overview.counts} />
          <div class="grid">
            <Throughput snapshot={snapshot} />
            <OldestPending overview={snapshot.overview} />
          </div>
          <Processing snapshot={snapshot} ask={ask} />
          <Settled status="failed" title="Recent failures" overview={snapshot.overview} report={snapshot.failed} ask={ask} />
          <Settled status="abuse" title="Abuse" overview={snapshot.overview} report={snapshot.abuse} ask={ask} />
        </main>
      )}
      <ConfirmDialog action={pending} onConfirm={(action) => void run(action)} onCancel={() => setPending(null)} />
    </>
  );
}

function Updated({ snapshot }: { snapshot: Snapshot }) {
  const time = new Date(snapshot.receivedAt).toLocaleTimeString();
  return (
    <span class="updated" title={`database clock ${snapshot.overview.clock}`}>
      updated {time}, every {POLL_MS / 1000} s
    </span>
  );
}

function Banner({ problem }: { problem: Problem }) {
  const text: Record<Problem['kind'], string> = {
    unauthorized: 'Not authorized (401): the dashboard needs its token. Reload the page and sign in with any user name and the token as password.',
    database: 'The database is not answering (503). Figures below are from the last good read.',
    unreachable: 'The dashboard server does not answer. Figures below are from the last good read.',
    other: 'The dashboard API answered with an error.',
  };
  return (
    <div class={`banner banner-${problem.kind}`} role="alert" data-testid="banner" data-kind={problem.kind}>
      <strong>{text[problem.kind]}</strong> <span class="banner-detail">{problem.message}</span>{' '}
      <span class="banner-retry">Retrying every {POLL_MS / 1000} s.</span>
    </div>
  );
}

function Tiles({ counts }: { counts: Counts }) {
  return (
    <section aria-labelledby="counts-title">
      <h2 id="counts-title" class="visually-hidden">
        Rows per status
      </h2>
      <ul class="tiles">
        {STATUSES.map((status) => (
          <li key={status} class={`tile tile-${status}`}>
            <span class="tile-label" id={`tile-${status}`}>
              {status}
            </span>
            <span class="tile-count" data-testid={`count-${status}`} aria-labelledby={`tile-${status}`}>
              {formatCount(counts[status])}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}

function Throughput({ snapshot }: { snapshot: Snapshot }) {
  const rates = useMemo(() => ratesOf(snapshot.throughput.samples), [snapshot.throughput]);
  const last = rates.jobs.at(-1);
  return (
    <section class="card" aria-labelledby="throughput-title">
      <h2 id="throughput-title">Throughput</h2>
      <p class="figure">
        <span data-testid="rate">{last === undefined ? '-' : formatRate(last)}</span> <span class="unit">jobs/s</span>
        {last === undefined && <span class="hint"> (needs two samples, {snapshot.throughput.intervalMs / 1000} s apart)</span>}
      </p>
      <ThroughputChart rates={rates} />
    </section>
  );
}

function OldestPending({ overview }: { overview: Overview }) {
  const oldest = overview.oldestPending;
  return (
    <section class="card" aria-labelledby="oldest-title">
      <h2 id="oldest-title">Oldest pending</h2>
      {oldest === null ? (
        <p class="figure" data-testid="oldest-pending">
          none
        </p>
      ) : (
        <>
          <p class="figure" data-testid="oldest-pending">
            {oldest.ageMs === null ? cellText(oldest.order) : formatAge(oldest.ageMs)}
          </p>
          <p class="hint">
            row {cellText(oldest.id)}
            {oldest.ageMs === null ? `, ${overview.columns.order ?? 'order'} value (not a time)` : `, ${overview.columns.order ?? 'order'} ${cellText(oldest.order)}`}
          </p>
        </>
      )}
      {overview.leaseMs !== null && <p class="hint">lease {formatAge(overview.leaseMs)}: a claim older than that has expired</p>}
      {overview.dispatched !== null && (
        <p class="hint" data-testid="dispatched">
          {overview.dispatched} pending published to the broker, waiting for a consumer
        </p>
      )}
    </section>
  );
}

/** The column a report holds for an optional statusq column, by its resolved name; undefined when absent. */
function columnOf(overview: Overview, report: RowsReport, key: string, fallback: string): string | undefined {
  const name = overview.columns[key] ?? fallback;
  return report.columns.includes(name) ? name : undefined;
}

function idColumn(overview: Overview): string {
  return overview.columns.id ?? 'id';
}

type Ask = ((action: Action) => void) | null;

/** A card's requeue-everything button: nothing happens until the operator confirms `action` in the dialog. */
function RequeueAll({ testId, label, disabled, ask, action }: { testId: string; label: string; disabled: boolean; ask: (action: Action) => void; action: Action }) {
  return (
    <button type="button" data-testid={testId} disabled={disabled} onClick={() => ask(action)}>
      {label}
    </button>
  );
}

function Processing({ snapshot, ask }: { snapshot: Snapshot; ask: Ask }) {
  const { overview, processing: report } = snapshot;
  const id = idColumn(overview);
  const worker = columnOf(overview, report, 'workerId', 'worker_id');
  const claimed = columnOf(overview, report, 'claimedAt', 'claimed_at');
  const attempts = columnOf(overview, report, 'attemptCount', 'attempt_count');
  const leaseMs = overview.leaseMs;
  const rows = report.rows.map((row) => {
    const age = claimed ? ageAt(row[claimed], report.clock) : null;
    return { row, age, expired: age !== null && leaseMs !== null && age > leaseMs };
  });
  const expired = rows.filter((r) => r.expired).length;
  const canRequeue = ask !== null && overview.features.leases;
  return (
    <section class="card" aria-labelledby="processing-title" data-testid="processing">
      <div class="card-head">
        <h2 id="processing-title">Processing</h2>
        {canRequeue && (
          <RequeueAll
            testId="requeue-expired"
            label="Requeue expired"
            disabled={expired === 0}
            ask={ask}
            action={{
              title: 'Requeue expired processing rows?',
              detail: `Every processing row of ${overview.table} whose lease (${formatAge(leaseMs ?? 0)}) has run out goes back to pending; its interrupted attempt counts. Rows with a live lease are left alone.`,
              request: { status: 'processing', all: true },
            }}
          />
        )}
      </div>
      <Listed report={report} total={overview.counts.processing} empty="No row is being processed.">
        <table>
          <thead>
            <tr>
              <th scope="col">{id}</th>
              {worker && <th scope="col">worker</th>}
              {attempts && <th scope="col">attempts</th>}
              {claimed && <th scope="col">lease age</th>}
            </tr>
          </thead>
          <tbody>
            {rows.map(({ row, age, expired }) => (
              <tr key={cellText(row[id])} data-testid="processing-row" data-id={cellText(row[id])} class={expired ? 'expired' : undefined}>
                <td>{cellText(row[id])}</td>
                {worker && <td class="mono">{cellText(row[worker])}</td>}
                {attempts && <td>{cellText(row[attempts])}</td>}
                {claimed && (
                  <td>
                    {age === null ? '-' : formatAge(age)}
                    {expired && (
                      <span class="badge badge-expired" data-testid="lease-expired">
                        expired
                      </span>
                    )}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      </Listed>
      {overview.features.leases && rows.length > 0 && expired === 0 && leaseMs !== null && <p class="hint">No claim has outlived its lease ({formatAge(leaseMs)}).</p>}
      {!overview.features.leases && <p class="hint">This table has no lease column (claimed_at), so a crashed worker's rows cannot be told from running ones.</p>}
    </section>
  );
}

function Settled({ status, title, overview, report, ask }: { status: 'failed' | 'abuse'; title: string; overview: Overview; report: RowsReport; ask: Ask }) {
  const id = idColumn(overview);
  const lastError = columnOf(overview, report, 'lastError', 'last_error');
  const attempts = columnOf(overview, report, 'attemptCount', 'attempt_count');
  const finished = columnOf(overview, report, 'finishedAt', 'finished_at');
  const total = overview.counts[status];
  const titleId = `${status}-title`;
  return (
    <section class="card" aria-labelledby={titleId} data-testid={status}>
      <div class="card-head">
        <h2 id={titleId}>{title}</h2>
        {ask && (
          <RequeueAll
            testId={`requeue-all-${status}`}
            label={`Requeue all ${status}`}
            disabled={report.rows.length === 0}
            ask={ask}
            action={{
              title: `Requeue all ${status} rows?`,
              detail: `Every ${status} row of ${overview.table} (${formatCount(total)} now) goes back to pending and starts its attempts over.`,
              request: { status, all: true },
            }}
          />
        )}
      </div>
      <Listed report={report} total={total} empty={`No ${status} rows.`}>
        <table>
          <thead>
            <tr>
              <th scope="col">{id}</th>
              {attempts && <th scope="col">attempts</th>}
              {finished && <th scope="col">finished</th>}
              {lastError && <th scope="col">{status === 'abuse' ? 'reason' : 'last error'}</th>}
              {ask && (
                <th scope="col">
                  <span class="visually-hidden">actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody>
            {report.rows.map((row) => {
              const rid = rowId(row, id);
              const age = finished ? ageAt(row[finished], report.clock) : null;
              return (
                <tr key={String(rid)} data-testid={`${status}-row`} data-id={String(rid)}>
                  <td>{String(rid)}</td>
                  {attempts && <td>{cellText(row[attempts])}</td>}
                  {finished && <td title={cellText(row[finished])}>{age === null ? cellText(row[finished]) : `${formatAge(age)} ago`}</td>}
                  {lastError && (
                    <td class="error-cell" data-testid="last-error">
                      <ErrorText text={row[lastError]} />
                    </td>
                  )}
                  {ask && (
                    <td>
                      <button
                        type="button"
                        class="small"
                        data-testid="requeue-row"
                        aria-label={`Requeue ${status} row ${String(rid)}`}
                        onClick={() =>
                          ask({
                            title: `Requeue ${status} row ${String(rid)}?`,
                            detail: `Row ${String(rid)} of ${overview.table} goes back to pending and starts its attempts over.`,
                            request: { status, ids: [rid] },
                          })
                        }
                      >
                        Requeue
                      </button>
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      </Listed>
    </section>
  );
}

/** A stored error: its first line, the rest (a stack) behind a disclosure. */
function ErrorText({ text }: { text: unknown }) {
  if (text === null || text === undefined) return <>-</>;
  const whole = String(text);
  const [first = '', ...rest] = whole.split(/\r?\n/);
  if (rest.length === 0 && first.length <= 200) return <span class="mono">{first}</span>;
  return (
    <details>
      <summary class="mono">{first.length > 200 ? `${first.slice(0, 200)}…` : first}</summary>
      <pre>{whole}</pre>
    </details>
  );
}

function Listed({ report, total, empty, children }: { report: RowsReport; total: number | string; empty: string; children: ComponentChildren }) {
  if (report.rows.length === 0) return <p class="empty">{empty}</p>;
  const more = typeof total === 'number' ? total > report.rows.length : report.rows.length >= LIST_LIMIT;
  return (
    <>
      <div class="table-wrap">{children}</div>
      {more && (
        <p class="hint">
          showing {report.rows.length} of {formatCount(total)}
        </p>
      )}
    </>
  );
}

function Result({ outcome, running, onDismiss }: { outcome: Outcome | null; running: boolean; onDismiss: () => void }) {
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

function ConfirmDialog({ action, onConfirm, onCancel }: { action: Action | null; onConfirm: (action: Action) => void; onCancel: () => void }) {
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
