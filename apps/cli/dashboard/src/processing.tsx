// The rows in processing: who holds each, its attempts and lease age, expired leases marked, the requeue of
// expired claims, and a cancel per row.
import { ActionButton, ActionsHeader, cancelAction, type Ask } from './actions.tsx';
import { ageAt, cellText, formatAge, rowId } from './format.ts';
import type { Snapshot } from './poll.ts';
import { Listed, canCancel, columnOf, idColumn } from './row-list.tsx';

export function Processing({ snapshot, ask }: { snapshot: Snapshot; ask: Ask }) {
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
  const cancel = canCancel(overview, ask);
  return (
    <section class="card" aria-labelledby="processing-title" data-testid="processing">
      <div class="card-head">
        <h2 id="processing-title">Processing</h2>
        {canRequeue && (
          <ActionButton
            testId="requeue-expired"
            label="Requeue expired"
            disabled={expired === 0}
            ask={ask}
            action={{
              kind: 'requeue',
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
              {cancel && <ActionsHeader />}
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
                {cancel && (
                  <td>
                    <ActionButton small testId="cancel-row" label="Cancel" ariaLabel={`Cancel processing row ${cellText(row[id])}`} ask={cancel} action={cancelAction(overview, 'processing', rowId(row, id))} />
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
