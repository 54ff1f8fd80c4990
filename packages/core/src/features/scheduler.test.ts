import { describe, expect, it } from 'vitest';
import { ConfigError } from '../protocol/errors.js';
import { MAX_CATCH_UP, parseSchedules } from './scheduler.js';

describe('parseSchedules', () => {
  it('takes a list, or an object with a schedules list, of well-formed schedules', () => {
    const one = { name: 'nightly-report', cron: '0 3 * * *', timezone: 'Europe/Paris', payload: { report: 'daily' }, catchUp: 2 };
    expect(parseSchedules([one])).toEqual([one]);
    expect(parseSchedules({ schedules: [one, { name: 'every.second', cron: '* * * * * *' }, { name: 'hourly', cron: '@hourly', row: { kind: 'x' } }] })).toHaveLength(3);
  });

  it('refuses each mistake with a ConfigError naming the schedule and the file', () => {
    const bad: Array<[unknown, RegExp]> = [
      [{}, /file.yaml: expected a list of schedules/],
      [[], /holds no schedules/],
      [['x'], /schedule 1 is not an object/],
      [[{ cron: '* * * * *' }], /schedule 1: name must be 1 to 100 of/],
      [[{ name: 'has space', cron: '* * * * *' }], /name must be/],
      [[{ name: 'a', cron: '* * * * *' }, { name: 'a', cron: '* * * * *' }], /schedule a is defined twice/],
      [[{ name: 'a' }], /schedule a: cron must be a cron expression, got undefined/],
      [[{ name: 'a', cron: 'every day' }], /schedule a: cron "every day" is not a cron expression/],
      [[{ name: 'a', cron: '61 * * * *' }], /is not a cron expression/],
      [[{ name: 'a', cron: '* * * * *', timezone: 'Mars/Olympus' }], /timezone must be an IANA time zone/],
      [[{ name: 'a', cron: '* * * * *', payload: 1, row: {} }], /give payload or row, not both/],
      [[{ name: 'a', cron: '* * * * *', row: [1] }], /row must be an object of column values/],
      [[{ name: 'a', cron: '* * * * *', catchUp: -1 }], new RegExp(`catchUp must be a whole number from 0 to ${MAX_CATCH_UP}, got -1`)],
      [[{ name: 'a', cron: '* * * * *', catchUp: MAX_CATCH_UP + 1 }], /catchUp must be a whole number/],
      [[{ name: 'a', cron: '* * * * *', every: '5m' }], /unknown field every; the fields are name, cron/],
    ];
    for (const [input, message] of bad) {
      expect(() => parseSchedules(input, 'file.yaml'), JSON.stringify(input)).toThrow(ConfigError);
      expect(() => parseSchedules(input, 'file.yaml')).toThrow(message);
    }
  });
});
