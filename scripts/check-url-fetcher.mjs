// Runs examples/url-fetcher as a user would (a copy outside the workspace, installed from the packed tarballs
// with npm, built with its own tsc) against an HTTP server started here on 127.0.0.1, which answers for the
// example's fake hosts by the Host header and counts each host's requests in flight. On SQLite, on MariaDB, and
// on MariaDB with the host column generated (each a database of its own, dropped afterwards): seed rows over six
// hosts and a blocked one, run two worker processes until the table is empty, and check that no host ever had
// more requests in flight than the limit (and one reached it, so the limit held back concurrency that was
// there), that every row ended in the status the example's rule gives for what the server answered, that each
// URL was fetched once and the blocked host's never. Then one worker without the limit, on one host, must go
// past it: the count can see a breach. Last, two processes with GROUP_RATE on two hosts: each host's requests
// no faster than the rate.
// Run after the build: node scripts/check-url-fetcher.mjs [--packs DIR] (DIR: tarballs check-packages.mjs packed).
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { MYSQL_SERVER, installFromTarballs, packedTarballs, root, run, scratchDatabase } from './packs.mjs';

const EXAMPLE = join(root, 'examples/url-fetcher');
const PROCESSES = 2;
const SLOTS = 8; // each worker process's concurrency (the example's)
const LIMIT = 2; // the example worker's default GROUP_CONCURRENCY
/**
 * Six hosts at LIMIT each take 12 fetches at once: more than one process's 8 slots, so both processes must fetch
 * (one that settles claims again at once, and the other, held back, backs off: with room for one process's
 * slots only, that one would do it all), and fewer than the fleet's 16, so the limit holds back slots that are free.
 */
const HOSTS = ['a.test', 'b.test', 'c.test', 'd.test', 'e.test', 'f.test', 'blocked.test'];
const ROWS = 70 * HOSTS.length;
const FETCHED_HOSTS = HOSTS.length - 1;
if (!(FETCHED_HOSTS * LIMIT > SLOTS && FETCHED_HOSTS * LIMIT < PROCESSES * SLOTS)) throw new Error('the hosts at their limit must need more than one process and less than the fleet');
const BLOCKED_HOST = 'blocked.test'; // the example's rule: never fetched, abuse
/** How long the server holds each response: long enough that a host's fetches overlap when nothing holds them back. */
const HOLD_MS = 50;
/** The paced round's GROUP_RATE: slow enough that an unpaced run (two at once, HOLD_MS each) would break it many times over. */
const PACE_PER_S = 10;
const PACED_PER_HOST = 20;
const GROUP_RATE_TEXT = `GROUP_RATE=${PACE_PER_S}/s`;
/** Bounds one run of the worker processes, from start to exit. */
const RUN_BOUND_MS = 120_000;

const began = performance.now();
const seconds = (since) => `${((performance.now() - since) / 1000).toFixed(1)} s`;
const failures = [];
const expect = (ok, message) => {
  if (!ok) failures.push(message);
  return ok;
};
const show = (label, text) => {
  for (const line of text.trimEnd().split('\n')) if (line) console.info(`  [${label}] ${line}`);
};

/** What the server answers for a path, which the example's rule turns into a row's status. */
function answerFor(path) {
  if (path.startsWith('/page/')) return 200;
  if (path.startsWith('/gone/')) return 404;
  if (path.startsWith('/legal/')) return 451;
  return 500;
}

/** The status the example's rule gives a row of `url`: its host's rule first, then what the server answered. */
function statusByRule(url) {
  const { hostname, pathname } = new URL(url);
  if (hostname === BLOCKED_HOST) return 'abuse';
  const answer = answerFor(pathname);
  return answer === 200 ? 'done' : answer === 451 ? 'abuse' : 'failed';
}

/** The fake hosts' server: per Host header, requests in flight now and at most, and every URL and worker seen. */
function startServer() {
  let stats;
  const reset = () => {
    stats = { inFlight: new Map(), max: new Map(), fetched: new Map(), workers: new Map(), starts: new Map(), requests: 0 };
  };
  reset();
  const server = createServer((request, response) => {
    const host = request.headers.host ?? '';
    const now = (stats.inFlight.get(host) ?? 0) + 1;
    stats.inFlight.set(host, now);
    stats.max.set(host, Math.max(now, stats.max.get(host) ?? 0));
    stats.starts.set(host, [...(stats.starts.get(host) ?? []), performance.now()]);
    const url = `http://${host}${request.url}`;
    stats.fetched.set(url, (stats.fetched.get(url) ?? 0) + 1);
    const worker = /\((.*)\)/.exec(request.headers['user-agent'] ?? '')?.[1] ?? '?';
    stats.workers.set(worker, (stats.workers.get(worker) ?? 0) + 1);
    stats.requests++;
    // Counted down when the exchange ends whichever way (answered, or the client gone), by this response's own stats.
    const mine = stats;
    response.once('close', () => mine.inFlight.set(host, mine.inFlight.get(host) - 1));
    setTimeout(() => response.writeHead(answerFor(request.url)).end(), HOLD_MS);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    // 127.0.0.1 only: the example's hosts exist nowhere else.
    server.listen(0, '127.0.0.1', () => resolve({ port: server.address().port, stats: () => stats, reset, close: () => new Promise((done) => server.close(done)) }));
  });
}

