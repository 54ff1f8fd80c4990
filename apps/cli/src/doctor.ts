// `statusq doctor`: what an operator checks before going live. The order of the checks, their verdicts and
// the report are decided here once; what differs per database comes from the store (Store.inspection,
// Store.schema, its capabilities and native claim), never from the dialect's name.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  ConfigError,
  EXIT,
  OPTIONAL_COLUMNS,
  Queue,
  SchemaError,
  StoreError,
  Worker,
  besideTableName,
  initTable,
  hasIndex,
  keyIndexName,
  pendingIndexName,
  priorityIndexName,
  redactUrl,
  validateTableConfig,
  type ConnectOptions,
  type OptionalColumn,
  type Store,
  type TableConfig,
} from '@statusq/core';
import {
  TransitionSql,
  candidateStatements,
  configuredColumns,
  DEFAULT_OPTIONAL_COLUMN_NAMES,
  derivedName,
  resolveTable,
  splitTableName,
  BESIDE_COLUMNS,
  isBesideColumn,
  type ColumnInfo,
  type QueryPlan,
  type ResolvedTable,
  type Statement,
} from '@statusq/core/adapter';
import { adapterOf, databaseUrl, listenDatabaseUrl, optionalInteger, tableConfig, type Flags } from './args.js';
import { openStore } from './adapters.js';
import type { Io } from './with-store.js';
import { oneLine } from './text.js';
import { renderReport, type Check, type ClockReading, type DoctorReport, type RaceReport, type ServerReport } from './doctor-report.js';

/**
 * Past this, the clocks disagree by more than NTP ever leaves them (a few ms) and more than the default
 * 1 s retry step: one of the hosts keeps no time. statusq itself compares only the database's clock (leases,
 * retries, requeue --lease), so this is a warning: it matters for times this host writes into the table.
 */
export const CLOCK_WARN_MS = 1_000;
const CLOCK_SAMPLES = 5;

export const RACE_DEFAULTS = { jobs: 2_000, workers: 4 } as const;
const RACE_LIMITS = { jobs: 100_000, workers: 32 } as const;
/** The whole race, enqueue to last settle; a few thousand rows take seconds on every database measured. */
export const RACE_DEADLINE_MS = 120_000;
/** Slots per racing worker, so that claims of several workers overlap. */
const RACE_CONCURRENCY = 4;

/** What each optional column switches on, for the report. */
const OPTIONAL_COLUMN_ROLES: Readonly<Record<OptionalColumn, string>> = {
  claimedAt: 'leases: a crashed worker\'s rows return to the queue',
  workerId: 'fencing: a worker whose lease was taken over changes nothing',
  attemptCount: 'retries',
  nextAttemptAt: 'backoff between retries, and delayed jobs',
  lastError: 'the last failure reason on the row',
  payload: 'a JSON payload per job',
  result: "the handler's return value",
  finishedAt: 'the end time',
  priority: 'priorities: higher first, then the queue order',
  dedupeKey: 'deduplication keys: one live row per key',
  progress: "a running handler's last ctx.progress",
  dispatchedAt: 'dispatch to a broker: statusq relay publishes due rows, work --from consumes them',
};

export async function doctor(flags: Flags, io: Io): Promise<number> {
  const config = typeof flags.table === 'string' ? tableConfig(flags, 'doctor') : null;
  if (config) validateTableConfig(config);
  const raceJobs = bounded(optionalInteger(flags, 'race-jobs') ?? RACE_DEFAULTS.jobs, 'race-jobs', 0, RACE_LIMITS.jobs);
  const raceWorkers = bounded(optionalInteger(flags, 'race-workers') ?? RACE_DEFAULTS.workers, 'race-workers', 1, RACE_LIMITS.workers);
  const url = databaseUrl(flags, 'doctor');
  // The doctor's own wake-up check (the adapter's `notify` server check) reports what a worker would log.
  const connectOptions = { create: false, listenUrl: listenDatabaseUrl(flags, 'doctor'), onWarning: () => undefined };
  const adapter = adapterOf(flags);
  const server: ServerReport = { url: redactUrl(url), version: null, isolation: null, timeZone: null, settings: {}, clock: null, capabilities: null, claim: null };
  const checks: Check[] = [];
  let race: RaceReport | null = null;
  let interrupted = false;

  // A bad URL, a missing adapter or a missing table is bad input (exit 2), thrown before anything is printed.
  const store = await openStore(url, connectOptions, adapter).catch((error: unknown) => {
    if (error instanceof StoreError) return error;
    throw error;
  });
  if (store instanceof StoreError && store.check) {
    // The server answered, and refused by a setting of its own (StoreError Unsupported): that setting's check.
    checks.push({ name: 'connect', status: 'pass', detail: `the server answers; statusq refuses to run there (${store.check.name})` });
    checks.push({ ...store.check });
  } else if (store instanceof StoreError) {
    checks.push({ name: 'connect', status: 'fail', detail: `${store.kind}: ${store.message}` });
  } else {
    try {
      const reached = await checkServer(store, server, checks);
      if (reached && config) await checkTable(store, config, commandLine(url, adapter), checks);
      if (reached && raceJobs > 0) {
        const raced = await runRace(url, connectOptions, adapter, store, raceJobs, raceWorkers, io);
        race = raced.report;
        interrupted = raced.interrupted;
        checks.push(raceCheck(raced.report, raced.failure, raced.skipped));
      }
    } finally {
      await store.close();
    }
  }
  const report: DoctorReport = { ok: checks.every((c) => c.status !== 'fail'), server, checks, race };
  io.out(flags.json === true ? JSON.stringify(report) : renderReport(report));
  if (interrupted) return EXIT.stoppedHard;
  return report.ok ? 0 : 1;
}

