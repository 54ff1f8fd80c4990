// The built CLI over real SQLite files (its main in this process; a child process where only a process shows it): the shared command
// scenarios, plus what needs no database server at all. The other shared groups: cli.operations.test.ts.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { COMMAND_FLAGS } from './args.js';
import { cliBin, cliEnv } from './test/cli-harness.js';
import { cliScenarios } from './test/cli-scenarios.js';
import { sqliteCliTarget } from './test/cli-targets.js';

cliScenarios(
  'statusq CLI on SQLite',
  sqliteCliTarget,
  ['commands'],
  (ctx) => {
    it.each([
      ['a missing database file', () => ['work', '--db', `sqlite:${join(ctx().dir, 'absent.db')}`, '--table', 'jobs', '--handler', ctx().file('ok.mjs', 'export default async () => {};')], /cannot open SQLite database/],
      ['a URL without a scheme', () => ['stats', '--db', 'jobs.db', '--table', 'jobs'], /unsupported database URL "jobs.db"/],
      ['a URL whose adapter is not installed', () => ['stats', '--db', 'oracle://x', '--table', 'jobs'], /oracle:\/\/x needs the adapter @statusq\/adapter-oracle \(npm install @statusq\/adapter-oracle; or name another: connect.s adapter option, the CLI.s --adapter or STATUSQ_ADAPTER\)/],
      ['an --adapter file that does not exist', () => ['stats', '--db', 'lite:q.db', '--adapter', './absent.mjs', '--table', 'jobs'], /needs the adapter .*absent\.mjs \(no such file/],
      ['an --adapter module that is not an adapter', () => ['stats', '--db', 'lite:q.db', '--adapter', ctx().file('plain.mjs', 'export const x = 1;'), '--table', 'jobs'], /plain\.mjs is not a statusq adapter: it must export connect\(url, options\) and schemes/],
      ['an --adapter that serves other schemes', () => ['stats', '--db', `sqlite:${join(ctx().dir, 'q.db')}`, '--adapter', '@statusq/adapter-postgres', '--table', 'jobs'], /the adapter @statusq\/adapter-postgres serves postgres:, postgresql:, not sqlite: URLs/],
      ['a SQLite URL without a path', () => ['stats', '--db', 'sqlite:', '--table', 'jobs'], /SQLite URL "sqlite:" has no file path/],
      ['a PostgreSQL URL without a host', () => ['stats', '--db', 'postgres://', '--table', 'jobs'], /PostgreSQL URL "postgres:\/\/" names no host/],
      ['a port out of range', () => ['stats', '--db', 'postgres://h:99999/db', '--table', 'jobs'], /invalid port "99999" in database URL "postgres:\/\/h:99999\/db": a port is 1 to 65535/],
      ['a bad percent-escape', () => ['stats', '--db', 'mysql://u:%zz@h', '--table', 'jobs'], /the password in database URL "mysql:\/\/u:\*\*\*@h" holds a bad percent-escape/],
      ['an unknown command', () => ['frobnicate'], /unknown command "frobnicate"/],
      ['an empty --listen-db', () => ['work', '--db', `sqlite:${join(ctx().dir, 'q.db')}`, '--listen-db', '', '--table', 'jobs', '--handler', 'h.mjs'], /^statusq: work: --listen-db is empty$/],
      ['a --listen-db that is not a PostgreSQL URL', () => ['work', '--db', 'postgres://u@127.0.0.1:1/db', '--listen-db', 'mysql://u:secret@h/db', '--table', 'jobs', '--handler', ctx().file('ok.mjs', 'export default async () => {};')], /^statusq: listenUrl \(--listen-db\): not a PostgreSQL URL: "mysql:\/\/u:\*\*\*@h\/db"/],
      ['a doctor --listen-db with a bad port', () => ['doctor', '--db', 'postgres://u@127.0.0.1:1/db', '--listen-db', 'postgres://u@h:99999/db'], /^statusq: listenUrl \(--listen-db\): invalid port "99999"/],
      ['--listen-db beside a SQLite --db', () => ['work', '--db', `sqlite:${join(ctx().dir, 'q.db')}`, '--listen-db', 'postgres://u@h/db', '--table', 'jobs', '--handler', ctx().file('ok.mjs', 'export default async () => {};')], /^statusq: listenUrl \(--listen-db\) is the URL of a PostgreSQL listening connection; SQLite has none/],
      ['the renamed --strategy flag', () => ['work', '--db', `sqlite:${join(ctx().dir, 'q.db')}`, '--table', 'jobs', '--handler', 'h.mjs', '--strategy', 'native'], /--strategy was renamed --claim-strategy/],
      ['an unknown --claim-strategy', () => ['work', '--db', `sqlite:${join(ctx().dir, 'q.db')}`, '--table', 'jobs', '--handler', 'h.mjs', '--claim-strategy=fastest'], /--claim-strategy must be native or conditional-update, got "fastest"/],
      ['a database URL parameter nothing reads', () => ['stats', '--db', 'mysql://u@127.0.0.1:1/db?ssl=true', '--table', 'jobs'], /^statusq: unknown parameter "ssl" in the MySQL URL; it takes binlogFallback, claimGate, claimStrategy, /],
      // Its own scheme names a package that is not installed; with the database's missing too, that one is named first.
      ['a broker URL whose package is not installed', () => ['enqueue', '--db', `sqlite:${join(ctx().dir, 'q.db')}`, '--payload', '{}', '--to', 'zmq://u:secret@h'], /^statusq: zmq:\/\/u:\*\*\*@h needs the broker package @statusq\/broker-zmq \(npm install @statusq\/broker-zmq\)$/],
      ['neither the adapter nor the broker package installed', () => ['work', '--db', 'oracle://x', '--table', 'jobs', '--handler', 'h.mjs', '--from', 'zmq://h'], /^statusq: oracle:\/\/x needs the adapter @statusq\/adapter-oracle \(npm install/],
      ['--processes out of range', () => ['work', '--db', `sqlite:${join(ctx().dir, 'q.db')}`, '--table', 'jobs', '--handler', ctx().file('ok.mjs', 'export default async () => {};'), '--processes', '-1'], /^statusq: --processes must be an integer from 1 to 1024, got -1$/],
    ] as Array<[string, () => string[], RegExp]>)('%s: one line on stderr, exit code 2', async (_name, args, message) => {
      const run = await ctx().statusq(...args());
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stderr.split('\n')).toHaveLength(1);
      // Nothing was started or announced first (--processes -1 logged "starting -1 worker processes").
      expect(run.stdout).toBe('');
    });

    it('--version prints the package version; <command> --help prints every flag the command accepts, exit 0', async () => {
      const { statusq } = ctx();
      const version = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
      expect(await statusq('--version')).toMatchObject({ code: 0, stdout: version });
      const usage = await statusq('--help');
      expect(usage.code).toBe(0);
      for (const form of ['sqlite:PATH', 'sqlite:///', 'postgres://', 'postgresql://', 'mysql://', 'mariadb://', 'maxConnections', 'connectTimeout', 'queryTimeout', 'schemaTimeout', 'claimStrategy']) {
        expect(usage.stdout, form).toContain(form);
      }
      for (const unit of ['ms', 's', 'm', 'h', 'd']) expect(usage.stdout, unit).toMatch(new RegExp(`\\d${unit}\\b`));
      // The summary lists each command's flags too (it had drifted: work --max-instances, --rate, relay
      // --metrics-port were missing); --adapter is said once, for every command, under URLs.
      const summary = new Map<string, string>();
      let current = '';
      for (const line of usage.stdout.split('\n\n')[1]!.split('\n')) {
        const named = /^ {2}([a-z]+) /.exec(line);
        if (named) current = named[1]!;
        summary.set(current, `${summary.get(current) ?? ''} ${line}`);
      }
      expect([...summary.keys()].sort()).toEqual(Object.keys(COMMAND_FLAGS).sort());
      for (const [command, flags] of Object.entries(COMMAND_FLAGS)) {
        for (const flag of flags.filter((f) => f !== 'adapter')) expect(summary.get(command), `statusq --help: ${command} --${flag}`).toMatch(new RegExp(`--${flag}\\b`));
      }
      expect(usage.stdout).toContain('--adapter MODULE');
      for (const [command, flags] of Object.entries(COMMAND_FLAGS)) {
        const run = await statusq(command, '--help');
        expect(run.code, command).toBe(0);
        expect(run.stdout, command).toMatch(new RegExp(`^usage: statusq ${command} `));
        for (const flag of flags) expect(run.stdout, `${command} --${flag}`).toContain(`--${flag}`);
      }
    });

    it('an adapter the CLI has never heard of (--adapter, then STATUSQ_ADAPTER, inherited by --processes children) serves its own URL scheme', async () => {
      const { statusq, statusqWith } = ctx();
      // A "fourth adapter" as a user would write it: a module exporting schemes and connect, here serving lite: URLs over SQLite.
      const sqliteAdapter = new URL('../../../packages/adapter-sqlite/dist/index.js', import.meta.url).href;
      const adapter = ctx().file(
        'lite-adapter.mjs',
        `import { connect as sqlite } from ${JSON.stringify(sqliteAdapter)};
         export const schemes = ['lite'];
         export const connect = (url, options) => sqlite('sqlite:' + url.slice('lite:'.length), options);`,
      );
      const url = `lite:${join(ctx().dir, 'lite.db')}`;
      expect(await statusq('init', '--db', url, '--adapter', adapter)).toMatchObject({ code: 0, stdout: 'created table jobs' });
      expect((await statusqWith({ STATUSQ_ADAPTER: adapter }, 'enqueue', '--db', url, '--file', ctx().file('rows.ndjson', '{"n":1}\n{"n":2}\n{"n":3}\n'))).code).toBe(0);
      const handler = ctx().file('ok.mjs', 'export default async () => {};');
      const run = await statusq('work', '--db', url, '--adapter', adapter, '--table', 'jobs', '--handler', handler, '--exit-when-empty', '--processes', '2');
      expect(run.code).toBe(0);
      expect(await statusqWith({ STATUSQ_ADAPTER: adapter }, 'stats', '--db', url, '--table', 'jobs', '--json').then((r) => JSON.parse(r.stdout) as unknown)).toMatchObject({ done: 3, pending: 0 });
    });

    it('STATUSQ_LISTEN_DATABASE_URL stands in for --listen-db, checked the same way (exit 2, nothing opened)', async () => {
      const handler = ctx().file('ok.mjs', 'export default async () => {};');
      const run = await ctx().statusqWith({ STATUSQ_LISTEN_DATABASE_URL: 'mysql://u@h/db' }, 'work', '--db', `sqlite:${join(ctx().dir, 'absent.db')}`, '--table', 'jobs', '--handler', handler);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/^statusq: listenUrl \(--listen-db\) is the URL of a PostgreSQL listening connection; SQLite has none/);
      expect(existsSync(join(ctx().dir, 'absent.db'))).toBe(false);
    });

    it('stats counts text statuses (SQLite stores them in an INTEGER column) as other', async () => {
      const { statusq, db, stats } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      expect((await statusq('enqueue', '--db', db.url, '--file', ctx().file('rows.ndjson', '{"n":1}\n{"n":2}\n{"n":3}\n'))).code).toBe(0);
      await db.query(`UPDATE jobs SET status = 'done' WHERE id = 1`);
      await db.query(`UPDATE jobs SET status = '' WHERE id = 2`);
      expect(await stats()).toEqual({ pending: 1, processing: 0, done: 0, abuse: 0, failed: 0, other: 2 });
    });

    it('enqueue --file - reads standard input as it comes: a producer that writes after the command started (a synchronous read failed with EAGAIN)', async () => {
      const { statusq, db, stats, dir } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const child = spawn(process.execPath, [cliBin, 'enqueue', '--db', db.url, '--file', '-'], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'], env: cliEnv() });
      let output = '';
      for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const ended = new Promise<number | null>((resolve) => child.on('close', resolve));
      // The producer is slow: the command is reading an empty pipe when it starts, and the rows come in pieces.
      child.stdin.write('{"n":1}\n{"n"');
      await new Promise((resolve) => setTimeout(resolve, 300));
      child.stdin.end(':2}\n{"n":3}\n');
      expect(await ended, output).toBe(0);
      expect(output).toMatch(/enqueued 3 rows into jobs/);
      expect(await stats()).toMatchObject({ pending: 3 });
    });

    it('enqueue --file: a byte order mark before the first line is not part of its JSON; a line nested past what JSON can write back is exit 2 naming the line', async () => {
      const { statusq, db, stats, file } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      expect((await statusq('enqueue', '--db', db.url, '--file', file('bom.ndjson', '\uFEFF{"n":1}\n{"n":2}\n'))).code).toBe(0);
      expect(await stats()).toMatchObject({ pending: 2 });
      const deep = await statusq('enqueue', '--db', db.url, '--file', file('deep.ndjson', `{"n":3}\n${'['.repeat(100_000)}${']'.repeat(100_000)}\n`));
      expect(deep).toMatchObject({ code: 2, stderr: expect.stringMatching(/^statusq: \S*deep\.ndjson line 2: the payload is nested too deeply to store as JSON$/) });
      expect(await stats()).toMatchObject({ pending: 2 });
    });

    it('enqueue --file: a byte that is not UTF-8 is exit 2 naming its line, and nothing is written; characters split across read chunks arrive whole', async () => {
      const { statusq, db, stats, dir } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      // Was accepted with the byte turned into U+FFFD (issue 40's probe).
      const bad = join(dir, 'latin1.ndjson');
      writeFileSync(bad, Buffer.concat([Buffer.from('{"n":1}\n\n{"city":"M'), Buffer.from([0xfc]), Buffer.from('nchen"}\n{"n":3}\n')]));
      expect(await statusq('enqueue', '--db', db.url, '--file', bad)).toMatchObject({ code: 2, stderr: `statusq: enqueue: ${bad} line 3 is not valid UTF-8 (the file must be UTF-8 text, one JSON value per line)` });
      expect(await stats()).toMatchObject({ pending: 0 });
      // A four-byte character across the first 64 KiB read's end, on a line of its own and as the last, unended line.
      const wide = join(dir, 'wide.ndjson');
      const padding = 'x'.repeat(65_536 - '{"s":"'.length - 2);
      writeFileSync(wide, `{"s":"${padding}😀"}\n{"s":"ü"}`);
      expect(await statusq('enqueue', '--db', db.url, '--file', wide)).toMatchObject({ code: 0 });
      const rows = await db.query<{ payload: string }>('SELECT payload FROM jobs ORDER BY id');
      expect(rows.map((r) => JSON.parse(r.payload) as { s: string })).toEqual([{ s: `${padding}😀` }, { s: 'ü' }]);
    });

    it('a reader that closes the pipe early (statusq inspect | head -c 100) ends the command quietly, exit 0, no EPIPE stack', async () => {
      const { statusq, db, file, dir } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      expect((await statusq('enqueue', '--db', db.url, '--file', file('rows.ndjson', Array.from({ length: 1_000 }, (_, n) => JSON.stringify({ n, text: 'x'.repeat(5_000) })).join('\n')))).code).toBe(0);
      // As a user's shell runs it; pipefail makes the pipeline's status the command's. Five megabytes: more than
      // the pipe holds, so the command is still writing when head has read its 100 bytes and gone.
      const quote = (arg: string) => `'${arg.replace(/'/g, `'\\''`)}'`;
      const command = [process.execPath, cliBin, 'inspect', '--db', db.url, '--table', 'jobs', '--status', 'pending', '--limit', '1000', '--json'].map(quote).join(' ');
      const child = spawn('bash', ['-c', `set -o pipefail; ${command} 2>inspect.err | head -c 100 >/dev/null`], { cwd: dir, stdio: 'ignore', env: cliEnv() });
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect({ code, stderr: readFileSync(join(dir, 'inspect.err'), 'utf8') }).toEqual({ code: 0, stderr: '' });
    });
  },
);
