// Where a command's settings come from and what it refuses, on every dialect: bad flags and values (one line,
// exit 2, nothing touched) and the database URL's sources. Part of the CLI scenarios (cli-scenarios.ts).
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { handlerPath } from '@statusq/test-fixtures';
import type { CliContext } from './cli-target.js';

export function configScenarios(ctx: () => CliContext): void {
  describe('bad input: one line on stderr, exit code 2, nothing touched', () => {
    beforeEach(async () => {
      const { statusq, db } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
    });
    const handler = () => ctx().file('ok.mjs', 'export default async () => {};');
    const db = () => ctx().db.url;
    const cases: Array<[string, () => string[], RegExp]> = [
      ['an unknown flag', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--bogus'], /Unknown option '--bogus'/],
      ['an invalid table name', () => ['work', '--db', db(), '--table', 'jobs; DROP TABLE jobs', '--handler', handler()], /invalid table name/],
      ['an invalid column name', () => ['work', '--db', db(), '--table', 'jobs', '--status-column', '1status', '--handler', handler()], /invalid status column/],
      ['a missing table', () => ['work', '--db', db(), '--table', 'nope', '--handler', handler()], /table "nope" does not exist/],
      ['a missing column', () => ['stats', '--db', db(), '--table', 'jobs', '--order-column', 'created'], /no order column "created"/],
      ['a missing handler file', () => ['work', '--db', db(), '--table', 'jobs', '--handler', join(ctx().dir, 'missing.mjs')], /handler file not found/],
      ['a handler without a default export', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handlerPath('no-default.mjs')], /no default export/],
      ['a default export that is not a function', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handlerPath('not-a-function.mjs')], /not a function/],
      ['a missing --table', () => ['work', '--db', db(), '--handler', handler()], /--table is required/],
      ['a bad --concurrency', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--concurrency', '0'], /concurrency must be an integer/],
      ['a bad --retry-delay', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--retry-delay', 'soon'], /invalid --retry-delay/],
      ['a duration without a unit', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--lease', '30'], /^statusq: --lease 30 has no unit: write 30s or 30ms/],
      ['a --poll-max that would spin', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--poll-max', '1ms'], /^statusq: --poll-max must be at least 10ms, got 1ms$/],
      ['a lease past the timer limit', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--lease', '100d'], /--lease 100d is too long: at most 24d/],
      ['a stop timeout past the timer limit', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--stop-timeout', '30d'], /--stop-timeout 30d is too long: at most 24d/],
      ['a negative --concurrency', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--concurrency', '-1'], /concurrency must be an integer from 1 to 10000, got -1$/],
      ['a negative --concurrency=', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--concurrency=-1'], /concurrency must be an integer from 1 to 10000, got -1$/],
      ['a --concurrency above the batch limit', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--concurrency', '20000'], /concurrency must be an integer from 1 to 10000, got 20000$/],
      ['a zero --batch', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--batch', '0'], /batch must be an integer from 1 to 10000, got 0$/],
      ['no --db and no URL variable', () => ['stats', '--table', 'jobs'], /--db is required \(or set STATUSQ_DATABASE_URL or DATABASE_URL\)/],
      ['a bad --order', () => ['work', '--db', db(), '--table', 'jobs', '--handler', handler(), '--order', 'random'], /--order must be newest or oldest/],
      ['invalid JSON in an ndjson file', () => ['enqueue', '--db', db(), '--file', ctx().file('bad.ndjson', '{"n":2}\n{nope}\n')], /line 2 is not valid JSON/],
      ['a requeue of done rows', () => ['requeue', '--db', db(), '--table', 'jobs', '--status', 'done'], /^statusq: illegal status transition done -> pending \(requeue\): only failed, abuse or processing rows can be requeued$/],
      ['a requeue of pending rows', () => ['requeue', '--db', db(), '--table', 'jobs', '--status', 'pending'], /^statusq: illegal status transition pending -> pending \(requeue\)/],
      ['a requeue status that is no state', () => ['requeue', '--db', db(), '--table', 'jobs', '--status', 'stuck'], /--status must be failed, abuse or processing .*got "stuck"$/],
      ['--force on failed rows', () => ['requeue', '--db', db(), '--table', 'jobs', '--status', 'failed', '--force'], /--force and --lease apply only to --status processing/],
      ['a bad --chunk', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--chunk', '0'], /chunk must be a positive integer/],
      ['an unknown --with group', () => ['migrate', '--db', db(), '--table', 'jobs', '--with', 'leases,magic'], /unknown column group "magic"/],
      ['a --delay without a unit', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--delay', '30'], /^statusq: --delay 30 has no unit: write 30s or 30ms/],
      ['a negative --delay', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--delay', '-5s'], /invalid --delay "-5s"/],
      ['a --delay past 100 years', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--delay', '40000d'], /--delay 40000d is too long: at most 36500d/],
      ['a --run-at that is not a date', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--run-at', 'tomorrow'], /^statusq: --run-at must be a date and time with a zone, such as 2026-12-01T10:00:00Z, got "tomorrow"$/],
      ['a --run-at without a zone', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--run-at', '2026-12-01T10:00:00'], /--run-at must be a date and time with a zone/],
      ['a --run-at that is no day', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--run-at', '2026-02-31T10:00:00Z'], /--run-at must be a date and time with a zone/],
      ['--delay with --run-at', () => ['enqueue', '--db', db(), '--payload', '{"n":2}', '--delay', '5s', '--run-at', '2026-12-01T10:00:00Z'], /give --delay or --run-at, not both/],
    ];
    it.each(cases)('%s', async (_name, args, message) => {
      const run = await ctx().statusq(...args());
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stderr.split('\n')).toHaveLength(1);
      expect(await ctx().stats()).toEqual({ pending: 1, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
    });
  });

  it('the URL comes from --db, else STATUSQ_DATABASE_URL, else DATABASE_URL', async () => {
    const { statusq, statusqWith, db } = ctx();
    expect((await statusq('init', '--db', db.url)).code).toBe(0);
    expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":1}')).code).toBe(0);
    const counts = 'pending 1  processing 0  done 0  abuse 0  failed 0  other 0';
    const nowhere = 'oracle://nowhere/db';
    expect(await statusqWith({ STATUSQ_DATABASE_URL: db.url }, 'stats', '--table', 'jobs')).toMatchObject({ code: 0, stdout: counts });
    expect(await statusqWith({ DATABASE_URL: db.url }, 'stats', '--table', 'jobs')).toMatchObject({ code: 0, stdout: counts });
    expect(await statusqWith({ STATUSQ_DATABASE_URL: db.url, DATABASE_URL: nowhere }, 'stats', '--table', 'jobs')).toMatchObject({ code: 0, stdout: counts });
    expect(await statusqWith({ STATUSQ_DATABASE_URL: nowhere, DATABASE_URL: nowhere }, 'stats', '--db', db.url, '--table', 'jobs')).toMatchObject({ code: 0, stdout: counts });
  });
}
