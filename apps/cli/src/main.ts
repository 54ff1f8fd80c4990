import { readFileSync } from 'node:fs';
import { StatusqError, StoreError } from '@statusq/core';
import { BrokerError, secretScrubber, urlSecrets } from '@statusq/core/tools';
import { COMMAND_FLAGS, DATABASE_URL_VARIABLES, LISTEN_DATABASE_URL_VARIABLE, RELAY_TO_VARIABLE, WORK_FROM_VARIABLE, parseCommandLine, type Command, type Flags } from './args.js';
import { oneLine } from './text.js';
import type { Io } from './with-store.js';

type CommandRun = (flags: Flags, io: Io, argv: string[]) => Promise<number>;

/**
 * The module of each command, loaded only for the command that runs: a process starts for every command a
 * script or a test runs, and the dashboard's server, doctor's checks and the broker clients are most of
 * what loading every command would cost each of them.
 */
const COMMAND_MODULES: { [C in Command]: () => Promise<Record<C, CommandRun>> } = {
  init: () => import('./commands/init.js'),
  migrate: () => import('./commands/migrate.js'),
  enqueue: () => import('./commands/enqueue.js'),
  work: () => import('./commands/work.js'),
  relay: () => import('./commands/relay.js'),
  stats: () => import('./commands/stats.js'),
  requeue: () => import('./commands/requeue.js'),
  cancel: () => import('./commands/cancel.js'),
  prune: () => import('./commands/prune.js'),
  inspect: () => import('./inspect.js'),
  doctor: () => import('./commands/doctor.js'),
  dashboard: () => import('./dashboard/command.js'),
};

async function commandRun(command: Command): Promise<CommandRun> {
  const module: Partial<Record<Command, CommandRun>> = await COMMAND_MODULES[command]();
  return module[command]!;
}

/** This package's version, from its package.json (shipped beside dist). */
export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export const USAGE = `usage: statusq <command> [flags]     (statusq <command> --help: its flags and defaults; statusq --version)

  init     --db URL [--table jobs] [--with priority,progress,kinds,groups,tracing] [--order newest|oldest]
  migrate  --db URL --table T [--with leases,retries,results,delays,priority,dedupe,progress,dispatch,kinds,groups,tracing]
           [--beside [--id-column C]] [--status-column C] [--order-column C] [--kind-column C] [--group-column C] [--order newest|oldest]
  enqueue  --db URL [--table jobs] (--payload JSON | --file rows.ndjson | --file -) [--chunk N]
           [--delay DURATION | --run-at TIME] [--priority N] [--key K] [--kind K [--kind-column C]] [--group G [--group-column C]] [--progress auto|on|off]
           [--to amqp://...|nats://... [--queue NAME]] [--wait [--timeout DURATION]]
  work     --db URL [--listen-db URL] --table T (--handler PATH | --handlers DIR) [--id-column C] [--status-column C]
           [--order-column C] [--kind-column C] [--group-column C] [--order newest|oldest] [--select C1,C2] [--concurrency N] [--batch N] [--max-attempts N]
           [--retry-delay DURATION] [--lease DURATION] [--aging DURATION] [--poll-max DURATION]
           [--claim-strategy native|conditional-update] [--stop-timeout DURATION] [--job-timeout DURATION] [--job-timeout-grace DURATION]
           [--read-only-wait DURATION] [--exit-when-empty] [--log-level error|warn|info|debug] [--log-format json|pretty] [--verbose]
           [--processes P] [--metrics-port PORT] [--metrics-host H] [--progress auto|on|off] [--schedule FILE]
           [--max-instances N [--wait] [--instance-lease DURATION]] [--rate N/s|N/m|N/h] [--kind-concurrency K=N,...]
           [--kind-rate K=N/s,...] [--group-concurrency N] [--group-rate N/s|N/m|N/h]
           [--from amqp://...|nats://... [--prefetch N] [--queue NAME]]
  relay    --db URL --table T --to amqp://...|nats://... [--queue NAME] [--batch N] [--redispatch-after DURATION] [--poll-max DURATION]
           [--exit-when-empty] [--log-level L] [--log-format json|pretty] [--verbose] [--metrics-port PORT] [--metrics-host H]
           [--id-column C] [--status-column C] [--order-column C] [--order newest|oldest]
  stats    --db URL --table T [--json] [--id-column C] [--status-column C] [--order-column C] [--kind-column C] [--group-column C]
  requeue  --db URL --table T --status failed|abuse|processing [--id ID ...] [--lease DURATION] [--force]
           [--id-column C] [--status-column C] [--order-column C]
  cancel   --db URL --table T --id ID [--id ID ...] [--reason TEXT] [--id-column C] [--status-column C] [--order-column C]
  prune    --db URL --table T --status done[,abuse,failed] --older-than DURATION [--by-order-column] [--batch N] [--pause D] [--archive TABLE] [--dry-run]
           [--id-column C] [--status-column C] [--order-column C]
  inspect  --db URL --table T [--status failed|abuse|processing|pending] [--kind K] [--limit N] [--json]
           [--id ID] [--id-column C] [--status-column C] [--order-column C] [--kind-column C] [--order newest|oldest]
  doctor   --db URL [--listen-db URL] [--table T] [--id-column C] [--status-column C] [--order-column C] [--kind-column C]
           [--order newest|oldest] [--stalled-after DURATION] [--race-jobs N] [--race-workers N] [--json]
  dashboard --db URL --table T [--port 4300] [--host 127.0.0.1] [--read-only] [--token TOKEN] [--lease DURATION]
           [--id-column C] [--status-column C] [--order-column C] [--kind-column C] [--order newest|oldest]

--db may be left out when STATUSQ_DATABASE_URL (or else DATABASE_URL) holds the URL; prefer that for a
URL with a password, which --db shows to every user through ps. --listen-db (a store that listens for new
rows, behind a transaction-mode pooler: the listening connection's URL, straight to the server) likewise from
STATUSQ_LISTEN_DATABASE_URL.
URLs:
  sqlite:PATH, sqlite:///abs/path                      SQLite file (@statusq/adapter-sqlite)
  postgres://user:pass@host:port/db, postgresql://...  PostgreSQL (@statusq/adapter-postgres)
  mysql://user:pass@host:port/db, mariadb://...        MySQL or MariaDB (@statusq/adapter-mysql)
  x://...                                              loads @statusq/adapter-x; --adapter MODULE (or
                                                       STATUSQ_ADAPTER) names any other package or file
  postgres:// and mysql:// URLs (and their aliases) take ?maxConnections=N (pool size, default 4),
  ?connectTimeout=, ?queryTimeout= and ?schemaTimeout= (whole milliseconds); mysql:// and mariadb://
  URLs also ?claimStrategy=native|conditional-update.
Durations need a unit: ms, s, m, h or d (250ms, 30s, 5m, 1h, 2d); at most 24d.
Exit codes: 0 ok (queue empty, or drained after a signal), 1 database or runtime failure (or worker
processes crashing at start-up), 2 bad input, 3 stopped past --stop-timeout (running jobs aborted and
handed back), 4 recycled (a job ignored --job-timeout), 5 requeue or cancel left some of the --id
rows it named (listed), or inspect found no row with its --id, 130 stopped hard; doctor: 0 every check passed
(warnings allowed), 1 a check failed, 130 interrupted (the scratch table still dropped).`;

