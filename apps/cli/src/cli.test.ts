// The CLI as a user runs it (the built bin in a child process) over real SQLite files: the shared scenarios,
// plus what needs no database server at all.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import { sqliteDialect } from '@statusq/adapter-sqlite';
import { cliScenarios } from './cli-scenarios.js';

cliScenarios(
  'statusq CLI on SQLite',
  {
    dialect: 'sqlite',
    unavailable: null,
    capability: 'sqlite',
    async create(dir) {
      const path = join(dir, 'q.db');
      const run = <T>(body: (conn: Database.Database) => T): T => {
        const conn = new Database(path);
        try {
          return body(conn);
        } finally {
          conn.close();
        }
      };
      return {
        url: `sqlite:${path}`,
        query: async <T>(sql: string) =>
          run((conn) => {
            const statement = conn.prepare(sql);
            if (statement.reader) return statement.all() as T[];
            statement.run();
            return [];
          }),
        insertTableA: async (rows) =>
          run((conn) => {
            const insert = conn.prepare('INSERT INTO table_a (id, date, url, kind) VALUES (@id, @date, @url, @kind)');
            conn.transaction(() => rows.forEach((row) => insert.run(row)))();
          }),
        dispose: async () => undefined,
      };
    },
    dateLiteral: (iso) => String(Date.parse(iso)),
    now: sqliteDialect.now,
  },
  (ctx) => {
    it.each([
      ['a missing database file', () => ['work', '--db', `sqlite:${join(ctx().dir, 'absent.db')}`, '--table', 'jobs', '--handler', ctx().file('ok.mjs', 'export default async () => {};')], /cannot open SQLite database/],
      ['an unsupported URL', () => ['stats', '--db', 'oracle://x', '--table', 'jobs'], /unsupported database URL/],
      ['an unknown command', () => ['frobnicate'], /unknown command "frobnicate"/],
    ] as Array<[string, () => string[], RegExp]>)('%s: one line on stderr, exit code 2', async (_name, args, message) => {
      const run = await ctx().statusq(...args());
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stderr.split('\n')).toHaveLength(1);
    });
  },
);