function bounded(value: number, flag: string, min: number, max: number): number {
  if (value < min || value > max) throw new ConfigError(`--${flag} must be ${min} to ${max}, got ${value}`);
  return value;
}

/** A word as a POSIX shell reads it back unchanged. */
const shellWord = (word: string) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`);

/**
 * `statusq <command>` as a fix line prints it, runnable as printed: the URL itself when it holds no secret,
 * else the environment variable, never the redacted URL (whose `***` would be taken for the password).
 */
function commandLine(url: string, adapter: string | undefined): (command: string, ...args: string[]) => string {
  const db = redactUrl(url) === url ? shellWord(url) : '"$STATUSQ_DATABASE_URL"';
  const via = adapter === undefined ? '' : ` --adapter ${shellWord(adapter)}`;
  return (command, ...args) => `statusq ${command} --db ${db}${via}${args.map((a) => ` ${shellWord(a)}`).join('')}`;
}

// ---------------------------------------------------------------------------------------------------------
// The server

/** Server facts, the claim it supports and its clock. False when the server cannot be reached at all. */
async function checkServer(store: Store, server: ServerReport, checks: Check[]): Promise<boolean> {
  // The first statement is the connection check; the others fail on their own.
  try {
    await store.execute({ sql: 'SELECT 1', params: [] });
  } catch (error) {
    checks.push({ name: 'connect', status: 'fail', detail: oneLine(error) });
    return false;
  }
  const inspection = store.inspection;
  if (inspection) {
    try {
      const facts = await inspection.serverFacts();
      Object.assign(server, { version: facts.version, isolation: facts.isolation, timeZone: facts.timeZone, settings: { ...facts.settings } });
      const settings = Object.entries(facts.settings).map(([name, value]) => `${name} ${value}`).join(', ');
      checks.push({ name: 'server', status: 'pass', detail: `${facts.version}; isolation ${facts.isolation}; session time zone ${facts.timeZone}${settings ? ` (${settings})` : ''}` });
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      checks.push({ name: 'server', status: 'warn', detail: `the server's facts could not be read: ${oneLine(error)}` });
    }
    if (inspection.serverChecks) {
      try {
        for (const check of await inspection.serverChecks()) checks.push({ ...check });
      } catch (error) {
        if (!(error instanceof StoreError)) throw error;
        checks.push({ name: 'server settings', status: 'warn', detail: `the server's settings could not be read: ${oneLine(error)}` });
      }
    }
  } else {
    checks.push({ name: 'server', status: 'warn', detail: `the ${store.dialect.name} adapter reports no server facts (no Store.inspection): version, clock and query plans unchecked` });
  }
  server.capabilities = { ...store.capabilities };
  checks.push(claimCheck(store, server));
  if (inspection) {
    try {
      server.clock = await readClock(() => inspection.clockMs());
      checks.push(clockCheck(server.clock));
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      checks.push({ name: 'clock', status: 'warn', detail: `the database's clock could not be read: ${oneLine(error)}` });
    }
  }
  return true;
}

