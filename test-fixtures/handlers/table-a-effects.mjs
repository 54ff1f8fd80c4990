// The seed's table_a handler (table-a.mjs: its ledger line, abuse, poison and flaky rows) whose successful runs
// write one row to `effects` inside ctx.transaction, the job's own transaction: a run whose claim was lost
// (stalled past its lease, killed, cut off) leaves no effect, so effects match done rows exactly while the
// ledger (STATUSQ_LEDGER) shows every execution, re-runs included.
import fixture from './table-a.mjs';

/** One effect row through whichever driver handle ctx.transaction lends, told apart by shape (each runs a statement its own way). */
export async function insertEffect(tx, jobId, pid) {
  const values = [String(jobId), pid];
  if (typeof tx.pragma === 'function') return void tx.prepare('INSERT INTO effects (job_id, pid) VALUES (?, ?)').run(...values);
  const sql = typeof tx.escapeIdentifier === 'function' ? 'INSERT INTO effects (job_id, pid) VALUES ($1, $2)' : 'INSERT INTO effects (job_id, pid) VALUES (?, ?)';
  await tx.query(sql, values);
}

export default async function handle(job, ctx) {
  const result = await fixture(job, ctx);
  if (job.row.kind === 'abuse') return result;
  return ctx.transaction(async (tx) => {
    await insertEffect(tx, job.id, process.pid);
    // Still inside the transaction: kills, stops and outages land while it is open.
    await new Promise((resolve) => setTimeout(resolve, 10));
    return result;
  });
}
