import { mkdirSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { connect, type SqliteStore } from '@statusq/adapter-sqlite';
import { sqliteFixtures } from '@statusq/adapter-sqlite/testing';
import { migrateTable, type MigrateReport, type Store } from '@statusq/core';
import type { Statement } from '@statusq/core/tools';
import type { RowKind, TableARow } from '@statusq/test-fixtures';

/** The seed's application table. */
export const TABLE = 'table_a';

/** Rows per INSERT transaction: one commit per chunk, not per row, keeps seeding to well under a second. */
const INSERT_CHUNK = 5_000;

export function sqliteUrl(path: string): string {
  return `sqlite:${path}`;
}

/**
 * Builds the database as an application would have it before adopting statusq (the seed's table_a, rows
 * with only a status column), then migrates it the way an operator would, so the demo also shows what
 * `migrate --with leases,retries` adds to an existing table.
 */
export async function createDemoDatabase(path: string, rows: readonly TableARow[]): Promise<MigrateReport> {
  removeDatabaseFiles(path);
  mkdirSync(dirname(path), { recursive: true });
  const store = await connect(sqliteUrl(path));
  try {
    for (const sql of sqliteFixtures.tableA(TABLE)) await store.execute({ sql, params: [] });
    await insertRows(store, rows);
    return await migrateTable(store, { table: TABLE, with: ['leases', 'retries'] });
  } finally {
    await store.close();
  }
}

/** A stale WAL or shared-memory file from an earlier run would be replayed into the fresh database. */
function removeDatabaseFiles(path: string): void {
  for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(path + suffix, { force: true });
}

async function insertRows(store: SqliteStore, rows: readonly TableARow[]): Promise<void> {
  const sql = `INSERT INTO "${TABLE}" (id, date, url, kind) VALUES (?, ?, ?, ?)`;
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    const statements: Statement[] = rows.slice(i, i + INSERT_CHUNK).map((r) => ({ sql, params: [r.id, r.date, r.url, r.kind] }));
    await store.executeBatch(statements);
  }
}

/** A row as it ended up, for the checks. */
export interface FinalRow {
  id: number;
  kind: RowKind;
  status: number | null;
  attemptCount: number;
  lastError: string | null;
}

export async function readFinalRows(store: Store): Promise<FinalRow[]> {
  const { rows } = await store.execute({ sql: `SELECT id, kind, status, attempt_count, last_error FROM "${TABLE}" ORDER BY id`, params: [] });
  return rows.map((r) => ({
    id: Number(r.id),
    kind: r.kind as RowKind,
    status: r.status === null ? null : Number(r.status),
    attemptCount: Number(r.attempt_count),
    lastError: r.last_error === null ? null : String(r.last_error),
  }));
}
