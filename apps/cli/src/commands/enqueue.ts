import { createReadStream } from 'node:fs';
import { isUtf8 } from 'node:buffer';
import { ConfigError, Queue, type EnqueueOptions, type EnqueueOutcome, type Store } from '@statusq/core';
import { DELAY_LIMIT, EXIT, parseDuration, parseRunAt, validateTableConfig, type Broker } from '@statusq/core/tools';
import { ENQUEUE_TO_VARIABLE, brokerQueueName, brokerUrl, optionalInteger, optionalString, tableConfig, type Flags } from '../args.js';
import { errorFields } from '../log.js';
import { enqueueProgress, type EnqueueProgress } from '../progress/enqueue.js';
import { progressSurface } from '../progress/status-line.js';
import { withStore, type Io } from '../with-store.js';

/**
 * Parses every item before anything is written, so a bad line leaves the table untouched. `where` names
 * item i in messages: its file line (blank lines are skipped, so the item number is not the line).
 */
async function readItems(flags: Flags, io: Io, shown: EnqueueProgress | null): Promise<{ items: unknown[]; where: (index: number) => string }> {
  const payload = optionalString(flags, 'payload');
  const file = optionalString(flags, 'file');
  if ((payload === undefined) === (file === undefined)) throw new ConfigError('enqueue: give exactly one of --payload JSON or --file rows.ndjson');
  if (payload !== undefined) return { items: [parseJson(payload, '--payload')], where: () => '--payload' };
  const items: unknown[] = [];
  const lines: number[] = [];
  let lineNumber = 0;
  const parseLine = (line: string) => {
    lineNumber++;
    if (line.trim().length === 0) return;
    items.push(parseJson(line, `${file} line ${lineNumber}`));
    lines.push(lineNumber);
    if (shown) shown.rowsRead++;
  };
  // Lines are cut as bytes (a newline byte is never inside a UTF-8 character) and decoded strictly: a byte that
  // is not UTF-8 would otherwise become U+FFFD and be written to the table as if the file had said so.
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const parseBlock = (block: Buffer) => {
    let text: string;
    try {
      text = utf8.decode(block);
    } catch {
      const bad = splitBytes(block).findIndex((line) => !isUtf8(line));
      throw new ConfigError(`enqueue: ${file} line ${lineNumber + 1 + Math.max(bad, 0)} is not valid UTF-8 (the file must be UTF-8 text, one JSON value per line)`);
    }
    text.split(/\r?\n/).forEach(parseLine);
  };
  try {
    // Read in chunks, so the progress line can follow a big file (its size is known; standard input's is not).
    let rest: Buffer = Buffer.alloc(0);
    let first = true;
    const source: AsyncIterable<Buffer> = file === '-' ? io.readStdin() : createReadStream(file!);
    for await (const chunk of source) {
      if (shown && file !== '-') shown.bytesRead += chunk.length;
      let bytes: Buffer = rest.length === 0 ? chunk : Buffer.concat([rest, chunk]);
      if (first) {
        if (bytes.length < UTF8_BOM.length && UTF8_BOM.subarray(0, bytes.length).equals(bytes)) {
          rest = bytes;
          continue;
        }
        first = false;
        // A byte order mark (an editor's UTF-8 export) before the first line is not part of its JSON.
        if (bytes.subarray(0, UTF8_BOM.length).equals(UTF8_BOM)) bytes = bytes.subarray(UTF8_BOM.length);
      }
      const cut = bytes.lastIndexOf(NEWLINE);
      if (cut < 0) rest = bytes;
      else {
        parseBlock(bytes.subarray(0, cut));
        rest = bytes.subarray(cut + 1);
      }
    }
    parseBlock(rest);
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(`enqueue: cannot read ${file}: ${(error as Error).message}`);
  }
  if (items.length === 0) throw new ConfigError(`enqueue: ${file} holds no rows`);
  return { items, where: (index) => `${file} line ${lines[index]}` };
}

