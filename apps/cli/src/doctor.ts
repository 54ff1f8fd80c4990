// `statusq doctor`: what an operator checks before going live. The order of the checks, their verdicts and
// the report are decided here once; what differs per database comes from the store (Store.inspection,
// Store.schema, its capabilities and native claim), never from the dialect's name.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  ConfigError,
  OPTIONAL_COLUMNS,
  Queue,
  SchemaError,
  StoreError,
  Worker,
  initTable,
  pendingIndexName,
  redactUrl,
  validateTableConfig,
  type OptionalColumn,
  type Store,
  type TableConfig,
} from '@statusq/core';
import {
  TransitionSql,
  candidateStatements,
  DEFAULT_OPTIONAL_COLUMN_NAMES,
  resolveTable,
  splitTableName,
  type ColumnInfo,
  type ExecResult,
  type QueryPlan,
  type ResolvedTable,
  type Statement,
} from '@statusq/core/adapter';
import { databaseUrl, optionalInteger, tableConfig, type Flags } from './args.js';
import { openStore } from './adapters.js';
import { adapterOf, type Io } from './commands.js';
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
  nextAttemptAt: 'backoff between retries',
  lastError: 'the last failure reason on the row',
  payload: 'a JSON payload per job',
  result: "the handler's return value",
  finishedAt: 'the end time',
};

export async function doctor(flags: Flags, io: Io): Promise<number> {
  const config = typeof flags.table === 'string' ? tableConfig(flags, 'doctor') : null;
  if (config) validateTableConfig(config);
  const raceJobs = bounded(optionalInteger(flags, 'race-jobs') ?? RACE_DEFAULTS.jobs, 'race-jobs', 0, RACE_LIMITS.jobs);
  const raceWorkers = bounded(optionalInteger(flags, 'race-workers') ?? RACE_DEFAULTS.workers, 'race-workers', 1, RACE_LIMITS.workers);
  const url = databaseUrl(flags, 'doctor');
  const adapter = adapterOf(flags);
  const server: ServerReport = { url: redactUrl(url), version: null, isolation: null, timeZone: null, settings: {}, clock: null, capabilities: null, claim: null };
  const checks: Check[] = [];
  let race: RaceReport | null = null;

  // A bad URL, a missing adapter or a missing table is bad input (exit 2), thrown before any check runs.
  const store = await openStore(url, { create: false }, adapter).catch((error: unknown) => {
    if (error instanceof StoreError) return error;
    throw error;
  });
  if (store instanceof StoreError) {
    checks.push({ name: 'connect', status: 'fail', detail: `${store.kind}: ${store.message}` });
  } else {
    try {
      const columns = config ? await store.describeTable(config.table) : null;
      if (config && columns === null) throw new SchemaError(`doctor: table ${JSON.stringify(config.table)} does not exist (statusq init creates a managed table; statusq migrate prepares an existing one)`);
      const reached = await checkServer(store, server, checks);
      if (reached && config) await checkTable(store, config, columns!, server.url, checks);
      if (reached && raceJobs > 0) {
        const raced = await runRace(url, adapter, store, raceJobs, raceWorkers, io);
        race = raced.report;
        checks.push(raceCheck(raced.report, raced.failure));
      }
    } finally {
      await store.close();
    }
  }
  const report: DoctorReport = { ok: checks.every((c) => c.status !== 'fail'), server, checks, race };
  io.out(flags.json === true ? JSON.stringify(report) : renderReport(report));
  return report.ok ? 0 : 1;
}

function bounded(value: number, flag: string, min: number, max: number): number {
  if (value < min || value > max) throw new ConfigError(`--${flag} must be ${min} to ${max}, got ${value}`);
  return value;
}

function message(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/\s+/g, ' ').trim();
}

// ---------------------------------------------------------------------------------------------------------
// The server

/** Server facts, the claim it supports and its clock. False when the server cannot be reached at all. */
async function checkServer(store: Store, server: ServerReport, checks: Check[]): Promise<boolean> {
  const inspection = store.inspection;
  if (inspection) {
    try {
      const facts = await inspection.serverFacts();
      Object.assign(server, { version: facts.version, isolation: facts.isolation, timeZone: facts.timeZone, settings: { ...facts.settings } });
      const settings = Object.entries(facts.settings).map(([name, value]) => `${name} ${value}`).join(', ');
      checks.push({ name: 'server', status: 'pass', detail: `${facts.version}; isolation ${facts.isolation}; session time zone ${facts.timeZone}${settings ? ` (${settings})` : ''}` });
    } catch (error) {
      checks.push({ name: 'connect', status: 'fail', detail: message(error) });
      return false;
    }
  } else {
    // Without inspection the first statement is the connection check.
    try {
      await store.execute({ sql: 'SELECT 1', params: [] });
    } catch (error) {
      checks.push({ name: 'connect', status: 'fail', detail: message(error) });
      return false;
    }
    checks.push({ name: 'server', status: 'warn', detail: `the ${store.dialect.name} adapter reports no server facts (no Store.inspection): version, clock and query plans unchecked` });
  }
  server.capabilities = { ...store.capabilities };
  checks.push(claimCheck(store, server));
  if (inspection) {
    server.clock = await readClock(() => inspection.clockMs());
    checks.push(clockCheck(server.clock));
  }
  return true;
}

