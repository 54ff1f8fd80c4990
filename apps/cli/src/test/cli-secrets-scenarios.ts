// A database URL's password, on every dialect: --processes children get the URL in their environment, not
// their argv, and no message, log line or handler output prints it. Part of the CLI scenarios (cli-scenarios.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { logLines } from './cli-harness.js';
import type { CliContext } from './cli-target.js';

export function secretsScenarios(ctx: () => CliContext): void {
  it('work --processes hands the URL to its children in the environment, never in their argv (ps)', async () => {
    const { statusq, stats, db, dir, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--file', file('rows.ndjson', Array.from({ length: 20 }, (_, n) => `{"n":${n}}`).join('\n')))).code).toBe(0);
    const seen = join(dir, 'seen.ndjson');
    const handler = file(
      'record.mjs',
      `import { appendFileSync } from 'node:fs';
       export default async () => { appendFileSync(${JSON.stringify(seen)}, JSON.stringify({ argv: process.argv, url: process.env.STATUSQ_DATABASE_URL }) + '\\n'); };`,
    );
    const run = await statusq('work', '--db', db.url, '--table', 'jobs', '--handler', handler, '--processes', '2', '--concurrency', '2', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    const children = readFileSync(seen, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { argv: string[]; url?: string });
    expect(children).toHaveLength(20);
    for (const child of children) {
      expect(child.argv.filter((arg) => arg === '--db' || arg.includes(db.url))).toEqual([]);
      expect(child.url).toBe(db.url);
    }
    expect(await stats()).toEqual({ pending: 0, processing: 0, done: 20, abuse: 0, failed: 0, other: 0 });
  });

  it('a password in a database URL never reaches stdout or stderr, whatever the message', async () => {
    const { statusq, statusqWith, db, file } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    const handler = file('ok.mjs', 'export default async () => {};');
    for (const [what, url, code] of urlsWithPassword(db.url)) {
      for (const [how, run] of [
        ['stats --db', () => statusq('stats', '--db', url, '--table', 'jobs')],
        ['work with STATUSQ_DATABASE_URL', () => statusqWith({ STATUSQ_DATABASE_URL: url }, 'work', '--table', 'jobs', '--handler', handler, '--exit-when-empty')],
      ] as const) {
        const result = await run();
        const label = `${what} (${how}): ${result.stderr}`;
        expect(result.code, label).toBe(code);
        expect(result.stderr.split('\n'), label).toHaveLength(1);
        expect(`${result.stdout}\n${result.stderr}`, label).not.toMatch(/S3cretPw/);
      }
    }
    // Text that only contains the password (here a handler's error quoting the application's own
    // DATABASE_URL) is scrubbed too, though it never passed through redactUrl.
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
    // A handler's own console output is scrubbed too (it was printed in clear; issue 40's probe).
    const leaky = file('leaky.mjs', 'export default async () => { console.log(`connecting to ${process.env.DATABASE_URL}`); process.stderr.write(Buffer.from(`retrying ${process.env.DATABASE_URL}\\n`)); throw new Error(`cannot reach ${process.env.DATABASE_URL}`); };');
    const run = await statusqWith({ DATABASE_URL: 'postgres://app:S3cretPw@db.internal/app' }, 'work', '--db', db.url, '--table', 'jobs', '--handler', leaky, '--verbose', '--max-attempts', '1', '--exit-when-empty');
    expect(run.code, run.stderr).toBe(0);
    const [failed] = logLines(run.stdout.split('\n').filter((line) => line.startsWith('{')).join('\n')).filter((line) => line.level === 'error');
    expect(failed!.err!.message).toBe('cannot reach postgres://app:***@db.internal/app');
    expect(failed!.err!.stack).toMatch(/^Error: cannot reach postgres:\/\/app:\*\*\*@db\.internal\/app\n/);
    expect(run.stdout).not.toMatch(/S3cretPw/);
    expect(run.stdout.split('\n')).toContain('connecting to postgres://app:***@db.internal/app');
    expect(run.stderr).toBe('retrying postgres://app:***@db.internal/app');
  });
}

/**
 * [what, URL holding the password S3cretPw, expected exit code]: every way a URL can fail, on this dialect's
 * scheme. SQLite URLs hold no password, so its list is the adapter-independent ones.
 */
function urlsWithPassword(dbUrl: string): Array<[string, string, number]> {
  // A database without a network address (a file) cannot be given a password: only the bad-URL cases apply.
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(dbUrl)) {
    return [
      ['an unsupported scheme', 'oracle://app:S3cretPw@h/db', 2],
      ['an empty user name', 'foo://:S3cretPw@h/db', 2],
      ['a password query parameter', 'oracle://app@h/db?password=S3cretPw', 2],
      ['no slashes after the scheme', 'postgresql:postgres:S3cretPw@h/db', 2],
      ['a URL without a scheme', 'app:S3cretPw@h/db', 2],
    ];
  }
  const scheme = new URL(dbUrl).protocol;
  const withPassword = (edit: (url: URL) => void): string => {
    const url = new URL(dbUrl);
    url.password = 'S3cretPw';
    edit(url);
    return url.toString();
  };
  return [
    ['a refused connection', withPassword((url) => (url.port = '1')), 1],
    ['a database that does not exist', withPassword((url) => (url.pathname = '/statusq_no_such_database')), 1],
    ['a port out of range', `${scheme}//app:S3cretPw@127.0.0.1:99999/db`, 2],
    ['a bad percent-escape', `${scheme}//app:S3cretPw%zz@127.0.0.1/db`, 2],
    ['no slashes after the scheme', `${scheme}app:S3cretPw@127.0.0.1/db`, 2],
    // pg reads a password parameter (then the connection is refused); a MySQL URL takes none, so it is bad input.
    ['a password query parameter and a refused connection', withPassword((url) => ((url.port = '1'), (url.password = ''), url.searchParams.set('password', 'S3cretPw'))), scheme.startsWith('postgres') ? 1 : 2],
  ];
}
