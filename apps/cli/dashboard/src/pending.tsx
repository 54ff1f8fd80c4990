// The pending rows, in the claim order the dashboard was given (--order), with a cancel per row: a job queued
// by mistake can be stopped before a worker takes it.
import { ActionButton, ActionsHeader, cancelAction, type Ask } from './actions.tsx';
import { ageAt, cellText, formatAge, rowId } from './format.ts';
import type { Snapshot } from './poll.ts';
import { Listed, canCancel, columnOf, idColumn } from './row-list.tsx';

export function Pending({ snapshot, ask }: { snapshot: Snapshot; ask: Ask }) {
  const { overview, pending: report } = snapshot;
  const id = idColumn(overview);
  const order = columnOf(overview, report, 'order', 'date');
  const kind = columnOf(overview, report, 'kind', 'kind');
  const attempts = columnOf(overview, report, 'attemptCount', 'attempt_count');
  const cancel = canCancel(overview, ask);
  return (
    <section class="card" aria-labelledby="pending-title" data-testid="pending">
      <div class="card-head">
        <h2 id="pending-title">Pending</h2>
      </div>
      <Listed report={report} total={overview.counts.pending} empty="No row is waiting.">
        <table>
          <thead>
            <tr>
              <th scope="col">{id}</th>
              {kind && <th scope="col">kind</th>}
              {order && <th scope="col">{order}</th>}
              {attempts && <th scope="col">attempts</th>}
              {cancel && <ActionsHeader />}
            </tr>
          </thead>
          <tbody>
            {report.rows.map((row) => {
              const rid = rowId(row, id);
              const age = order ? ageAt(row[order], report.clock) : null;
              return (
                <tr key={String(rid)} data-testid="pending-row" data-id={String(rid)}>
                  <td>{String(rid)}</td>
                  {kind && <td class="mono">{cellText(row[kind])}</td>}
                  {/* The order column need not be a time (a priority, a sequence): then its value, as stored. */}
                  {order && <td title={cellText(row[order])}>{age === null ? cellText(row[order]) : `${formatAge(age)} ago`}</td>}
                  {attempts && <td>{cellText(row[attempts])}</td>}
                  {cancel && (
                    <td>
                      <ActionButton small testId="cancel-row" label="Cancel" ariaLabel={`Cancel pending row ${String(rid)}`} ask={cancel} action={cancelAction(overview, 'pending', rid)} />
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