function claimCheck(store: Store, server: ServerReport): Check {
  const { capabilities: c, nativeClaim } = store;
  const wakeUps = c.listenNotify ? 'idle workers woken by the database' : 'idle workers poll';
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

async function checkTable(store: Store, config: TableConfig, columns: ColumnInfo[], shownUrl: string, checks: Check[]): Promise<void> {
  const q = (name: string) => store.dialect.quoteIdentifier(name);
  const migrate = `statusq migrate --db '${shownUrl}' --table ${config.table}${config.statusColumn ? ` --status-column ${config.statusColumn}` : ''}${config.orderColumn ? ` --order-column ${config.orderColumn}` : ''}`;
  let table: ResolvedTable | null = null;
  try {
    table = resolveTable(config, columns, (column) => store.orderTimeEncoding(column));
    const type = (name: string) => columns.find((c) => c.name === name)?.type ?? '?';
    checks.push({
      name: 'table',
      status: 'pass',
      detail: `${config.table}: id ${table.id} (${type(table.id)}, unique), status ${table.status} (${type(table.status)}), order ${table.order} (${type(table.order)}, ${table.direction} first)`,
    });
  } catch (error) {
    if (!(error instanceof SchemaError)) throw error;
    checks.push({ name: 'table', status: 'fail', detail: message(error), ...tableFix(config, columns, q, migrate) });
  }
  if (table) {
    checks.push(optionalColumnsCheck(table, migrate));
    checks.push(...(await planChecks(store, table, migrate)));
  }
  checks.push(await privilegesCheck(store, config, columns, table));
}

/** The fix for a table resolveTable refused, where one statement or command is it. */
function tableFix(config: TableConfig, columns: ColumnInfo[], q: (name: string) => string, migrate: string): { fix?: string } {
  const byName = new Map(columns.map((c) => [c.name.toLowerCase(), c]));
  const id = byName.get((config.idColumn ?? 'id').toLowerCase());
  if (!byName.has((config.statusColumn ?? 'status').toLowerCase())) return { fix: `${migrate} (adds the status column; every existing row is then pending)` };
  if (id && !id.unique) {
    const [, name] = splitTableName(config.table);
    return { fix: `make ${id.name} the primary key, or CREATE UNIQUE INDEX ${q(`${name}_${id.name}_unique`)} ON ${q(config.table)} (${q(id.name)})` };
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
 * The claim's candidate SELECTs as a worker runs them (the configured order, and aged rows first as --aging
 * adds), explained as for a grown table: statusq's pending index must exist or another index serve them, with
 * no full scan and no sort.
 */
async function planChecks(store: Store, table: ResolvedTable, migrate: string): Promise<Check[]> {
  const inspection = store.inspection;
  if (!inspection) return [];
  const native = store.nativeClaim;
  const sql = new TransitionSql(table, store.dialect);
  // As claim.ts reads candidates: whole rows (with the clock) only where a native claim builds rows from them.
  const columns = native && !store.capabilities.returning && native.clockWithCandidates ? '*' : 'id';
  const options = { columns, lock: native?.lockCandidates ?? '' } as const;
  const plain = candidateStatements(sql, { limit: 50, token: null }, options)[0]!;
  const statements: Array<[string, Statement]> = [['claim plan', plain]];
  if (table.direction === 'newest') statements.push(['claim plan (--aging)', candidateStatements(sql, { limit: 50, token: null, agingMs: 3_600_000 }, options)[0]!]);

  const indexName = pendingIndexName(table.table);
  const ddl = store.schema ? (await store.schema.createPendingIndex(table.table, { name: indexName, statusColumn: table.status, orderColumn: table.order })).map((s) => s.sql).join('; ') : null;
  const fix = `${migrate}${ddl ? ` (or: ${ddl})` : ''}`;
  const checks: Check[] = [];
  const plans: Array<QueryPlan | null> = [];
  for (const [name, statement] of statements) {
    let plan: QueryPlan;
    try {
      plan = await inspection.explain(statement, { asIfLarge: true });
    } catch (error) {
      // PostgreSQL checks a locking SELECT's UPDATE privilege even to EXPLAIN it; the privileges check says which.
      plans.push(null);
      checks.push({ name, status: 'fail', detail: `EXPLAIN refused: ${message(error)}` });
      continue;
    }
    plans.push(plan);
    const served = plan.index !== null && !plan.sorts;
    const what = served ? `reads index ${plan.index}, no sort` : plan.index === null ? 'reads the whole table' : `reads index ${plan.index}, then sorts`;
    // A table served for its configured order but not for aging still works; aging is off unless asked for.
    const status = served ? 'pass' : name === 'claim plan' ? 'fail' : 'warn';
    checks.push({ name, status, detail: `${what}: ${plan.text.replace(/\s+/g, ' ')}`, ...(served ? {} : { fix }) });
  }

  let indexes: string[] | null = null;
  if (store.schema) {
    const { rows } = await store.execute(store.schema.indexNames(...splitTableName(table.table)));
    indexes = rows.map((r) => String(r.name));
  }
  const own = indexes?.find((name) => name.toLowerCase() === indexName.toLowerCase());
  const serving = plans[0] && plans[0].index !== null && !plans[0].sorts ? plans[0].index : null;
  const index: Check = own
    ? { name: 'pending index', status: 'pass', detail: own }
    : plans[0] === null
      ? { name: 'pending index', status: 'fail', detail: `no ${indexName}, and the claim's plan could not be read`, fix }
      : serving
      ? { name: 'pending index', status: 'pass', detail: `no ${indexName}, but ${serving} serves the claim` }
      : { name: 'pending index', status: 'fail', detail: `no ${indexName} and no other index serves the claim: every claim reads every row, finished ones included`, fix };
  return [index, ...checks];
}

/**
 * What the worker (SELECT, UPDATE) and enqueue (INSERT) need, probed with statements that match no row, each
 * in a transaction that is rolled back, so that not even a statement-level trigger leaves a trace.
 */
async function privilegesCheck(store: Store, config: TableConfig, columns: ColumnInfo[], table: ResolvedTable | null): Promise<Check> {
  const q = (name: string) => store.dialect.quoteIdentifier(name);
  const t = q(config.table);
  const status = table?.status ?? config.statusColumn ?? 'status';
  // Column privileges exist: every column a worker writes is named.
  const written = table ? [table.status, ...Object.values(table.columns)] : [config.statusColumn ?? 'status'];
  const insert = (names: readonly string[]) => ({
    sql: `INSERT INTO ${t} (${names.map(q).join(', ')}) SELECT ${names.map(() => 'NULL').join(', ')} FROM (SELECT 1 AS one) statusq_probe WHERE 1 = 0`,
    params: [],
  });
  // Each privilege is granted when one of its probes runs. INSERT of the status column alone is refused by
  // MySQL when another NOT NULL column has no default, even for no row; naming every column is refused
  // where a column may not be written (generated), so both are tried.
  const probes: Array<[privilege: string, needed: 'worker' | 'enqueue', statements: Statement[]]> = [
    ['SELECT', 'worker', [{ sql: `SELECT * FROM ${t} WHERE 1 = 0`, params: [] }]],
    ['UPDATE', 'worker', [{ sql: `UPDATE ${t} SET ${written.map((c) => `${q(c)} = ${q(c)}`).join(', ')} WHERE 1 = 0`, params: [] }]],
    ['INSERT', 'enqueue', [insert([status]), insert(columns.map((c) => c.name))]],
  ];
  const granted: string[] = [];
  const missing: Array<{ privilege: string; needed: string; why: string }> = [];
  for (const [privilege, needed, statements] of probes) {
    let failure: string | null = null;
    for (const statement of statements) {
      failure = await rolledBack(store, statement);
      if (failure === null) break;
    }
    if (failure === null) granted.push(privilege);
    else missing.push({ privilege, needed, why: failure });
  }
  if (missing.length === 0) return { name: 'privileges', status: 'pass', detail: `${granted.join(', ')} on ${config.table}` };
  const workerMisses = missing.filter((m) => m.needed === 'worker');
  const detail = missing.map((m) => `${m.privilege} refused (${m.needed === 'worker' ? 'workers need it' : 'enqueue needs it; workers do not'}): ${m.why}`).join('; ');
  return {
    name: 'privileges',
    status: workerMisses.length > 0 ? 'fail' : 'warn',
    detail: granted.length > 0 ? `${granted.join(', ')} granted; ${detail}` : detail,
    fix: `GRANT ${missing.map((m) => m.privilege).join(', ')} ON ${t} to the user of this URL`,
  };
}

const ROLLBACK = Symbol('statusq doctor probe: roll back');

/** Null when `statement` ran, else why it failed; whatever it did is rolled back. */
async function rolledBack(store: Store, statement: Statement): Promise<string | null> {
  const run = async (runner: { execute(s: Statement): Promise<ExecResult> }) => {
    await runner.execute(statement);
    throw ROLLBACK;
  };
  try {
    await (store.transaction ? store.transaction(run) : run(store));
  } catch (error) {
    if (error === ROLLBACK) return null;
    return message(error);
  }
  return null;
}

// ---------------------------------------------------------------------------------------------------------
// The race

/**
 * The conformance race in short, on this server: a managed scratch table with `jobs` rows, `workers` Workers
 * each on its own store (as separate processes would be) claiming natively at once; every job must run
 * exactly once and end done. The scratch table is always dropped.
 */
async function runRace(url: string, adapter: string | undefined, admin: Store, jobs: number, workers: number, io: Io): Promise<{ report: RaceReport; failure: string | null }> {
  const table = `statusq_doctor_${randomBytes(5).toString('hex')}`;
  const report: RaceReport = { table, jobs, workers, done: 0, ranTwice: 0, neverRan: jobs, left: { pending: 0, processing: 0, failed: 0, abuse: 0, other: 0 }, candidatesLost: 0, errors: 0, ms: 0, jobsPerSecond: 0, dropped: false };
  let failure: string | null = null;
  try {
    await initTable(admin, table);
    const queue = await Queue.open(admin, { table });
    await queue.enqueue(Array.from({ length: jobs }, (_, n) => ({ n })));
    const { rows } = await admin.execute({ sql: `SELECT ${admin.dialect.quoteIdentifier(queue.idColumn.name)} AS id FROM ${admin.dialect.quoteIdentifier(table)}`, params: [] });
    const runs = new Map<string, number>(rows.map((r) => [String(r.id), 0]));
    const stores: Store[] = [];
    try {
      for (let i = 0; i < workers; i++) stores.push(await openStore(url, { create: false }, adapter));
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
      let unregister = () => {};
      // Past the deadline, or on SIGINT/SIGTERM, the workers are stopped so that the scratch table is still dropped.
      const cut = new Promise<'late' | 'interrupted'>((resolve) => {
        timer = setTimeout(() => resolve('late'), RACE_DEADLINE_MS);
        unregister = io.onSignal(() => resolve('interrupted'));
      });
      const finished = await Promise.race([Promise.all(racers.map((r) => r.run())), cut]).finally(() => {
        clearTimeout(timer);
        unregister();
      });
      report.ms = Math.round(performance.now() - started);
      if (finished === 'late' || finished === 'interrupted') {
        failure = finished === 'late' ? `the workers had not emptied the queue after ${RACE_DEADLINE_MS / 1000} s` : 'interrupted by a signal';
        await Promise.all(racers.map((r) => r.stop(5_000)));
      } else {
        report.candidatesLost = finished.reduce((sum, c) => sum + c.candidatesLost, 0);
      }
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    const counts = await queue.counts();
    report.done = counts.done;
    report.left = { pending: counts.pending, processing: counts.processing, failed: counts.failed, abuse: counts.abuse, other: counts.other };
    report.ranTwice = [...runs.values()].filter((n) => n > 1).length;
    report.neverRan = [...runs.values()].filter((n) => n === 0).length;
    report.jobsPerSecond = report.ms > 0 ? Math.round((report.done * 1000) / report.ms) : report.done;
  } catch (error) {
    failure = message(error);
  } finally {
    report.dropped = await dropScratch(admin, table);
  }
  return { report, failure };
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

function raceCheck(race: RaceReport, failure: string | null): Check {
  const { left } = race;
  const stuck = left.pending + left.processing + left.failed + left.abuse + left.other;
  const ok = failure === null && race.done === race.jobs && race.ranTwice === 0 && race.neverRan === 0 && stuck === 0 && race.dropped;
  const detail =
    (failure === null ? '' : `${failure}; `) +
    `${race.jobs} jobs, ${race.workers} workers on ${race.table}: ${race.done} done in ${race.ms} ms (${race.jobsPerSecond} jobs/s), ` +
    `${race.ranTwice} ran twice, ${race.neverRan} never ran, ${stuck} left (${Object.entries(left).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}), ` +
    `${race.candidatesLost} candidates lost, ${race.errors} worker errors; scratch table ${race.dropped ? 'dropped' : 'NOT dropped'}`;
  return { name: 'race', status: ok ? 'pass' : 'fail', detail, ...(race.dropped ? {} : { fix: `drop the scratch table ${race.table} by hand` }) };
}
