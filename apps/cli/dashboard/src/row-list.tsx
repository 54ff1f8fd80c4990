// What the row cards share: the columns a report holds, who may cancel, and the table of rows with its
// "showing n of m".
import type { ComponentChildren } from 'preact';
import type { Ask } from './actions.tsx';
import type { Overview, RowsReport } from './api.ts';
import { formatCount } from './format.ts';
import { LIST_LIMIT } from './poll.ts';

/** The column a report holds for an optional statusq column, by its resolved name; undefined when absent. */
export function columnOf(overview: Overview, report: RowsReport, key: string, fallback: string): string | undefined {
  const name = overview.columns[key] ?? fallback;
  return report.columns.includes(name) ? name : undefined;
}

export function idColumn(overview: Overview): string {
  return overview.columns.id ?? 'id';
}

/**
 * Who may cancel rows here: null on a read-only page, and on a table without last_error, where a cancelled row
 * could not be told from a failed one (the server refuses it there).
 */
export function canCancel(overview: Overview, ask: Ask): Ask {
  return overview.columns.lastError === undefined ? null : ask;
}

export function Listed({ report, total, empty, children }: { report: RowsReport; total: number | string; empty: string; children: ComponentChildren }) {
  if (report.rows.length === 0) return <p class="empty">{empty}</p>;
  const more = typeof total === 'number' ? total > report.rows.length : report.rows.length >= LIST_LIMIT;
  return (
    <>
      <div class="table-wrap">{children}</div>
      {more && (
        <p class="hint">
          showing {report.rows.length} of {formatCount(total)}
        </p>
      )}
    </>
  );
}
