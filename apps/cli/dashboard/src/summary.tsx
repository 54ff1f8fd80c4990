// The figures at the top of the page: rows per status (and per kind, on a table with kinds), throughput, and the
// oldest pending row.
import { useMemo } from 'preact/hooks';
import type { Counts, Overview, StatusName } from './api.ts';
import { ThroughputChart } from './chart.tsx';
import { cellText, formatAge, formatCount, formatRate, ratesOf } from './format.ts';
import type { Snapshot } from './poll.ts';

const STATUSES: readonly StatusName[] = ['pending', 'processing', 'done', 'failed', 'abuse', 'other'];

export function Tiles({ counts }: { counts: Counts }) {
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

/**
 * Rows per status of each kind. A kind whose rows only wait (pending, none processing) is marked: no running
 * worker has a handler for it, since workers with handlers by kind claim their own kinds only.
 */
export function Kinds({ kinds }: { kinds: Record<string, Counts> }) {
  const names = Object.keys(kinds).sort((a, b) => a.localeCompare(b));
  return (
    <section class="card" aria-labelledby="kinds-title" data-testid="kinds">
      <h2 id="kinds-title">By kind</h2>
      {names.length === 0 ? (
        <p class="empty">no rows yet</p>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">kind</th>
                {STATUSES.map((status) => (
                  <th key={status} scope="col">
                    {status}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {names.map((kind) => {
                const counts = kinds[kind]!;
                const waiting = Number(counts.pending) > 0 && Number(counts.processing) === 0;
                return (
                  <tr key={kind} data-testid={`kind-${kind}`} class={waiting ? 'waiting' : undefined}>
                    <th scope="row">
                      <span class="mono">{kind === '' ? '(no kind)' : kind}</span>
                      {waiting && <span class="hint"> (none processing)</span>}
                    </th>
                    {STATUSES.map((status) => (
                      <td key={status} data-testid={`kind-${kind}-${status}`}>
                        {formatCount(counts[status])}
                      </td>
                    ))}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

export function Throughput({ snapshot }: { snapshot: Snapshot }) {
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

export function OldestPending({ overview }: { overview: Overview }) {
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
