// The JSON API `statusq dashboard` serves (the contract in apps/cli/src/dashboard/), as the page reads it.
// URLs are relative to the page, so a reverse proxy may mount the dashboard under any path.

import type { ErrorKind, ThroughputSample } from '../../src/dashboard/api-types.ts';

export type { ErrorKind, ThroughputSample };

/** A row id as the API sends it: a number when exact, else a string (big integers, text ids). */
export type RowId = number | string;

export type StatusName = 'pending' | 'processing' | 'done' | 'abuse' | 'failed' | 'other';
export type Counts = Record<StatusName, number | string>;

export interface Overview {
  table: string;
  readOnly: boolean;
  features: { leases: boolean; retries: boolean; results: boolean };
  /** Resolved column names: id, status, order, and the optional ones present (claimedAt, workerId, lastError...). */
  columns: Record<string, string | undefined>;
  counts: Counts;
  /** On a table with a kind column only: counts per kind, rows without a kind under ''. */
  kinds?: Record<string, Counts>;
  /** Pending rows published to a broker and not claimed since; null on a table without dispatched_at. */
  dispatched: number | null;
  oldestPending: { id: RowId; order: unknown; ageMs: number | null } | null;
  clock: string;
  leaseMs: number | null;
}

export interface Throughput {
  intervalMs: number;
  samples: ThroughputSample[];
}

export type Row = Record<string, unknown>;

export type ListedStatus = 'failed' | 'abuse' | 'processing' | 'pending';

export interface RowsReport {
  status: ListedStatus;
  limit: number;
  columns: string[];
  rows: Row[];
  clock: string | null;
}

export type RequeueStatus = 'failed' | 'abuse' | 'processing';

export type RequeueRequest = { status: RequeueStatus; ids: RowId[] } | { status: RequeueStatus; all: true };

export interface RequeueResult {
  requeued: number;
  live: number;
  leaseMs: number | null;
  notRequeued: Array<{ id: RowId; reason: string }>;
}

/** Named rows only: the page never cancels a whole status. Without a reason the server writes who asked. */
export interface CancelRequest {
  ids: RowId[];
  reason?: string;
}

export interface CancelResult {
  cancelled: number;
  /** Each id left as it was, and why: `not found`, or `status <name>` when it had already finished. */
  notCancelled: Array<{ id: RowId; reason: string }>;
}

/** An answer other than 2xx: the HTTP status and the API's error kind and message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    /** One of the API's ErrorKinds, or `HTTP <status>` when the answer was not the API's (a proxy's page). */
    readonly kind: ErrorKind | `HTTP ${number}`,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

async function call<T>(path: string, init?: RequestInit): Promise<T> {
  // Same-origin credentials: with --token the browser resends the Basic credentials it prompted for.
  const response = await fetch(path, { credentials: 'same-origin', cache: 'no-store', ...init });
  const text = await response.text();
  let body: unknown = null;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    // A proxy's HTML error page, say: reported below by status.
  }
  if (!response.ok) {
    const error = (body as { error?: { kind?: ErrorKind; message?: string } } | null)?.error;
    throw new ApiError(response.status, error?.kind ?? `HTTP ${response.status}`, error?.message ?? (text.slice(0, 200) || response.statusText));
  }
  return body as T;
}

const post = <T>(path: string, body: unknown) => call<T>(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

export const api = {
  overview: () => call<Overview>('api/overview'),
  throughput: () => call<Throughput>('api/throughput'),
  rows: (status: ListedStatus, limit: number) => call<RowsReport>(`api/rows?status=${status}&limit=${limit}`),
  requeue: (request: RequeueRequest) => post<RequeueResult>('api/requeue', request),
  cancel: (request: CancelRequest) => post<CancelResult>('api/cancel', request),
};