const NEWLINE = 0x0a;
const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/** `bytes` cut at each newline byte. */
function splitBytes(bytes: Buffer): Buffer[] {
  const lines: Buffer[] = [];
  let start = 0;
  for (let at = bytes.indexOf(NEWLINE); at >= 0; at = bytes.indexOf(NEWLINE, start)) {
    lines.push(bytes.subarray(start, at));
    start = at + 1;
  }
  lines.push(bytes.subarray(start));
  return lines;
}

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`enqueue: ${where} is not valid JSON: ${(error as Error).message}`);
  }
}

export async function enqueue(flags: Flags, io: Io): Promise<number> {
  const config = tableConfig(flags, 'enqueue', 'jobs');
  validateTableConfig(config);
  const file = optionalString(flags, 'file');
  const when = enqueueTime(flags);
  const priority = optionalInteger(flags, 'priority');
  const kind = optionalString(flags, 'kind');
  const group = optionalString(flags, 'group');
  const key = optionalString(flags, 'key');
  const toUrl = brokerUrl(flags, 'to', ENQUEUE_TO_VARIABLE);
  const brokerQueue = brokerQueueName(flags);
  if (brokerQueue !== undefined && toUrl === undefined) throw new ConfigError('enqueue: --queue needs --to (a broker to publish to)');
  if (toUrl !== undefined && (key !== undefined || Object.keys(when).length > 0)) {
    throw new ConfigError(`enqueue: --to publishes rows as they commit, and ${key !== undefined ? '--key' : when.delayMs !== undefined ? '--delay' : '--run-at'} rows are published by the relay (statusq relay) instead; drop one of them`);
  }
  const wait = waitOptions(flags);
  const shown = enqueueProgress(progressSurface(flags), config.table, file);
  try {
    const { items, where } = await readItems(flags, io, shown);
    if (wait && items.length !== 1) throw new ConfigError(`enqueue: --wait waits for one row (--payload, or a file of one line), and ${file} holds ${items.length}; enqueue them without --wait and follow them with statusq inspect`);
    if (key !== undefined && items.length !== 1) throw new ConfigError(`enqueue: --key names one row, and ${file ?? '--payload'} holds ${items.length}; on an application's table each row may set dedupe_key itself`);
    const chunk = optionalInteger(flags, 'chunk');
    return await withStore(flags, 'enqueue', false, async (store) => {
      const orderColumn = await existingOrderColumn(store, config.table);
      const publishing = toUrl === undefined ? undefined : await (await import('../broker.js')).openBroker(store, { ...config, orderColumn }, toUrl, 'enqueue --to', brokerQueue);
      try {
        const queue = await Queue.open(shown?.countingInserts(store) ?? store, { ...config, orderColumn });
        const dispatch: Pick<EnqueueOptions, 'dispatchTo' | 'onDispatchError'> = publishing === undefined ? {} : {
          dispatchTo: publishing,
          onDispatchError: (error) => io.err(`warning: publishing to ${publishing.name} failed; the rows stay pending for statusq relay: ${errorFields(error).message as string}`),
        };
        const outcomes = await queue.enqueueDetailed(items, { chunk, describeItem: where, ...when, ...dispatch, ...(priority !== undefined && { priority }), ...(kind !== undefined && { kind }), ...(group !== undefined && { group }), ...(key !== undefined && { key, describeKey: '--key' }) });
        shown?.line.stop();
        const code = enqueued(io, config.table, outcomes, key, publishing === undefined ? '' : publishedNote(outcomes, publishing));
        return wait ? await waitForRow(io, queue, outcomes[0]!, wait.timeoutMs) : code;
      } finally {
        await publishing?.close();
      }
    });
  } finally {
    shown?.line.stop();
  }
}

