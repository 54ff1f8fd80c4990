import { statSync } from 'node:fs';
import type { Store } from '@statusq/core';
import { RateWindow, bar, clock, eta, fraction, perSecond } from './format.js';
import { StatusLine, type ProgressSurface } from './status-line.js';

/**
 * What `enqueue --file` shows: while reading, the bytes read of the file's size (none for standard input);
 * while inserting, the rows committed of those read. Rates over the last seconds, an ETA where there is a total.
 */
export class EnqueueProgress {
  bytesRead = 0;
  rowsRead = 0;
  rowsInserted = 0;
  private inserting = false;
  private window = new RateWindow();
  private readonly started = Date.now();
  readonly line: StatusLine;

  constructor(surface: ProgressSurface, private readonly table: string, private readonly fileSize: number | null) {
    this.line = new StatusLine(surface, () => this.text());
  }

  /**
   * `store` as Queue.enqueue uses it, counting the rows of each batch it commits: reading is over, from now
   * on the rows inserted are what moves. Without --chunk that is one batch, all rows at the end.
   */
  countingInserts(store: Store): Store {
    this.inserting = true;
    this.window = new RateWindow();
    const executeBatch = async (statements: Parameters<Store['executeBatch']>[0]) => {
      const results = await store.executeBatch(statements);
      this.rowsInserted += statements.length;
      return results;
    };
    return new Proxy(store, {
      get: (target, key) => {
        if (key === 'executeBatch') return executeBatch;
        const value: unknown = Reflect.get(target, key, target);
        // Bound to the store itself: an adapter's private fields are not on the proxy.
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  text(): string {
    const elapsed = `elapsed ${clock(Date.now() - this.started)}`;
    let parts: string[];
    if (this.inserting) {
      const rate = this.window.rate(this.rowsInserted);
      const left = this.rowsRead - this.rowsInserted;
      parts = [`${this.rowsInserted} of ${this.rowsRead} rows inserted`, `${perSecond(rate)} rows/s`, `ETA ${eta(left, rate)}`, elapsed, bar(fraction(this.rowsInserted, this.rowsRead))];
    } else if (this.fileSize === null) parts = [`${this.rowsRead} rows read`, megabytes(this.bytesRead), elapsed];
    else {
      const rate = this.window.rate(this.bytesRead);
      const left = this.fileSize - this.bytesRead;
      parts = [`${this.rowsRead} rows read`, `${megabytes(this.bytesRead)} of ${megabytes(this.fileSize)}`, `ETA ${eta(left, rate)}`, elapsed, bar(fraction(this.bytesRead, this.fileSize))];
    }
    return `enqueue ${this.table}: ${parts.join(' | ')}`;
  }
}

/** The line of `enqueue --file FILE`, started; null without progress or without --file. */
export function enqueueProgress(surface: ProgressSurface | null, table: string, file: string | undefined): EnqueueProgress | null {
  if (surface === null || file === undefined) return null;
  let size: number | null = null;
  if (file !== '-') {
    try {
      size = statSync(file).size;
    } catch {
      // Reading it says why, in the command's own words.
    }
  }
  const progress = new EnqueueProgress(surface, table, size);
  progress.line.start();
  return progress;
}

function megabytes(bytes: number): string {
  return `${(bytes / 1_048_576).toFixed(1)} MB`;
}