function claimCheck(store: Store, server: ServerReport): Check {
  const { capabilities: c, nativeClaim } = store;
  const wakeUps = c.listenNotify ? 'idle workers woken when rows arrive' : c.idleProbe ? 'idle workers probe for due rows' : 'idle workers poll';
  if (!nativeClaim) {
    server.claim = 'conditional update';
    return {
      name: 'claim',
      status: 'warn',
      detail: `no native claim on this server: workers run the portable conditional update, one UPDATE per candidate, which loses most candidates under contention (measured on PostgreSQL: 74% with 8 workers, 90% with 32); ${wakeUps}`,
      fix: 'a server version with SELECT ... FOR UPDATE SKIP LOCKED (see the adapter\'s README)',
    };
  }
  server.claim = nativeClaim.oneStatement ? 'one statement' : 'transaction';
  const how = nativeClaim.oneStatement ? 'one statement per batch' : 'one transaction per batch';
  const parts = [`native claim, ${how}`, c.batchClaim ? 'batches' : 'one row a claim', c.skipLocked ? 'skips rows other claimers hold' : 'waits on rows other claimers hold', c.returning ? 'RETURNING' : 'no RETURNING', wakeUps];
  return { name: 'claim', status: c.skipLocked ? 'pass' : 'warn', detail: parts.join('; ') };
}

/** The fastest of a few readings: its round trip bounds the error the most tightly. */
async function readClock(read: () => Promise<number>): Promise<ClockReading> {
  let best: ClockReading | null = null;
  for (let i = 0; i < CLOCK_SAMPLES; i++) {
    const sent = performance.timeOrigin + performance.now();
    const database = await read();
    const received = performance.timeOrigin + performance.now();
    const reading = { offsetMs: database - (sent + received) / 2, errorMs: (received - sent) / 2 };
    if (!best || reading.errorMs < best.errorMs) best = reading;
  }
  return { offsetMs: round(best!.offsetMs), errorMs: round(best!.errorMs) };
}

const round = (ms: number) => Math.round(ms * 10) / 10;

function clockCheck({ offsetMs, errorMs }: ClockReading): Check {
  const side = offsetMs >= 0 ? 'ahead of' : 'behind';
  const detail = `the database's clock is ${Math.abs(offsetMs)} ms ${side} this host's (±${errorMs} ms)`;
  if (Math.abs(offsetMs) - errorMs <= CLOCK_WARN_MS) return { name: 'clock', status: 'pass', detail };
  return {
    name: 'clock',
    status: 'warn',
    detail:
      `${detail}, over ${CLOCK_WARN_MS} ms. Leases, retries and requeue --lease compare the database's own time only and are not affected; ` +
      "times this host writes into the table (an application's own order column) are off by that much, which shifts newest-first order and --aging",
    fix: 'keep both clocks synchronised (NTP / chrony) on the database server and on every worker host',
  };
}

// ---------------------------------------------------------------------------------------------------------
// The user's table

type CommandLine = ReturnType<typeof commandLine>;

/** The checks of the user's table. A database error on the way is that check's failure, not an escape. */
async function checkTable(store: Store, config: TableConfig, statusq: CommandLine, checks: Check[]): Promise<void> {
  const q = (name: string) => store.dialect.quoteIdentifier(name);
  const named = configuredColumns(config);
  const migrate = statusq('migrate', '--table', config.table, ...(config.statusColumn ? ['--status-column', config.statusColumn] : []), ...(config.orderColumn ? ['--order-column', config.orderColumn] : []));
  let columns: ColumnInfo[] | null;
  try {
    columns = await store.describeTable(config.table);
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    checks.push({ name: 'table', status: 'fail', detail: `${config.table} could not be described: ${oneLine(error)}` });
    return;
  }
  if (columns === null) throw new SchemaError(`doctor: table ${JSON.stringify(config.table)} does not exist (statusq init creates a managed table; statusq migrate prepares an existing one)`);
  const byName = new Map(columns.map((c) => [c.name.toLowerCase(), c]));
  const besideName = besideTableName(config.table);
  const besideColumns = await store.describeTable(besideName);
  let table: ResolvedTable | null = null;
  try {
    table = resolveTable(config, columns, (column) => store.orderTimeEncoding(column), besideColumns === null ? null : { table: besideName, columns: besideColumns });
    const type = (name: string) => byName.get(name.toLowerCase())?.type ?? '?';
    checks.push({
      name: 'table',
      status: 'pass',
      detail: `${config.table}: id ${table.id} (${type(table.id)}, unique), status ${table.status} (${type(table.status)}), order ${table.order} (${type(table.order)}, ${table.direction} first)`,
    });
  } catch (error) {
    if (!(error instanceof SchemaError)) throw error;
    checks.push({ name: 'table', status: 'fail', detail: oneLine(error), ...tableFix(config, byName, named, q, migrate) });
  }
  if (table) {
    checks.push(optionalColumnsCheck(table, migrate));
    if (table.beside !== null) checks.push(await claimsTableCheck(store, table, statusq));
    checks.push(...(await planChecks(store, table, migrate)));
    const keyCheck = await keyIndexCheck(store, table, migrate);
    if (keyCheck) checks.push(keyCheck);
  }
  checks.push(await privilegesCheck(store, config, columns, table));
}

