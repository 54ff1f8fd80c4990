/**
 * The values every layer of statusq speaks: what it binds as SQL parameters, a row, a job's id, and a judged
 * server setting. Here rather than in the Store contract (which re-exports them) because the errors and the
 * table config below the contract use them too.
 */

/** Values statusq binds as SQL parameters. Every driver binds these natively. */
export type SqlValue = string | number | bigint | null;
export type Row = Record<string, unknown>;
export type JobId = string | number | bigint;
/**
 * A statement's parameter: a value, or a list bound as one array parameter, which core builds only for a
 * dialect with `anyOf`; the other adapters never receive one.
 */
export type SqlParam = SqlValue | readonly SqlValue[];

/** One setting of the server, judged (see StoreInspection.serverChecks). */
export interface ServerCheck {
  /** Short and stable, for the report and `--json`: the adapter's name for the setting it judged. */
  readonly name: string;
  /** `fail`: statusq refuses to run there (or would lose or double-run jobs); `warn`: it runs, with a cost said in detail. */
  readonly status: 'pass' | 'warn' | 'fail';
  readonly detail: string;
  /** What to change on the server or in statusq's options, when the check did not pass. */
  readonly fix?: string;
}
