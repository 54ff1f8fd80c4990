/**
 * Fixtures shared by the conformance suite, the CLI tests, the demo and the benchmark, the same on every
 * database: the rows of the seed's `table_a` (a deterministic generator with poison and abuse rows mixed in),
 * the status each row must end in, and plain `.mjs` handlers in `handlers/` that import nothing from statusq.
 * And the one home of the test harness: a free port, bounded waits, a private server of a test's own
 * (PrivateServer runs any ServerSpec: the adapters and brokers spell theirs), and the TCP fault proxy.
 * The table itself is each adapter's to create (its `./testing` entry), in its own DDL.
 */
import { fileURLToPath } from 'node:url';

export { delay, freePort, waitFor, withDeadline } from './harness.js';
export { PrivateServer, ServerControls, type ServerPlacement, type ServerSpec } from './private-server.js';
export { TcpProxy, routeThrough, type ProxyAddress } from './tcp-proxy.js';

/**
 * What a row of the seed's `table_a` is for the fixture handler: `ok` succeeds, `poison` always throws,
 * `abuse` is judged abusive, `flaky` fails its first attempt only.
 */
export type RowKind = 'ok' | 'poison' | 'abuse' | 'flaky';

export interface TableARow {
  id: number;
  /** UTC as 'YYYY-MM-DD HH:MM:SS.SSS' (see formatUtcTime). */
  date: string;
  url: string;
  kind: RowKind;
}

export interface GenerateOptions {
  /** Every n-th row is poison (always throws). 0 for none. Default 50. */
  poisonEvery?: number;
  /** Every n-th row (offset by one) is abusive. 0 for none. Default 40. */
  abuseEvery?: number;
  /** Every n-th row (offset by two) fails its first attempt only. 0 for none. Default 0. */
  flakyEvery?: number;
  /** Newest row's time; rows go back one second each. Default now. */
  newest?: Date;
  firstId?: number;
}

/**
 * A UTC time as 'YYYY-MM-DD HH:MM:SS.SSS': a text column holds it in an order that sorts as time, and a
 * native time column of every supported database parses it as that instant.
 */
export function formatUtcTime(date: Date): string {
  return date.toISOString().replace('T', ' ').replace('Z', '');
}

/** Deterministic rows: the same options always give the same rows. */
export function generateTableARows(count: number, options: GenerateOptions = {}): TableARow[] {
  const poisonEvery = options.poisonEvery ?? 50;
  const abuseEvery = options.abuseEvery ?? 40;
  const flakyEvery = options.flakyEvery ?? 0;
  const newest = (options.newest ?? new Date()).getTime();
  const firstId = options.firstId ?? 1;
  const rows: TableARow[] = [];
  for (let i = 0; i < count; i++) {
    const id = firstId + i;
    let kind: RowKind = 'ok';
    if (poisonEvery > 0 && id % poisonEvery === 0) kind = 'poison';
    else if (abuseEvery > 0 && id % abuseEvery === 1) kind = 'abuse';
    else if (flakyEvery > 0 && id % flakyEvery === 2) kind = 'flaky';
    rows.push({ id, date: formatUtcTime(new Date(newest - (count - i) * 1000)), url: `https://example.test/item/${id}`, kind });
  }
  return rows;
}

/** Expected terminal status name of a row of this kind, given whether retries are on. */
export function expectedStatus(kind: RowKind, retries: boolean): 'done' | 'abuse' | 'failed' {
  if (kind === 'poison') return 'failed';
  if (kind === 'abuse') return 'abuse';
  if (kind === 'flaky') return retries ? 'done' : 'failed';
  return 'done';
}

/** Absolute path of a fixture handler in `handlers/`. */
export function handlerPath(name: 'table-a.mjs' | 'table-a-effects.mjs' | 'noop.mjs' | 'no-default.mjs' | 'not-a-function.mjs'): string {
  return fileURLToPath(new URL(`../handlers/${name}`, import.meta.url));
}