/** The fix for a table resolveTable refused, where one statement or command is it. */
function tableFix(config: TableConfig, byName: ReadonlyMap<string, ColumnInfo>, named: { id: string; status: string }, q: (name: string) => string, migrate: string): { fix?: string } {
  const id = byName.get(named.id.toLowerCase());
  if (!byName.has(named.status.toLowerCase())) return { fix: `${migrate} (adds the status column; every existing row is then pending)` };
  if (id && !id.unique) {
    const [, name] = splitTableName(config.table);
    return { fix: `make ${id.name} the primary key, or CREATE UNIQUE INDEX ${q(derivedName(`${name}_${id.name}_unique`, config.table))} ON ${q(config.table)} (${q(id.name)})` };
  }
  return {};
}

function optionalColumnsCheck(table: ResolvedTable, migrate: string): Check {
  const present = OPTIONAL_COLUMNS.filter((key) => table.columns[key] !== undefined);
  const absent = OPTIONAL_COLUMNS.filter((key) => table.columns[key] === undefined);
  const on = present.map((key) => `${table.columns[key]} (${OPTIONAL_COLUMN_ROLES[key]})`);
  const detail = `${on.length > 0 ? `on: ${on.join(', ')}` : 'none: the seed\'s status-only queue'}${absent.length > 0 ? `; absent: ${absent.map((key) => DEFAULT_OPTIONAL_COLUMN_NAMES[key]).join(', ')}` : ''}`;
  // Without a lease, the rows of a worker that dies stay processing until someone requeues them by hand.
  if (!table.features.leases) {
    return { name: 'optional columns', status: 'warn', detail: `${detail}; without claimed_at a crashed worker's rows stay processing until requeue --force`, fix: `${migrate} --with leases,retries` };
  }
  return { name: 'optional columns', status: 'pass', detail };
}

/**
 * The claims table of a table whose claim state is beside it: its rows whose row the application deleted are
 * never claimed, only kept; prune removes them.
 */
async function claimsTableCheck(store: Store, table: ResolvedTable, statusq: CommandLine): Promise<Check> {
  const orphans = Number((await store.execute(new TransitionSql(table, store.dialect).countOrphanedClaims())).rows[0]?.n ?? 0);
  const detail = `${table.beside} holds the claim state of ${table.table}, keyed by ${table.id}`;
  if (orphans === 0) return { name: 'claims table', status: 'pass', detail };
  return {
    name: 'claims table',
    status: 'warn',
    detail: `${detail}; ${orphans} of its rows belong to rows ${table.table} no longer has (deleted by the application): never claimed, only kept`,
    fix: `${statusq('prune', '--table', table.table, '--status', 'done', '--older-than', '30d')} (removes them after its batches)`,
  };
}

/**
 * A table with a dedupe_key column needs its key index, or keyed enqueues are refused (Queue.assertKeyIndex):
 * said here before the first one fails. Null on a table without the column, or a store that cannot list indexes.
 */
async function keyIndexCheck(store: Store, table: ResolvedTable, migrate: string): Promise<Check | null> {
  if (!table.features.dedupe || !store.schema) return null;
  const name = keyIndexName(table.table);
  try {
    if (await hasIndex(store, store.schema, table.table, name)) return { name: 'key index', status: 'pass', detail: `${name}: one pending or processing row per ${table.columns.dedupeKey}` };
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    return { name: 'key index', status: 'fail', detail: `the indexes of ${table.table} could not be listed: ${oneLine(error)}` };
  }
  return { name: 'key index', status: 'fail', detail: `${table.columns.dedupeKey} has no key index ${name}: enqueues with a key are refused, since without it two enqueuers could both insert`, fix: `${migrate} --with dedupe` };
}

/** How a plan reads the candidates, and whether that serves the claim: the status column bounds the read, with no sort. */
function planVerdict(plan: QueryPlan, status: string): { served: boolean | null; what: string } {
  if (plan.index === null) return { served: false, what: 'reads the whole table' };
  if (plan.sorts) return { served: false, what: `reads index ${plan.index}, then sorts` };
  if (plan.bounded === false) return { served: false, what: `reads index ${plan.index} unbounded by ${status}, filtering on it: every claim reads the finished rows too` };
  if (plan.bounded === undefined) return { served: null, what: `reads index ${plan.index}, no sort (the adapter does not say whether ${status} bounds the read)` };
  return { served: true, what: `reads index ${plan.index}, no sort` };
}

/**
 * The claim's candidate SELECTs as a worker runs them (the configured order, and aged rows first as --aging
 * adds), explained as for a grown table: statusq's pending index must exist or another index serve them,
 * that is, the status column bounds the read and nothing is sorted. Without Store.inspection only the
 * pending index's name is checked.
 */
