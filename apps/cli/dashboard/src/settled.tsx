// Recent failures and abuse rows: their attempts, when they finished, the stored error, and a requeue per row
// or for all.
import type { Overview, RowsReport } from './api.ts';
import { ageAt, cellText, formatAge, formatCount, rowId } from './format.ts';
import { ActionButton, ActionsHeader, type Ask } from './actions.tsx';
import { Listed, columnOf, idColumn } from './row-list.tsx';

export function Settled({ status, title, overview, report, ask }: { status: 'failed' | 'abuse'; title: string; overview: Overview; report: RowsReport; ask: Ask }) {
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
          <ActionButton
            testId={`requeue-all-${status}`}
            label={`Requeue all ${status}`}
            disabled={report.rows.length === 0}
            ask={ask}
            action={{
              kind: 'requeue',
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
              {ask && <ActionsHeader />}
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
                      <ActionButton
                        small
                        testId="requeue-row"
                        label="Requeue"
                        ariaLabel={`Requeue ${status} row ${String(rid)}`}
                        ask={ask}
                        action={{
                          kind: 'requeue',
                          title: `Requeue ${status} row ${String(rid)}?`,
                          detail: `Row ${String(rid)} of ${overview.table} goes back to pending and starts its attempts over.`,
                          request: { status, ids: [rid] },
                        }}
                      />
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
