import { describe, expect, it } from 'vitest';
import { ConfigError } from '../protocol/errors.js';
import { parseServerUrl, redactUrl, secretScrubber, urlSecrets } from './urls.js';

describe('redactUrl', () => {
  it.each([
    ['postgres://app:S3cret@db:5432/app', 'postgres://app:***@db:5432/app'],
    ['mysql://root@127.0.0.1/test', 'mysql://root@127.0.0.1/test'],
    ['foo://:S3cret@h', 'foo://:***@h'],
    ['postgresql:postgres:S3cret@h/db', 'postgresql:***@h/db'],
    ['app:S3cret@h/db', 'app:***@h/db'],
    ['postgres://app:p@ss/w?rd@db/app', 'postgres://app:***@db/app'],
    ['postgres://app@db/app?sslmode=require&password=S3cret', 'postgres://app@db/app?sslmode=require&password=***'],
    ['postgres://db/app?sslpassword=S3cret&user=app', 'postgres://db/app?sslpassword=***&user=app'],
    ['host=db password=S3cret dbname=app', 'host=db password=*** dbname=app'],
    ['sqlite:./data/app@2024.db', 'sqlite:./data/app@2024.db'],
    ['sqlite::memory:', 'sqlite::memory:'],
    ['file:/var/lib/app:v2@host.db', 'file:/var/lib/app:v2@host.db'],
    ['sqlite:data/app:v2@host.db', 'sqlite:***@host.db'],
  ])('%s -> %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
    expect(redactUrl(url)).not.toContain('S3cret');
  });
});

describe('urlSecrets', () => {
  it('lists the password as written and decoded, and credential query values', () => {
    expect(urlSecrets('mysql://app:s%40cret@h/db').sort()).toEqual(['s%40cret', 's@cret']);
    expect(urlSecrets('postgres://app@h/db?password=S3cret')).toEqual(['S3cret']);
    expect(urlSecrets('postgresql:postgres:S3cret@h/db')).toEqual(['postgres:S3cret']);
    expect(urlSecrets('mysql://root@h/db')).toEqual([]);
  });

  it('leaves out a password the redacted URL shows anyway (it is also the user name)', () => {
    expect(urlSecrets('postgres://postgres:postgres@127.0.0.1:5432/postgres')).toEqual([]);
  });
});

describe('secretScrubber', () => {
  it('hides each secret as written and as JSON escapes it, a longer secret holding a shorter one whole', () => {
    const scrub = secretScrubber(['ab', 'x"ab\\y']);
    expect(scrub('x"ab\\y and ab')).toBe('*** and ***');
    expect(scrub(JSON.stringify({ reason: 'x"ab\\y' }))).toBe('{"reason":"***"}');
    expect(secretScrubber([])('ab')).toBe('ab');
    expect(secretScrubber([''])('ab')).toBe('ab');
  });
});

describe('parseServerUrl', () => {
  const usage = 'use x://user:password@host:port/db';
  it('parses a good URL', () => {
    const url = parseServerUrl('postgres://app:s%40cret@db:5433/app', usage);
    expect([url.hostname, url.port, url.username, url.password, url.pathname]).toEqual(['db', '5433', 'app', 's%40cret', '/app']);
  });

  it.each([
    ['postgres://h:99999/db', /invalid port "99999" in database URL "postgres:\/\/h:99999\/db": a port is 1 to 65535/],
    ['postgres://app:S3cret@h:99999/db', /invalid port "99999" in database URL "postgres:\/\/app:\*\*\*@h:99999\/db"/],
    ['postgres://h:0/db', /invalid port 0/],
    ['mysql://u:S3cret@h:port/db', /invalid port "port"/],
    ['mysql://u:%zz@h', /the password in database URL "mysql:\/\/u:\*\*\*@h" holds a bad percent-escape: write a literal % as %25/],
    ['mysql://%zz@h/db', /the user name in database URL .* holds a bad percent-escape/],
    ['mysql://u@h/%zz', /the database name in database URL .* holds a bad percent-escape/],
    ['postgres://u:99999999@ho st/db', /invalid database URL "postgres:\/\/u:\*\*\*@ho st\/db"/],
    ['mysql://u:S3cret@[::1/db', /invalid database URL/],
    ['mysql://u:S3cret@ho st/db', /invalid database URL "mysql:\/\/u:\*\*\*@ho st\/db": use x:\/\//],
  ])('%s is a ConfigError without the password', (url, message) => {
    expect(() => parseServerUrl(url, usage)).toThrow(ConfigError);
    expect(() => parseServerUrl(url, usage)).toThrow(message);
    try {
      parseServerUrl(url, usage);
    } catch (error) {
      expect((error as Error).message).not.toContain('S3cret');
    }
  });
});