async function planChecks(store: Store, table: ResolvedTable, migrate: string): Promise<Check[]> {
  const inspection = store.inspection;
  const indexName = pendingIndexName(table.table);
  let ddl: string | null = null;
  let indexes: string[] | null = null;
  try {
    if (store.schema) {
      ddl = (await store.schema.createPendingIndex(table.table, { name: indexName, statusColumn: table.status, orderColumn: table.order })).map((s) => s.sql).join('; ');
      const { rows } = await store.execute(store.schema.indexNames(...splitTableName(table.table)));
      indexes = rows.map((r) => String(r.name));
    }
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    return [{ name: 'pending index', status: 'fail', detail: `the indexes of ${table.table} could not be listed: ${oneLine(error)}` }];
  }
  // On a table with a priority column the claim is served by the priority index, built for one order.
  const priorityDdl =
    table.features.priority && store.schema?.createPriorityIndex
      ? (await store.schema.createPriorityIndex(table.table, { name: priorityIndexName(table.table), statusColumn: table.status, orderColumn: table.order, priorityColumn: table.columns.priority!, direction: table.direction })).map((s) => s.sql).join('; ')
      : null;
  const fix = priorityDdl
    ? `${migrate} --with priority --order ${table.direction} (or: ${priorityDdl})`
    : `${migrate}${ddl ? ` (or: ${ddl})` : ''}`;
  const own = indexes?.find((name) => name.toLowerCase() === indexName.toLowerCase());
  if (!inspection) {
    if (own) return [{ name: 'pending index', status: 'pass', detail: own }];
    if (indexes === null) return [];
    return [{ name: 'pending index', status: 'warn', detail: `no ${indexName}; whether another index serves the claim is unchecked (no Store.inspection to read plans)`, fix }];
  }

  const native = store.nativeClaim;
  const sql = new TransitionSql(table, store.dialect);
  // As claim.ts reads candidates: whole rows (with the clock) only where a native claim builds rows from them.
  const columns = native && !store.capabilities.returning && native.clockWithCandidates && table.beside === null ? 'row' : 'id';
  const options = { columns, lock: native?.lockCandidates ?? '' } as const;
  const plain = candidateStatements(sql, { limit: 50, token: null }, options)[0]!;
  const statements: Array<[string, Statement]> = [['claim plan', plain]];
  if (table.direction === 'newest' || table.features.priority) statements.push(['claim plan (--aging)', candidateStatements(sql, { limit: 50, token: null, agingMs: 3_600_000 }, options)[0]!]);

  const checks: Check[] = [];
  const verdicts: Array<{ plan: QueryPlan; served: boolean | null } | null> = [];
  for (const [name, statement] of statements) {
    let plan: QueryPlan;
    try {
      plan = await inspection.explain(statement, { asIfLarge: true, statusColumn: table.status });
    } catch (error) {
      // PostgreSQL checks a locking SELECT's UPDATE privilege even to EXPLAIN it; the privileges check says which.
      verdicts.push(null);
      checks.push({ name, status: 'fail', detail: `EXPLAIN refused: ${oneLine(error)}` });
      continue;
    }
    const { served, what } = planVerdict(plan, table.status);
    verdicts.push({ plan, served });
    // A table served for its configured order but not for aging still works; aging is off unless asked for.
    const status = served === true ? 'pass' : served === null || name !== 'claim plan' ? 'warn' : 'fail';
    checks.push({ name, status, detail: `${what}: ${plan.text.replace(/\s+/g, ' ')}`, ...(served === true ? {} : { fix }) });
  }

  const [first] = verdicts;
  const index: Check = own
    ? { name: 'pending index', status: 'pass', detail: own }
    : !first
      ? { name: 'pending index', status: 'fail', detail: `no ${indexName}, and the claim's plan could not be read`, fix }
      : first.served === true
        ? { name: 'pending index', status: 'pass', detail: `no ${indexName}, but ${first.plan.index} serves the claim` }
        : first.served === null
          ? { name: 'pending index', status: 'warn', detail: `no ${indexName}; ${first.plan.index} may serve the claim (the adapter does not say whether ${table.status} bounds the read)`, fix }
          : { name: 'pending index', status: 'fail', detail: `no ${indexName} and no other index serves the claim: every claim reads every row, finished ones included`, fix };
  return [index, ...checks];
}

/** One identifier as the catalogue names it: quoteIdentifier would split `a.b` as schema and table. */
function quoteColumn(store: Store, name: string): string {
  const [open, close] = store.dialect.quoteIdentifier('_').split('_') as [string, string];
  return `${open}${name.replaceAll(close, close + close)}${close}`;
}

