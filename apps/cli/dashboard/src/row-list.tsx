// What the row cards share: the columns a report holds, and the table of rows with its "showing n of m".
import type { ComponentChildren } from 'preact';
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
