// What `statusq <command> --help` prints: each command's flags with their defaults and units.
import type { Command } from './args.js';
import { RACE_DEFAULTS } from './doctor/race.js';

const DB = '  --db URL                    sqlite:PATH, postgres://user:pass@host:port/db or mysql://user:pass@host:port/db\n' +
  '                              (default: $STATUSQ_DATABASE_URL, else $DATABASE_URL)\n' +
  '  --adapter MODULE            the adapter package or file to load (default: by the URL scheme; $STATUSQ_ADAPTER)';
const LISTEN_DB = '  --listen-db URL             a store that listens for new rows, behind a transaction-mode pooler that loses the\n' +
  '                              listening session (PgBouncer pool_mode = transaction): a URL straight to the server\n' +
  '                              for the listening connection alone; claims and settles keep going through --db\n' +
  '                              (default: $STATUSQ_LISTEN_DATABASE_URL, else --db)';
const PROGRESS = '  --progress auto|on|off      a live status line on stderr (default auto: on when stderr is a terminal and CI is\n' +
  '                              not set; on without a terminal: a plain line every second)';
const COLUMNS = '  --id-column C               the primary key (default id)\n' +
  '  --status-column C           the status column (default status)\n' +
  '  --order-column C            the queue order column (default date)';
const KIND_COLUMN = '  --kind-column C             the column naming each row\'s kind (default kind)';
const GROUP_COLUMN = '  --group-column C            the column holding each row\'s group (default group_key)';