/**
 * What the worker (SELECT, UPDATE) and enqueue (INSERT) need, probed with statements that match no row, each
 * in a transaction that is rolled back, so that not even a statement-level trigger leaves a trace. A store
 * without transactions is not probed: a statement there commits as it runs.
 */
async function privilegesCheck(store: Store, config: TableConfig, columns: ColumnInfo[], table: ResolvedTable | null): Promise<Check> {
  const transaction = store.transaction?.bind(store);
  if (!transaction) {
    return { name: 'privileges', status: 'warn', detail: `unchecked: the ${store.dialect.name} adapter has no transactions to roll the probes back in`, fix: `check by hand that this URL's user may SELECT, UPDATE and INSERT on ${config.table}` };
  }
  const q = (name: string) => quoteColumn(store, name);
  const t = store.dialect.quoteIdentifier(config.table);
  const status = table?.status ?? configuredColumns(config).status;
  // Column privileges exist: every column a worker writes is named (the claims table's, there).
  const written = table ? [table.status, ...OPTIONAL_COLUMNS.filter((key) => table.columns[key] !== undefined && !(table.beside !== null && isBesideColumn(key))).map((key) => table.columns[key]!)] : [status];
  const beside = table?.beside ? { table: store.dialect.quoteIdentifier(table.beside), columns: BESIDE_COLUMNS.filter((key) => table.columns[key] !== undefined).map((key) => table.columns[key]!) } : null;
  let generated: string[] = [];
  try {
    generated = (await store.inspection?.generatedColumns?.(config.table)) ?? [];
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    // Then every column is named, and a generated one refuses that probe: the status-only one still runs.
  }
  const skip = new Set(generated.map((name) => name.toLowerCase()));
  const insert = (names: readonly string[]) => ({
    sql: `INSERT INTO ${t} (${names.map(q).join(', ')}) SELECT ${names.map(() => 'NULL').join(', ')} FROM (SELECT 1 AS one) statusq_probe WHERE 1 = 0`,
    params: [],
  });
  // Each privilege is granted when one of its probes runs. INSERT of the status column alone is refused by
  // MySQL when another NOT NULL column has no default, even for no row, so every column an INSERT may name
  // (not a generated one, nor an identity GENERATED ALWAYS) is tried as well.
  const probes: Array<[privilege: string, needed: 'worker' | 'enqueue', statements: Statement[]]> = [
    ['SELECT', 'worker', [{ sql: `SELECT * FROM ${t} WHERE 1 = 0`, params: [] }]],
    ['UPDATE', 'worker', [{ sql: `UPDATE ${t} SET ${written.map((c) => `${q(c)} = ${q(c)}`).join(', ')} WHERE 1 = 0`, params: [] }]],
    ['INSERT', 'enqueue', [insert([status]), insert(columns.map((c) => c.name).filter((name) => !skip.has(name.toLowerCase())))]],
  ];
  if (beside) {
    // Every claim and settle writes the claims table too: workers need all three there.
    const inserted = [table!.id, ...beside.columns];
    const named = inserted.map(q).join(', ');
    probes.push(
      [`SELECT on ${table!.beside}`, 'worker', [{ sql: `SELECT * FROM ${beside.table} WHERE 1 = 0`, params: [] }]],
      [`UPDATE on ${table!.beside}`, 'worker', [{ sql: `UPDATE ${beside.table} SET ${beside.columns.map((c) => `${q(c)} = ${q(c)}`).join(', ')} WHERE 1 = 0`, params: [] }]],
      [`INSERT on ${table!.beside}`, 'worker', [{ sql: `INSERT INTO ${beside.table} (${named}) SELECT ${inserted.map(() => 'NULL').join(', ')} FROM (SELECT 1 AS one) statusq_probe WHERE 1 = 0`, params: [] }]],
    );
  }
  const granted: string[] = [];
  const missing: Array<{ privilege: string; needed: string; why: string }> = [];
  for (const [privilege, needed, statements] of probes) {
    let failure: string | null = null;
    for (const statement of statements) {
      failure = await rolledBack(transaction, statement);
      if (failure === null) break;
    }
    if (failure === null) granted.push(privilege);
    else missing.push({ privilege, needed, why: failure });
  }
  if (missing.length === 0) return { name: 'privileges', status: 'pass', detail: onTables(granted, config.table, table?.beside ?? null) };
  const workerMisses = missing.filter((m) => m.needed === 'worker');
  const detail = missing.map((m) => `${m.privilege} refused (${m.needed === 'worker' ? 'workers need it' : 'enqueue needs it; workers do not'}): ${m.why}`).join('; ');
  return {
    name: 'privileges',
    status: workerMisses.length > 0 ? 'fail' : 'warn',
    detail: granted.length > 0 ? `${granted.join(', ')} granted; ${detail}` : detail,
    fix: grants(missing.map((m) => m.privilege), t, beside?.table ?? null),
  };
}

