// The scale runs' handler, in plain JavaScript with no import from statusq. Every execution is appended to the
// STATUSQ_LEDGER file ("id attempt pid host") before anything else, so the ledger says how often each row really
// ran, whatever the database says; SCALE_WORK_MS (default 0) stands in for a call to another service; the
// result names the run, and the worker stores it with the settle, so the row says which run's settle won.
import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

const ledger = process.env.STATUSQ_LEDGER;
const host = process.env.SCALE_HOST ?? 'local';
const workMs = Number(process.env.SCALE_WORK_MS ?? 0);

export default async function handle(job) {
  if (ledger) appendFileSync(ledger, `${job.id} ${job.attempt} ${process.pid} ${host}\n`);
  if (workMs > 0) await sleep(workMs);
  return { pid: process.pid, host };
}
