// Shapes of the dashboard's JSON API that both the server and the page (apps/cli/dashboard) use. Import-free,
// so the page's bundle can take them without pulling in anything of the server.

export interface ThroughputSample {
  /** When the count finished, epoch milliseconds. */
  t: number;
  done: number;
  failed: number;
  abuse: number;
  pending: number;
  processing: number;
}

/** `{ error: { kind, message } }`: one kind per HTTP status the contract (docs/dashboard-api.md) names. */
export type ErrorKind = 'BadRequest' | 'ReadOnly' | 'Unauthorized' | 'NotFound' | 'Database' | 'UnsupportedMediaType' | 'Forbidden' | 'Internal';
