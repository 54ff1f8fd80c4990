// The CLI as a user runs it against MySQL/MariaDB (STATUSQ_MYSQL_URL, default mysql://root@127.0.0.1:3306/test):
// the shared command scenarios, each test in its own database, plus a wrong password. The other shared groups:
// cli.mysql-operations.test.ts.
import { expect, it } from 'vitest';
import { cliScenarios } from './test/cli-scenarios.js';
import { mysqlCliTarget } from './test/cli-targets.js';

cliScenarios(
  'statusq CLI on MySQL/MariaDB',
  mysqlCliTarget,
  ['commands'],
  (ctx) => {
    it('a wrong password is a clear error with the password redacted, and nothing is touched', async () => {
      const { statusq, stats, db } = ctx();
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const bad = new URL(db.url);
      bad.username = 'statusq_no_such_user';
      bad.password = 'hunter2';
      const denied = await statusq('stats', '--db', bad.toString(), '--table', 'jobs');
      expect(denied.code).not.toBe(0);
      expect(denied.stderr).not.toContain('hunter2');
      expect(denied.stderr.split('\n')).toHaveLength(1);
      expect(await stats()).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
    });
  },
);
