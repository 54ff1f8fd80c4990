// A handler for the seed's table_a, in plain JavaScript with no import from statusq: `ctx` carries
// abuse() and giveUp(). When STATUSQ_LEDGER names a file, every execution is appended to it
// ("id attempt pid"), so tests can prove how many times each row really ran.
import { appendFileSync } from 'node:fs';

const ledger = process.env.STATUSQ_LEDGER;

export default async function handle(job, ctx) {
  if (ledger) appendFileSync(ledger, `${job.id} ${job.attempt} ${process.pid}\n`);
  const kind = job.row.kind;
  if (kind === 'abuse') return ctx.abuse('flagged by the abuse rule');
  if (kind === 'poison') throw new Error(`unreachable host for ${job.row.url}`);
  if (kind === 'flaky' && job.attempt === 1) throw new Error('temporary failure');
  return { fetched: job.row.url };
}