/**
 * What the process prints besides the CLI's own lines (a handler's console.log, a library's warning) scrubbed
 * the same way, or null when the command line names no secret: the bin wraps standard output and error with it.
 */
export function outputScrubber(argv: readonly string[]): ((text: string) => string) | null {
  const secrets = databaseUrlSecrets(argv);
  return secrets.length === 0 ? null : secretScrubber(secrets);
}

/** Runs one command line; returns the exit code. Bad input is one line on stderr and exit code 2. */
export async function main(argv: string[], rawIo: Io): Promise<number> {
  const io = scrubbed(rawIo, databaseUrlSecrets(argv));
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    (name === undefined ? io.err : io.out)(USAGE);
    return name === undefined ? 2 : 0;
  }
  if (name === '--version' || name === '-v') {
    io.out(VERSION);
    return 0;
  }
  if (!(name in COMMAND_FLAGS)) {
    io.err(`statusq: unknown command ${JSON.stringify(name)}; commands: ${Object.keys(COMMAND_FLAGS).join(', ')} (statusq --help)`);
    return 2;
  }
  const command = name as Command;
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out((await import('./help.js')).COMMAND_HELP[command]);
    return 0;
  }
  try {
    const flags = parseCommandLine(command, rest);
    return await (await commandRun(command))(flags, io, rest);
  } catch (error) {
    if (error instanceof StoreError) {
      io.err(`statusq: database error (${error.kind}${error.nativeCode !== undefined ? ` ${error.nativeCode}` : ''}): ${oneLine(error.message)}`);
      return 1;
    }
    if (error instanceof BrokerError) {
      io.err(`statusq: broker error (${error.kind}${error.nativeCode !== undefined ? ` ${error.nativeCode}` : ''}): ${oneLine(error.message)}`);
      return 1;
    }
    if (error instanceof StatusqError) {
      io.err(`statusq: ${oneLine(error.message)}`);
      return 2;
    }
    io.err(`statusq: ${oneLine(error)}`);
    return 1;
  }
}

/** The secrets of every database URL this run may use: `--db`, `--listen-db` and the environment variables. */
function databaseUrlSecrets(argv: readonly string[]): string[] {
  const urls: string[] = [];
  argv.forEach((arg, i) => {
    for (const flag of ['--db', '--listen-db', '--from', '--to']) {
      if (arg === flag && argv[i + 1] !== undefined) urls.push(argv[i + 1]!);
      else if (arg.startsWith(`${flag}=`)) urls.push(arg.slice(flag.length + 1));
    }
  });
  for (const name of [...DATABASE_URL_VARIABLES, LISTEN_DATABASE_URL_VARIABLE, WORK_FROM_VARIABLE, RELAY_TO_VARIABLE]) urls.push(process.env[name] ?? '');
  return urls.flatMap(urlSecrets);
}

/**
 * Every line out, whatever produced it (a driver's error, a handler's message, a database file's path), with the
 * URL's password replaced by `***`: redacting the URL where it is printed does not cover text that merely
 * contains the password.
 */
function scrubbed(io: Io, secrets: readonly string[]): Io {
  if (secrets.length === 0) return io;
  const scrub = secretScrubber(secrets);
  const logDestination = io.logDestination;
  return {
    ...io,
    out: (line) => io.out(scrub(line)),
    err: (line) => io.err(scrub(line)),
    ...(logDestination && {
      logDestination: async () => {
        const destination = await logDestination();
        return { ...destination, write: (text: string) => destination.write(scrub(text)) };
      },
    }),
  };
}

