// The page's view of the queue: every API answer it shows, re-read every 2 s, and what went wrong if the
// last read failed (the last good answer stays on screen under a banner).
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, type Overview, type RowsReport, type Throughput } from './api.ts';

export const POLL_MS = 2000;
/** Rows listed per status; the tiles give the full counts. */
export const LIST_LIMIT = 50;

export interface Snapshot {
  overview: Overview;
  throughput: Throughput;
  processing: RowsReport;
  /** In the claim order the dashboard was given (--order). */
  pending: RowsReport;
  failed: RowsReport;
  abuse: RowsReport;
  /** This browser's time of the answer, for "updated at". */
  receivedAt: number;
}

export type Problem =
  | { kind: 'unauthorized'; message: string }
  | { kind: 'database'; message: string }
  | { kind: 'unreachable'; message: string }
  | { kind: 'other'; message: string };

function problemOf(error: unknown): Problem {
  if (error instanceof ApiError) {
    if (error.status === 401) return { kind: 'unauthorized', message: error.message };
    if (error.status === 503) return { kind: 'database', message: error.message };
    return { kind: 'other', message: `${error.kind}: ${error.message}` };
  }
  // fetch rejects (a TypeError) only when no HTTP answer came: the server stopped or the network is down.
  return { kind: 'unreachable', message: error instanceof Error ? error.message : String(error) };
}

async function readAll(): Promise<Snapshot> {
  const [overview, throughput, processing, pending, failed, abuse] = await Promise.all([
    api.overview(),
    api.throughput(),
    api.rows('processing', LIST_LIMIT),
    api.rows('pending', LIST_LIMIT),
    api.rows('failed', LIST_LIMIT),
    api.rows('abuse', LIST_LIMIT),
  ]);
  return { overview, throughput, processing, pending, failed, abuse, receivedAt: Date.now() };
}

/** The latest snapshot and problem, and `refresh()` to read again now (after an action). */
export function usePoll(): { snapshot: Snapshot | null; problem: Problem | null; refresh: () => void } {
  const [snapshot, setSnapshot] = useState<Snapshot | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const refreshRef = useRef<() => void>(() => undefined);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let reading = false;
    let again = false;
    // One read at a time, the next one 2 s after it ends: a slow database never piles requests up.
    const read = async () => {
      if (reading) {
        again = true;
        return;
      }
      reading = true;
      clearTimeout(timer);
      try {
        const next = await readAll();
        if (!stopped) {
          setSnapshot(next);
          setProblem(null);
        }
      } catch (error) {
        if (!stopped) setProblem(problemOf(error));
      } finally {
        reading = false;
      }
      if (stopped) return;
      if (again) {
        again = false;
        void read();
      } else {
        timer = setTimeout(() => void read(), POLL_MS);
      }
    };
    refreshRef.current = () => void read();
    void read();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);

  return { snapshot, problem, refresh: () => refreshRef.current() };
}
