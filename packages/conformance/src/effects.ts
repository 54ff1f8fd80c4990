/**
 * The exactly-once proof's bookkeeping: an `effects` table a handler writes one row to per execution inside
 * ctx.transaction (test-fixtures' table-a-effects.mjs), read back per job. No unique key on it: a second effect of
 * a job must show, not collide.
 */
import { pathToFileURL } from 'node:url';
import type { Store } from '@statusq/core';
import { handlerPath } from '@statusq/test-fixtures';

export type InsertEffect = (tx: unknown, jobId: unknown, pid: number) => Promise<void>;

export async function createEffects(store: Store): Promise<void> {
  await store.execute({ sql: 'CREATE TABLE effects (job_id VARCHAR(64) NOT NULL, pid INTEGER NOT NULL)', params: [] });
}

/** How many effect rows each job has (jobs with none are absent). */
export async function effectsByJob(store: Store): Promise<Map<string, number>> {
  const { rows } = await store.execute({ sql: 'SELECT job_id, COUNT(*) AS n FROM effects GROUP BY job_id', params: [] });
  return new Map(rows.map((row) => [String(row.job_id), Number(row.n)]));
}

/** The fixture's own insert, so in-process handlers write effects exactly as the child workers' do. */
export async function loadInsertEffect(): Promise<InsertEffect> {
  const module = (await import(pathToFileURL(handlerPath('table-a-effects.mjs')).href)) as { insertEffect: InsertEffect };
  return module.insertEffect;
}

/** Each job whose effects are not exactly one when its row is done, and none otherwise. */
export function effectMismatches(statuses: ReadonlyMap<string, number | null>, effects: ReadonlyMap<string, number>, doneCode: number): string[] {
  const problems: string[] = [];
  for (const [id, status] of statuses) {
    const want = status === doneCode ? 1 : 0;
    const have = effects.get(id) ?? 0;
    if (have !== want) problems.push(`job ${id} (status ${String(status)}): ${have} effects, expected ${want}`);
  }
  for (const id of effects.keys()) if (!statuses.has(id)) problems.push(`effects for job ${id}, which is not in the table`);
  return problems;
}
