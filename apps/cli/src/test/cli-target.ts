// What each dialect's CLI test file hands to the shared scenarios (cli-scenarios.ts and the parts it registers).
import type { ConformanceOptions, FixtureTables } from '@statusq/conformance';
import type { TableARow } from '@statusq/test-fixtures';
import type { CliRun, StatusCounts } from './cli-harness.js';

/** One test's database. */
export interface CliTestDatabase {
  /** What `--db` takes. */
  url: string;
  /** Runs SQL outside the CLI (to set a table up or look at it); no parameters, so no placeholder style. */
  query<T = Record<string, unknown>>(sql: string): Promise<T[]>;
  /** Inserts rows into the seed's table_a, created by the adapter's fixture tableA. */
  insertTableA(rows: readonly TableARow[]): Promise<void>;
  dispose(): Promise<void>;
}

export interface CliTarget {
  /** The database's name, for scratch directories and log lines. */
  dialect: string;
  /** Null when the database can be used, else why not (the suite then skips, or fails in CI). */
  unavailable: string | null;
  /** `[needs <capability>]` for the skip title. */
  capability: string;
  /** The seed's table_a and the checked tables in this database's DDL: its adapter's `./testing` fixtures. */
  fixtures: FixtureTables;
  /** A fresh, empty database; `dir` is the test's scratch directory. */
  create(dir: string): Promise<CliTestDatabase>;
  /** A SQL literal for an ISO time in the managed table's `date` column. */
  dateLiteral(iso: string): string;
  /** SQL for the database's current time as statusq's own time columns (claimed_at) hold it. */
  now: string;
  /** As the conformance option of that name: a server dialect's URL through a TCP proxy, with deadlines. */
  throughProxy?: ConformanceOptions['throughProxy'];
}

export interface CliContext {
  readonly dir: string;
  readonly db: CliTestDatabase;
  /** The CLI's main in this process (runCliInProcess): what most scenarios need, at a fraction of a process's CPU. */
  statusq(...args: string[]): Promise<CliRun>;
  /**
   * The built bin in a child process, for what only a process shows: an exit through process.exit (a
   * recycle), output written straight to the process's standard error (progress), its own pid.
   */
  statusqProcess(...args: string[]): Promise<CliRun>;
  /** The CLI with these environment variables set (STATUSQ_DATABASE_URL and DATABASE_URL are otherwise unset). */
  statusqWith(env: NodeJS.ProcessEnv, ...args: string[]): Promise<CliRun>;
  stats(table?: string): Promise<StatusCounts>;
  file(name: string, text: string): string;
}