export const COMMAND_HELP: Readonly<Record<Command, string>> = {
  init: `usage: statusq init --db URL [--table jobs] [--with priority,progress,kinds,groups,tracing,await] [--order newest|oldest]
Creates a managed queue table (id, date, status, payload, the leases, retries, results, delays and dedupe
columns, the pending and key indexes). On an existing table it adds what is missing.

${DB}
  --table T                   the table to create (default jobs)
  --with GROUPS               priority (a priority column with its index, for enqueue --priority), progress (a
                              progress column, for ctx.progress), kinds (a kind column with its index, for
                              enqueue --kind and work --handlers), groups (a group_key column with its index,
                              for enqueue --group and work --group-concurrency / --group-rate), tracing (a
                              trace_context column: a job's run span joins the trace that enqueued it), await (no
                              column: where wake-ups are triggers, one NOTIFYs each settle, so enqueue --wait and
                              waitFor see it at once; every settle pays for it)
  --order newest|oldest       the order the workers claim in, which the priority index serves (default newest)`,
  migrate: `usage: statusq migrate --db URL --table T [--with leases,retries,results,delays,priority,dedupe,progress,dispatch,kinds,groups,tracing,await] [--beside [--id-column C]] [--kind-column C] [--group-column C] [--order newest|oldest]
Prepares an existing table: adds the status column if missing (every row then pending), the optional column
groups asked for and the pending-row index. Data is untouched; a second run changes nothing.
With --beside the table gains no column: a claims table T_statusq keyed by its id holds claimed_at,
worker_id, attempt_count, next_attempt_at, last_error and finished_at (leases, fencing, retries with
backoff, failure reasons); only the pending index is added to T.

${DB}
  --table T                   the table (required)
  --with GROUPS               comma-separated: leases (claimed_at, worker_id), retries (attempt_count,
                              next_attempt_at, last_error), results (result, finished_at), delays
                              (next_attempt_at alone, for enqueue --delay), priority (priority and its
                              index, for enqueue --priority), dedupe (dedupe_key and its unique index over
                              pending and processing rows, for enqueue --key), progress (for ctx.progress),
                              dispatch (dispatched_at and the relay's index, for statusq relay and work
                              --from), kinds (kind and its index, for enqueue --kind and work --handlers),
                              groups (group_key and its index, for enqueue --group and work
                              --group-concurrency / --group-rate), tracing (trace_context, which enqueue
                              fills with the caller's W3C trace context), await (no column: where wake-ups are
                              triggers, one NOTIFYs each settle, so enqueue --wait and waitFor see it at once;
                              every settle pays for it); default none
  --beside                    keep the claim state in the claims table T_statusq instead of new columns of
                              T (not on a table that has claim-state columns of its own)
  --id-column C               with --beside: the id column the claims table is keyed by (default id)
  --status-column C           the status column (default status)
  --order-column C            the queue order column (default date)
  --kind-column C             with --with kinds: a text column of the table's own that names each row's kind
                              (a type column): it gets the kind index, and no kind column is added
  --group-column C            with --with groups: a column of the table's own (text or integer: a host column the
                              application fills, a tenant id) that holds each row's group: it gets the group
                              index, and no group_key column is added
  --order newest|oldest       the order the workers claim in, which the priority index serves (default newest)`,
  enqueue: `usage: statusq enqueue --db URL [--table jobs] (--payload JSON | --file rows.ndjson | --file -) [--delay D | --run-at T] [--wait [--timeout D]]
Inserts pending rows: payloads on a managed table, column values on an application's own table.

${DB}
  --table T                   the table (default jobs)
  --payload JSON              one row
  --file PATH                 one JSON value per line; - reads standard input
  --chunk N                   commit every N rows (default: all rows in one transaction)
  --delay DURATION            the rows are not claimed before this long from the database's now (e.g. 30s,
                              2h, 7d); needs next_attempt_at (migrate --with delays)
  --run-at TIME               the rows are not claimed before this instant, ISO 8601 with a zone
                              (2026-12-01T10:00:00Z), as the database's clock reads it
  --priority N                higher is claimed first (default 0); needs a priority column (migrate
                              --with priority)
  --kind K                    the rows' kind: only workers with a handler for K claim them (work --handlers);
                              letters, digits and _ . : / -; needs a kind column (migrate --with kinds)
${KIND_COLUMN}
  --group G                   the rows' group (a URL's host, a tenant): workers with --group-concurrency or
                              --group-rate keep each group within its limit; needs a group column (migrate
                              --with groups)
${GROUP_COLUMN}
  --key K                     deduplication key of the one row (--payload, or a file of one line): while a
                              row with key K is pending or processing, nothing is inserted and its id is
                              printed (exit 0); needs dedupe_key (migrate --with dedupe)
  --to URL                    also publish the committed rows to this broker (amqp://, amqps://, nats://;
                              or STATUSQ_ENQUEUE_TO) for consumers (work --from): pick-up without waiting
                              for the relay; needs dispatched_at (migrate --with dispatch). Not with --delay,
                              --run-at or --key (the relay publishes those). A publish that fails leaves the
                              rows to the relay: a warning, exit 0
  --queue NAME                with --to: the broker queue (default statusq.<table>)
  --wait                      wait for the one row (--payload, or a file of one line; with --key a duplicate's
                              live row) to finish, and print how it ended: exit 0 done (with its result), 1
                              failed or abuse (with its last_error), 124 on --timeout
  --timeout DURATION          with --wait: stop waiting after this long (e.g. 30s); the row stays as it is
${PROGRESS}`,
  work: `usage: statusq work --db URL --table T (--handler PATH | --handlers DIR) [flags]
Claims pending rows and runs the handler on each until stopped (SIGTERM/SIGINT), or until the queue is empty.

${DB}
${LISTEN_DB}
  --table T                   the table (required)
  --handler PATH              an ES module whose default export handles one job, or is an object of such
                              functions by kind (export default { email, report }: handlers by kind)
  --handlers DIR              handlers by kind: each DIR/<kind>.mjs (or .js) handles rows of that kind. With
                              handlers by kind the worker claims only those kinds; other rows stay pending
  --kind-concurrency K=N,...  with handlers by kind: at most N rows of kind K processing at once across every
                              worker, process and host given the same limit (report=2,email=10); default none
  --kind-rate K=R,...         with handlers by kind: at most R starts of kind K (N/s, N/m or N/h) across every worker,
                              process and host given the same (email=50/s,report=1/m); default none
  --group-concurrency N       at most N rows of one group processing at once across every worker, process and
                              host given the same limit (1: each group runs serially, in queue order); rows
                              without a group are not limited; needs a group column (migrate --with groups)
  --group-rate N/s|N/m|N/h    at most N starts of one group per second, minute or hour across every worker, process
                              and host (per-host politeness); needs a group column
${COLUMNS}
${KIND_COLUMN}
${GROUP_COLUMN}
  --order newest|oldest       which rows first (default newest)
  --select C1,C2              the columns job.row carries besides statusq's own (id, status, order and optional
                              columns); default every column. Fewer make each claim cheaper
  --concurrency N             jobs at once per process (default 4)
  --batch N                   most rows one claim takes (default: the concurrency)
  --max-attempts N            tries before a job ends failed (default 3 with an attempt_count column, else 1)
  --retry-delay DURATION      first backoff step, doubling, with next_attempt_at (default 1s)
  --lease DURATION            a claim's lease, with claimed_at (default 5m)
  --aging DURATION            rows older than this are claimed first, oldest first (default off)
  --poll-max DURATION         longest an idle worker waits between claims (default 1s, at least 10ms); a store that
                              wakes idle workers when rows arrive (doctor's claim line says which) ends the wait at
                              once; where a probe finds that wake-up lost (a pooler), a warn line says so and it polls
  --claim-strategy S          native (default) or conditional-update
  --stop-timeout DURATION     how long a stop waits for running jobs before handing them back (default 30s)
  --job-timeout DURATION      abort and fail an attempt running longer (default none)
  --job-timeout-grace D       how long an aborted handler may take to end before the process recycles (default 5s)
  --read-only-wait DURATION   how long to wait for a read-only database (a replica, a failover in progress) to take
                              writes again before exiting 1 (default 2m; 0: exit at once); rows stay claimed for the lease
  --exit-when-empty           exit 0 once nothing is pending or processing
  --schedule FILE             recurring rows: a YAML or JSON list of {name, cron, timezone, payload | row,
                              priority, catchUp}; each tick enqueues one row however many workers run the file
  --processes P               run P worker processes under a supervisor
  --max-instances N           at most N instances of work on this table at once, across hosts (each holds a slot
                              in statusq_instances, renewed while it runs); one over the cap exits 0 at once
  --wait                      with --max-instances: wait for a slot instead of exiting
  --instance-lease DURATION   how long a dead instance's slot stays held (default 30s, from 1s to 1h)
  --rate N/s|N/m|N/h          at most N job starts per second, minute or hour across every process and host on the
                              table (a budget row in statusq_rate_limits, on the database's clock)
  --log-level L               error, warn, info (default) or debug (a line per job); every level logs those above it
  --log-format F              json (default when standard output is not a terminal) or pretty (the default on one)
  --verbose                   the same as --log-level debug
  --metrics-port PORT         serve Prometheus /metrics, /healthz and /readyz on PORT (0: any free port, logged)
  --metrics-host H            the address to serve them on (default 127.0.0.1; 0.0.0.0 for every interface)
${PROGRESS}
  --from URL                  take jobs from a broker instead of polling: amqp://user:pass@host:5672 (RabbitMQ,
                              @statusq/broker-rabbitmq) or nats://host:4222 (NATS JetStream, @statusq/broker-nats),
                              fed by statusq relay; each message's row is claimed with the same guarded UPDATE
                              (default: $STATUSQ_WORK_FROM; none: poll the table). Needs migrate --with
                              leases,dispatch. An unreachable broker: exit 1 after 10 s
  --prefetch N                with --from: messages delivered and not yet taken at once (default 2 x
                              concurrency, at least --batch)
  --queue NAME                with --from: the broker queue (stream) to take from, as given to the relay
                              (default statusq.<table>)

Durations need a unit: 250ms, 30s, 5m, 1h, 2d; at most 24d.`,
  relay: `usage: statusq relay --db URL --table T --to URL [--batch N] [--redispatch-after DURATION] [--exit-when-empty]
Publishes the table's due rows to a broker, one message per row, for workers started with --from. Rows stay
pending until a worker claims them, so polling workers may run beside it. Needs the dispatch column with leases
(statusq migrate --with leases,dispatch).

${DB}
  --table T                   the table (required)
  --to URL                    amqp://user:pass@host:5672 (RabbitMQ quorum queue statusq.<table>) or
                              nats://host:4222 (JetStream work-queue stream statusq_<table>)
                              (default: $STATUSQ_RELAY_TO). An unreachable broker: exit 1 after 10 s
  --queue NAME                the broker queue (stream) name (default statusq.<table>); give one per database
                              when two databases with the same table name share a broker
  --batch N                   most rows published per pass (default 256)
  --redispatch-after D        a row published this long ago and still not claimed is published again (a message
                              the broker lost); keep it above the longest backlog wait (default 5m)
  --poll-max DURATION         longest wait between passes that found nothing, where the store cannot wake the
                              relay on insert (doctor's claim line says which) (default 1s)
  --exit-when-empty           stop once no row is pending or processing (a lost claim comes back to publish)
${COLUMNS}
  --log-level L               error, warn, info (default) or debug (a line per batch)
  --log-format F              json or pretty
  --verbose                   the same as --log-level debug
  --metrics-port PORT         serve Prometheus /metrics (statusq_relay_published_total, statusq_relay_publish_failures_total,
                              statusq_relay_batch_duration_seconds, statusq_relay_dispatched_rows), /healthz and /readyz
  --metrics-host H            the address to serve them on (default 127.0.0.1)

Durations need a unit: 250ms, 30s, 5m, 1h, 2d; at most 24d.`,
  stats: `usage: statusq stats --db URL --table T [--json]
Rows per status: pending, processing, done, abuse, failed, and other (any other status value); on a table with
the dispatch column also dispatched: pending rows published to a broker and not claimed since (in its queue).

${DB}
  --table T                   the table (required)
${COLUMNS}
${KIND_COLUMN}
${GROUP_COLUMN}
  --json                      one JSON object instead of a table`,
  requeue: `usage: statusq requeue --db URL --table T --status failed|abuse|processing [--id ID ...]
Puts rows back to pending: every row of that status, or only the --id rows (exit 5 when some were not).

${DB}
  --table T                   the table (required)
  --status S                  failed, abuse or processing (required)
  --id ID                     only this row; repeatable
${COLUMNS}
  --lease DURATION            processing rows: only those whose lease expired this long ago (default 5m)
  --force                     processing rows without leases: requeue them anyway (they may be running)`,
  cancel: `usage: statusq cancel --db URL --table T --id ID [--id ID ...] [--reason TEXT]
Fails the --id rows for good: a pending row ends failed at once and never runs; a running row ends failed
too, and its worker aborts the handler (ctx.signal, with the reason) at its next heartbeat; nothing the
handler writes afterwards changes the row. last_error says "cancelled: <reason>". Rows already finished
and unknown ids are listed (exit 5). Needs the last_error column (migrate --with retries).

${DB}
  --table T                   the table (required)
  --id ID                     the row to cancel (required); repeatable
  --reason TEXT               why, written after "cancelled: " (default: by an operator)
${COLUMNS}`,
  prune: `usage: statusq prune --db URL --table T --status done[,abuse,failed] --older-than DURATION [--by-order-column] [--batch N] [--pause D] [--archive TABLE] [--dry-run]
Deletes finished rows older than a cut-off, in small batches that never touch a pending or processing row, or
with --archive moves them to another table. Ages are by finished_at: a row without one is kept, and a table
without the column is refused (exit 2) unless --by-order-column.

${DB}
  --table T                   the table (required)
  --status S                  comma-separated: done, abuse, failed (required; pending and processing are refused)
  --older-than DURATION       only rows finished longer ago than this, by the database's clock (required; 30d)
  --by-order-column           judge rows without finished_at by the order column (when they were queued), not
                              keep them; on a table without finished_at, every row
  --batch N                   rows a transaction takes (default 1000, at most 10000)
  --pause DURATION            wait between batches (default: as long as the batch took, so the prune has the
                              database at most half the time; 0s: back to back)
  --archive TABLE             copy each batch to TABLE before deleting it (made with the table's columns if missing)
  --dry-run                   count the rows that would go; change nothing
${COLUMNS}

Durations need a unit: 250ms, 30s, 5m, 1h, 30d.`,
  inspect: `usage: statusq inspect --db URL --table T [--status failed|abuse|processing|pending] [--kind K] [--limit N] [--json]
       statusq inspect --db URL --table T --id ID [--json]
Shows rows without writing SQL: id, order column, status and whichever of kind, attempt_count, claimed_at, worker_id,
next_attempt_at, last_error, finished_at the table has. failed and abuse: newest finished first; processing:
oldest claim first (the stuck ones); pending: in claim order. --id shows one row whole (exit 5 when no row has it).

${DB}
  --table T                   the table (required)
  --status S                  failed (default), abuse, processing or pending
  --kind K                    only rows of kind K (a table with a kind column)
  --limit N                   at most N rows (default 20, at most 1000)
  --id ID                     one row, every column
${COLUMNS}
${KIND_COLUMN}
  --order newest|oldest       the claim order pending rows are listed in (default newest)
  --json                      a JSON array of rows (one object with --id), times as ISO 8601 UTC`,
  doctor: `usage: statusq doctor --db URL [--listen-db URL] [--table T] [--race-jobs N] [--race-workers N] [--json]
Checks a database before going live: the server's version, settings, wake-ups, claim and clock; with --table, that
table's columns, pending index, claim plan (EXPLAIN) and privileges, and on a table with kinds its rows by kind and
the kinds no worker seems to claim; then a short race of workers on a
scratch table it creates and drops (statusq_doctor_<random>). Changes no row of your tables.
Exit 0 every check passed (warnings allowed), 1 a check failed, 2 bad input (a bad URL, a missing table).

${DB}
${LISTEN_DB}
  --table T                   the table to check (default: none, only the server and the race)
${COLUMNS}
${KIND_COLUMN}
  --order newest|oldest       the order whose claim plan is checked (default newest)
  --stalled-after DURATION    warn about a kind whose oldest due pending row has waited longer than this (by its
                              order column's time) while none of its rows is processing (default 10m)
  --race-jobs N               rows in the race (default ${RACE_DEFAULTS.jobs}; 0 skips the race; at most 100000)
  --race-workers N            workers racing, each with its own connections (default ${RACE_DEFAULTS.workers}; at most 32)
  --json                      one JSON object: { ok, server, checks: [{ name, status, detail, fix? }], race }`,
  dashboard: `usage: statusq dashboard --db URL --table T [--port 4300] [--host 127.0.0.1] [--read-only] [--token TOKEN]
A web page and a JSON API (/api/) over one table: counts, throughput, the oldest pending row, rows in processing
with their lease, pending rows, failures with their last error, and actions: requeue (failed, abuse, expired
processing rows) and cancel (a pending or processing row, with an optional reason).
Runs until SIGINT or SIGTERM (exit 0). Logs one line with the URL it serves (the port chosen with --port 0).

${DB}
  --table T                   the table (required)
${COLUMNS}
${KIND_COLUMN}
  --order newest|oldest       the claim order pending rows are listed in (default newest)
  --lease DURATION            processing rows count as expired (requeueable) past this lease (default 5m)
  --port P                    the port to listen on (default 4300; 0: any free port)
  --host H                    the address to listen on (default 127.0.0.1); any other than a loopback address
                              (127.0.0.0/8, ::1, localhost) needs a token
  --token TOKEN               every request needs Authorization: Bearer TOKEN, or Basic auth with TOKEN as the
                              password (default: $STATUSQ_DASHBOARD_TOKEN; prefer it, --token shows in ps);
                              at least 12 characters (openssl rand -hex 24)
  --read-only                 no actions: every POST is refused (403)`,
};