/** Privileges by table: `UPDATE` is the table's, `UPDATE on <claims table>` the claims table's. */
function byTable(privileges: readonly string[]): { own: string[]; beside: string[] } {
  return {
    own: privileges.filter((privilege) => !privilege.includes(' on ')),
    beside: privileges.filter((privilege) => privilege.includes(' on ')).map((privilege) => privilege.split(' ')[0]!),
  };
}

/** `SELECT, UPDATE on t; SELECT, UPDATE, INSERT on t_statusq`. */
function onTables(privileges: readonly string[], table: string, claimsTable: string | null): string {
  const { own, beside } = byTable(privileges);
  return [...(own.length > 0 ? [`${own.join(', ')} on ${table}`] : []), ...(beside.length > 0 ? [`${beside.join(', ')} on ${claimsTable}`] : [])].join('; ');
}

/** The GRANTs that give the privileges refused, per table. */
function grants(refused: readonly string[], table: string, claimsTable: string | null): string {
  const { own, beside } = byTable(refused);
  const lines = [...(own.length > 0 ? [`GRANT ${own.join(', ')} ON ${table}`] : []), ...(beside.length > 0 && claimsTable ? [`GRANT ${beside.join(', ')} ON ${claimsTable}`] : [])];
  return `${lines.join('; ')} to the user of this URL`;
}

const ROLLBACK = Symbol('statusq doctor probe: roll back');

/** Null when `statement` ran, else why it failed; whatever it did is rolled back. */
async function rolledBack(transaction: NonNullable<Store['transaction']>, statement: Statement): Promise<string | null> {
  try {
    await transaction(async (tx) => {
      await tx.execute(statement);
      throw ROLLBACK;
    });
  } catch (error) {
    if (error === ROLLBACK) return null;
    return oneLine(error);
  }
  return null;
}

// ---------------------------------------------------------------------------------------------------------
// The race

/** Rows a scratch-table INSERT carries: a signal is heard between two of them. */
const RACE_ENQUEUE_CHUNK = 1_000;

interface RaceOutcome {
  report: RaceReport;
  /** Why the race failed; null when it ran to the end. */
  failure: string | null;
  /** The scratch table could not be created (no CREATE privilege): the race did not run, which is no failure of the claim. */
  skipped: string | null;
  interrupted: boolean;
}

/**
 * The conformance race in short, on this server: a managed scratch table with `jobs` rows, `workers` Workers
 * each on its own store (as separate processes would be) claiming natively at once; every job must run
 * exactly once and end done. The scratch table is always dropped: SIGINT/SIGTERM, from before it is created
 * until it is dropped, stops what runs, skips the rest and drops it (a second signal exits at once).
 */