/** What `enqueue --to` says of its rows: all published, or how many the relay is left to publish. */
function publishedNote(outcomes: readonly EnqueueOutcome[], broker: Broker): string {
  const left = outcomes.filter((o) => o.published !== true).length;
  if (left === 0) return `, published to ${broker.name} at ${broker.address}`;
  return `, ${outcomes.length - left} published to ${broker.name}; ${left} left to statusq relay (${left === outcomes.length ? 'none' : 'not all'} could be published${outcomes.some((o) => o.id === null) ? ': the database made their ids, and this insert cannot read them back (a store without INSERT ... RETURNING reports only an auto-increment id)' : ''})`;
}

/** The line `enqueue` ends with; `published` says where the rows went besides the table. */
function enqueued(io: Io, table: string, outcomes: readonly EnqueueOutcome[], key: string | undefined, published: string): number {
  const duplicates = outcomes.filter((o) => o.duplicate);
  const count = outcomes.length - duplicates.length;
  if (key !== undefined) {
    const id = String(outcomes[0]!.id);
    io.out(duplicates.length > 0 ? `duplicate: row ${id} holds key ${JSON.stringify(key)} and is pending or processing; nothing inserted into ${table}` : `enqueued 1 row into ${table} (id ${id}, key ${JSON.stringify(key)})`);
    return 0;
  }
  io.out(`enqueued ${count} row${count === 1 ? '' : 's'} into ${table}${published}${duplicates.length > 0 ? ` (${duplicates.length} duplicate${duplicates.length === 1 ? '' : 's'} of live keys not inserted)` : ''}`);
  return 0;
}

/** --wait [--timeout D], checked before the file is read or the database reached; null without --wait. */
function waitOptions(flags: Flags): { timeoutMs: number | undefined } | null {
  const timeout = optionalString(flags, 'timeout');
  if (flags.wait !== true) {
    if (timeout !== undefined) throw new ConfigError('enqueue: --timeout applies only with --wait');
    return null;
  }
  return { timeoutMs: timeout === undefined ? undefined : parseDuration(timeout, '--timeout') };
}

/**
 * enqueue --wait: waits for the row (a duplicate's: the live row that holds the key) to finish and prints how
 * it ended. Exit 0 done, 1 failed or abuse, 124 when --timeout ran out first (the row stays as it is).
 */
async function waitForRow(io: Io, queue: Queue, outcome: EnqueueOutcome, timeoutMs: number | undefined): Promise<number> {
  if (outcome.id === null) throw new ConfigError(`enqueue: --wait cannot follow the row it inserted into ${queue.table.table}: the database did not report its id (set the id column in the row)`);
  const id = String(outcome.id);
  const ended = await queue.waitFor(outcome.id, { timeoutMs });
  if (ended.status === 'timeout') {
    io.out(`timeout: row ${id} had not finished after ${timeoutMs} ms`);
    return EXIT.timedOut;
  }
  if (ended.status === 'done') {
    io.out(`done: row ${id}${ended.result === undefined ? '' : ` ${JSON.stringify(ended.result)}`}`);
    return EXIT.ok;
  }
  io.out(`${ended.status}: row ${id}${ended.lastError === null ? '' : ` ${ended.lastError}`}`);
  return EXIT.failure;
}

/** --delay or --run-at, checked before the file is read or the database reached. */
function enqueueTime(flags: Flags): Pick<EnqueueOptions, 'delayMs' | 'runAt'> {
  const delay = optionalString(flags, 'delay');
  const runAt = optionalString(flags, 'run-at');
  if (delay !== undefined && runAt !== undefined) throw new ConfigError('enqueue: give --delay or --run-at, not both');
  if (delay !== undefined) return { delayMs: parseDuration(delay, '--delay', DELAY_LIMIT) };
  if (runAt !== undefined) return { runAt: new Date(parseRunAt(runAt, '--run-at')) };
  return {};
}

/**
 * enqueue does not order anything, so a table without a `date` column is fine there: fall back to the id
 * column rather than refusing.
 */
async function existingOrderColumn(store: Store, table: string): Promise<string> {
  const columns = await store.describeTable(table);
  return columns?.some((c) => c.name.toLowerCase() === 'date') ? 'date' : 'id';
}