/** Starts `count` worker processes and resolves once all have exited (each exit code and output), within RUN_BOUND_MS. */
function runWorkers(app, env, count, label) {
  const children = Array.from({ length: count }, () => spawn(process.execPath, ['dist/worker.js'], { cwd: app, env: { ...process.env, ...env, EXIT_WHEN_EMPTY: '1' }, stdio: ['ignore', 'pipe', 'pipe'] }));
  const bound = setTimeout(() => {
    failures.push(`${label}: the workers had not exited ${RUN_BOUND_MS} ms after they started; killed`);
    for (const child of children) child.kill('SIGKILL');
  }, RUN_BOUND_MS);
  return Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          let output = '';
          child.stdout.setEncoding('utf8').on('data', (chunk) => (output += chunk));
          child.stderr.setEncoding('utf8').on('data', (chunk) => (output += chunk));
          child.on('error', (error) => resolve({ code: null, output: `${output}${error.message}` }));
          child.on('exit', (code, signal) => resolve({ code: code ?? signal, output }));
        }),
    ),
  ).finally(() => clearTimeout(bound));
}

const work = mkdtempSync(join(tmpdir(), 'statusq-url-fetcher-'));
const databases = [];
let server;
try {
  const tarballs = packedTarballs(work);
  const app = join(work, 'url-fetcher');
  cpSync(EXAMPLE, app, { recursive: true, filter: (path) => !/(^|\/)(node_modules|dist)$|\.db(-wal|-shm)?$/.test(relative(EXAMPLE, path)) });
  installFromTarballs(app, tarballs);
  const npm = (args, env = {}) => run('npm', args, app, { env: { ...process.env, ...env }, timeout: 600_000 });
  npm(['run', 'build']);
  npm(['run', 'typecheck']);
  console.info(`example installed from the tarballs with npm and built (${seconds(began)})`);

  server = await startServer();
  const mariadb = async () => {
    databases.push(await scratchDatabase(app, MYSQL_SERVER, 'statusq_url_fetcher'));
    return databases.at(-1).url;
  };

  // The example's host column as the application fills it, then as MariaDB generates it (the README's other way).
  for (const [label, url, hostColumn] of [
    ['sqlite', `sqlite:${join(app, 'dev.db')}`, {}],
    ['mariadb', await mariadb(), {}],
    ['mariadb, generated host', await mariadb(), { HOST_COLUMN: 'generated' }],
  ]) {
    const step = performance.now();
    const env = { DATABASE_URL: url, FETCH_VIA: `127.0.0.1:${server.port}`, ...hostColumn };
    const report = () => JSON.parse(npm(['run', '--silent', 'report', '--', '--rows'], env));

    // Limited: two processes of SLOTS each, against six hosts of at most LIMIT each.
    server.reset();
    show(label, npm(['run', '--silent', 'seed', '--', String(ROWS), ...HOSTS], env));
    if (!url.startsWith('sqlite:')) {
      const extra = await hostColumnExtra(app, url);
      expect(/GENERATED/i.test(extra) === (hostColumn.HOST_COLUMN === 'generated'), `${label}: table_a.host is ${JSON.stringify(extra)} in information_schema, which is not what the seed was asked for`);
    }
    const limited = await runWorkers(app, env, PROCESSES, label);
    for (const { code, output } of limited) {
      show(label, output);
      expect(code === 0, `${label}: a worker exited ${code}, not 0`);
    }
    const seen = server.stats();
    const maxima = Object.fromEntries([...seen.max].sort());
    show(label, `most requests in flight per host: ${JSON.stringify(maxima)}; requests by worker: ${JSON.stringify(Object.fromEntries(seen.workers))}`);
    for (const [host, max] of seen.max) expect(max <= LIMIT, `${label}: ${host} had ${max} requests in flight at once, past the limit of ${LIMIT}`);
    expect(Math.max(0, ...seen.max.values()) >= LIMIT, `${label}: no host ever had ${LIMIT} requests in flight, so the limit held nothing back (maxima ${JSON.stringify(maxima)})`);
    expect(seen.workers.size === PROCESSES, `${label}: ${seen.workers.size} workers fetched (${[...seen.workers.keys()].join(', ')}), expected ${PROCESSES}: the limit was not shared`);
    const after = report();
    show(label, JSON.stringify({ rows: after.rows, byStatus: after.byStatus, byHost: after.byHost }));
    expectByRule(label, after, seen, ROWS);

    // Unlimited, as a control: one worker and one host must overlap past LIMIT, or the counts above prove nothing.
    server.reset();
    const CONTROL = 48;
    show(label, npm(['run', '--silent', 'seed', '--', String(CONTROL), 'g.test'], env));
    for (const { code, output } of await runWorkers(app, { ...env, GROUP_CONCURRENCY: '0' }, 1, label)) {
      show(label, output);
      expect(code === 0, `${label}: the worker without a limit exited ${code}, not 0`);
    }
    const control = server.stats().max.get('g.test') ?? 0;
    show(label, `without the limit: at most ${control} requests in flight to g.test`);
    expect(control > LIMIT, `${label}: without the limit g.test had at most ${control} requests in flight, not past ${LIMIT}: the server's count cannot show a breach`);
    expectByRule(label, report(), server.stats(), ROWS + CONTROL);

    // Paced: GROUP_RATE on two hosts, two processes; each host's requests must come no faster than the rate.
    server.reset();
    const PACED = 2 * PACED_PER_HOST;
    show(label, npm(['run', '--silent', 'seed', '--', String(PACED), 'h.test', 'i.test'], env));
    for (const { code, output } of await runWorkers(app, { ...env, GROUP_RATE: `${PACE_PER_S}/s` }, PROCESSES, label)) {
      show(label, output);
      expect(code === 0, `${label}: a paced worker exited ${code}, not 0`);
    }
    for (const host of ['h.test', 'i.test']) {
      const starts = server.stats().starts.get(host) ?? [];
      const spanMs = Math.round(starts.at(-1) - starts[0]);
      show(label, `${GROUP_RATE_TEXT}: ${starts.length} requests to ${host} over ${spanMs} ms`);
      const early = paceBreach(starts);
      expect(early === null, `${label}: ${host} got requests faster than ${PACE_PER_S}/s: ${early}`);
    }
    expectByRule(label, report(), server.stats(), ROWS + CONTROL + PACED);
    console.info(`${label}: ${ROWS} rows worked by ${PROCESSES} processes, at most ${LIMIT} fetches per host at once; without the limit, ${control}; ${GROUP_RATE_TEXT} held (${seconds(step)})`);
  }
} catch (error) {
  failures.push(`${error.message}\n${error.stdout ?? ''}${error.stderr ?? ''}`);
} finally {
  await server?.close();
  for (const { drop } of databases) await drop().catch((error) => failures.push(`dropping the example's database: ${error.message}`));
  rmSync(work, { recursive: true, force: true });
}
console.info(`examples/url-fetcher: ${failures.length === 0 ? 'passed' : 'FAILED'} in ${seconds(began)}`);
if (failures.length > 0) {
  console.error(failures.join('\n'));
  process.exit(1);
}

