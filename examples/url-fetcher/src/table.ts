// What the seed, the worker and the report share: the table as statusq sees it, and the one function that
// turns a URL into the host the per-host limit counts.
import type { TableConfig } from '@statusq/core';

/** table_a as this application declares it: the seed's four columns plus `host`, which the application fills. */
export interface TableARow {
  id: number;
  date: Date | string; // MariaDB's DATETIME arrives as a Date, SQLite's TEXT as a string
  url: string;
  host: string;
  status: number | null;
}

/**
 * `host` is the group column: groupConcurrency and groupRate count rows per value of it. Oldest first, so a URL
 * waits behind those submitted before it (a host at its limit is skipped, not waited on).
 */
export const TABLE: TableConfig = { table: 'table_a', order: 'oldest', columns: { group: 'host' } };

/**
 * The host a URL's fetch connects to, as the WHATWG parser the fetch itself uses reads it (lower case, no port,
 * no user info, IDN as punycode): the limit then counts exactly the hosts that receive the requests.
 */
export const hostOf = (url: string): string => new URL(url).hostname;
