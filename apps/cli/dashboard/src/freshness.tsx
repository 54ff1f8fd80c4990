// How fresh the figures are: when the last good read came, and a banner saying why reads fail when they do.
import { POLL_MS, type Problem, type Snapshot } from './poll.ts';

export function Updated({ snapshot }: { snapshot: Snapshot }) {
  const time = new Date(snapshot.receivedAt).toLocaleTimeString();
  return (
    <span class="updated" title={`database clock ${snapshot.overview.clock}`}>
      updated {time}, every {POLL_MS / 1000} s
    </span>
  );
}

export function Banner({ problem }: { problem: Problem }) {
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