/**
 * Where the requests `starts` (milliseconds, in order) came faster than PACE_PER_S allows, or null. The budget may
 * grant a tenth of a second's worth at once after an idle spell (core's BURST_WINDOW_MS, at least one start), and a
 * grant reaches the server a moment after the claim: 150 ms of slack over any span, as statusq's conformance case.
 */
function paceBreach(starts) {
  const intervalMs = 1000 / PACE_PER_S;
  const burst = Math.max(1, Math.floor(PACE_PER_S / 10));
  for (let i = 0; i < starts.length; i++) {
    for (let j = i + burst + 2; j < starts.length; j++) {
      const span = starts[j] - starts[i];
      if (span < (j - i - burst) * intervalMs - 150) return `requests ${i} and ${j} only ${Math.round(span)} ms apart`;
    }
  }
  return null;
}

/** information_schema's EXTRA of table_a.host on the MariaDB server at `url` ('STORED GENERATED' for a generated column), read with the app's own driver. */
async function hostColumnExtra(app, url) {
  const connection = await createRequire(join(app, 'package.json'))('mysql2/promise').createConnection(url);
  try {
    const [rows] = await connection.query("SELECT EXTRA AS extra FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'table_a' AND COLUMN_NAME = 'host'");
    return rows[0]?.extra ?? 'missing';
  } finally {
    await connection.end();
  }
}

/**
 * Every row settled as the rule says for its URL, none pending or processing; each URL of this round fetched
 * exactly once (`seen`: the server's record since its reset), and none of the blocked host.
 */
function expectByRule(label, report, seen, rows) {
  expect(report.rows === rows, `${label}: ${report.rows} rows in table_a, expected ${rows}`);
  const wrong = report.urls.filter(([url, status]) => status !== statusByRule(url));
  expect(wrong.length === 0, `${label}: ${wrong.length} rows not in the status the rule gives, e.g. ${JSON.stringify(wrong.slice(0, 5).map(([url, status]) => `${url}: ${status}, expected ${statusByRule(url)}`))}`);
  const twice = [...seen.fetched].filter(([, times]) => times !== 1);
  expect(twice.length === 0, `${label}: URLs fetched more than once: ${JSON.stringify(twice.slice(0, 5))}`);
  expect(!seen.max.has(BLOCKED_HOST), `${label}: ${BLOCKED_HOST} was fetched; its rows are abuse by the rule, never fetched`);
  const fetchedNow = report.urls.filter(([url]) => seen.fetched.has(url)).length;
  expect(fetchedNow === seen.fetched.size, `${label}: the server answered ${seen.fetched.size} URLs, ${fetchedNow} of them table_a's`);
}