async function runRace(url: string, connectOptions: ConnectOptions, adapter: string | undefined, admin: Store, jobs: number, workers: number, io: Io): Promise<RaceOutcome> {
  const table = `statusq_doctor_${randomBytes(5).toString('hex')}`;
  const report: RaceReport = { table, jobs, workers, done: 0, ranTwice: 0, neverRan: jobs, left: { pending: 0, processing: 0, failed: 0, abuse: 0, other: 0 }, candidatesLost: 0, errors: 0, ms: 0, jobsPerSecond: 0, dropped: false };
  let failure: string | null = null;
  let skipped: string | null = null;
  let interrupted = false;
  let onInterrupt = () => {};
  const interruption = new Promise<'interrupted'>((resolve) => (onInterrupt = () => resolve('interrupted')));
  const unregister = io.onSignal((signal) => {
    if (interrupted) {
      io.err(`statusq doctor: ${signal} again: exiting now; drop the scratch table ${table} by hand if it is still there`);
      process.exit(EXIT.stoppedHard);
    }
    interrupted = true;
    io.err(`statusq doctor: ${signal}: stopping the race and dropping ${table}; send again to exit at once`);
    onInterrupt();
  });
  io.err(`statusq doctor: race: ${jobs} jobs, ${workers} workers on scratch table ${table}`);
  try {
    try {
      await initTable(admin, table);
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      skipped = oneLine(error);
    }
    if (skipped === null && !interrupted) await race();
  } catch (error) {
    failure = oneLine(error);
  } finally {
    report.dropped = await dropScratch(admin, table);
    unregister();
  }
  if (interrupted) failure = 'interrupted by a signal';
  return { report, failure, skipped, interrupted };

  async function race(): Promise<void> {
    const queue = await Queue.open(admin, { table });
    for (let from = 0; from < jobs && !interrupted; from += RACE_ENQUEUE_CHUNK) {
      await queue.enqueue(Array.from({ length: Math.min(RACE_ENQUEUE_CHUNK, jobs - from) }, (_, i) => ({ n: from + i })));
    }
    if (interrupted) return;
    const { rows } = await admin.execute({ sql: `SELECT ${admin.dialect.quoteIdentifier(queue.idColumn.name)} AS id FROM ${admin.dialect.quoteIdentifier(table)}`, params: [] });
    const runs = new Map<string, number>(rows.map((r) => [String(r.id), 0]));
    const stores: Store[] = [];
    try {
      for (let i = 0; i < workers && !interrupted; i++) stores.push(await openStore(url, connectOptions, adapter));
      if (interrupted) return;
      const racers = await Promise.all(
        stores.map((store) =>
          Worker.create({
            store,
            table: { table },
            claimStrategy: 'native',
            concurrency: RACE_CONCURRENCY,
            exitWhenEmpty: true,
            maxAttempts: 1,
            handler: (job) => void runs.set(String(job.id), (runs.get(String(job.id)) ?? 0) + 1),
          }),
        ),
      );
      for (const racer of racers) racer.on('error', () => void report.errors++);
      const started = performance.now();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), RACE_DEADLINE_MS)));
      const running = racers.map((r) => r.run());
      // One racer failing stops them all: the others must not go on claiming from stores about to close.
      const finished = await Promise.race([Promise.all(running), late, interruption])
        .catch((error: unknown) => ({ failed: error }))
        .finally(() => clearTimeout(timer));
      report.ms = Math.round(performance.now() - started);
      if (Array.isArray(finished)) {
        report.candidatesLost = finished.reduce((sum, c) => sum + c.candidatesLost, 0);
      } else {
        if (finished === 'late') failure = `the workers had not emptied the queue after ${RACE_DEADLINE_MS / 1000} s`;
        else if (finished !== 'interrupted') failure = `a worker failed: ${oneLine(finished.failed)}`;
        await Promise.allSettled(racers.map((r) => r.stop(5_000)));
        await Promise.allSettled(running);
      }
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    if (interrupted) return;
    const counts = await queue.counts();
    report.done = counts.done;
    report.left = { pending: counts.pending, processing: counts.processing, failed: counts.failed, abuse: counts.abuse, other: counts.other };
    report.ranTwice = [...runs.values()].filter((n) => n > 1).length;
    report.neverRan = [...runs.values()].filter((n) => n === 0).length;
    report.jobsPerSecond = report.ms > 0 ? Math.round((report.done * 1000) / report.ms) : report.done;
  }
}

/** Drops the scratch table (and, through the adapter, what init installed with it); true when it is gone. */
async function dropScratch(store: Store, table: string): Promise<boolean> {
  try {
    const statements = store.schema?.dropTable ? await store.schema.dropTable(table) : [{ sql: `DROP TABLE ${store.dialect.quoteIdentifier(table)}`, params: [] }];
    for (const statement of statements) await store.execute(statement);
  } catch {
    // Reported below: the table is still there.
  }
  return (await store.describeTable(table).catch(() => 'unknown')) === null;
}

function raceCheck(race: RaceReport, failure: string | null, skipped: string | null): Check {
  if (skipped !== null && race.dropped) {
    return {
      name: 'race',
      status: 'warn',
      detail: `not run: the scratch table ${race.table} could not be created (${skipped})`,
      fix: 'grant this URL\'s user CREATE on the schema (PostgreSQL 15+: not granted on public by default), or skip the race with --race-jobs 0',
    };
  }
  const { left } = race;
  const stuck = left.pending + left.processing + left.failed + left.abuse + left.other;
  const ok = failure === null && skipped === null && race.done === race.jobs && race.ranTwice === 0 && race.neverRan === 0 && stuck === 0 && race.dropped;
  const detail =
    (failure === null ? '' : `${failure}; `) +
    (skipped === null ? '' : `the scratch table could not be created: ${skipped}; `) +
    `${race.jobs} jobs, ${race.workers} workers on ${race.table}: ${race.done} done in ${race.ms} ms (${race.jobsPerSecond} jobs/s), ` +
    `${race.ranTwice} ran twice, ${race.neverRan} never ran, ${stuck} left (${Object.entries(left).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}), ` +
    `${race.candidatesLost} candidates lost, ${race.errors} worker errors; scratch table ${race.dropped ? 'dropped' : 'NOT dropped'}`;
  return { name: 'race', status: ok ? 'pass' : 'fail', detail, ...(race.dropped ? {} : { fix: `drop the scratch table ${race.table} by hand` }) };
}
