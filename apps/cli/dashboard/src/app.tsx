// The dashboard page: counts (by kind too, on a table with kinds), throughput, the oldest pending row, rows in
// processing, the pending rows, recent failures and abuse rows, and the actions, requeue and cancel (each
// confirmed in a dialog, its outcome shown), unless read-only.
import { useState } from 'preact/hooks';
import { ConfirmDialog, Result, perform, type Action, type Outcome } from './actions.tsx';
import { Banner, Updated } from './freshness.tsx';
import { Pending } from './pending.tsx';
import { usePoll } from './poll.ts';
import { Processing } from './processing.tsx';
import { Settled } from './settled.tsx';
import { Kinds, OldestPending, Throughput, Tiles } from './summary.tsx';

export function App() {
  const { snapshot, problem, refresh } = usePoll();
  const [asked, setAsked] = useState<Action | null>(null);
  const [running, setRunning] = useState<Action | null>(null);
  const [outcome, setOutcome] = useState<Outcome | null>(null);

  const run = async (action: Action, reason: string) => {
    setAsked(null);
    setRunning(action);
    try {
      setOutcome(await perform(action, reason));
    } finally {
      setRunning(null);
      refresh();
    }
  };

  const overview = snapshot?.overview;
  // Actions need a live answer that says writes are allowed: none under a banner or before the first read.
  const ask = overview && !overview.readOnly && problem === null && running === null ? setAsked : null;

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
          {snapshot.overview.kinds && <Kinds kinds={snapshot.overview.kinds} />}
          <div class="grid">
            <Throughput snapshot={snapshot} />
            <OldestPending overview={snapshot.overview} />
          </div>
          <Processing snapshot={snapshot} ask={ask} />
          <Pending snapshot={snapshot} ask={ask} />
          <Settled status="failed" title="Recent failures" overview={snapshot.overview} report={snapshot.failed} ask={ask} />
          <Settled status="abuse" title="Abuse" overview={snapshot.overview} report={snapshot.abuse} ask={ask} />
        </main>
      )}
      <ConfirmDialog action={asked} onConfirm={(action, reason) => void run(action, reason)} onCancel={() => setAsked(null)} />
    </>
  );
}
