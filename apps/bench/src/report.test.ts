import { describe, expect, it } from 'vitest';
import type { BurnDownRecord, PickupRecord } from './records.js';
import { textReport } from './report.js';
import { brokerSections } from './report-broker.js';

function burn(variant: string, workers: number, processes: number, jobsPerSec: number, extra: Partial<BurnDownRecord> = {}): BurnDownRecord {
  return { scenario: 'broker-burn-down', system: 'statusq', variant, dialect: 'mysql', workers, processes, concurrency: 16, jobs: 20_000, handled: 20_000, seconds: 1, jobsPerSec, timedOut: false, serverCpu: 0.5, ...extra };
}

function pickup(variant: string, p50Ms: number, p99Ms: number, extra: Partial<PickupRecord> = {}): PickupRecord {
  return { scenario: 'pickup', system: 'statusq', variant, dialect: 'mysql', rows: 200, received: 200, p50Ms, p99Ms, maxMs: p99Ms, ...extra };
}

describe('brokerSections', () => {
  it('puts each broker run beside polling at the same dialect, worker and process count, as a share of it', () => {
    const [table] = brokerSections([burn('polling', 8, 1, 4000), burn('relay, rabbitmq', 8, 1, 3000, { relayBusyPercent: 97 }), burn('relay, rabbitmq', 2, 2, 1000, { timedOut: true }), burn('polling', 2, 2, 2000)]);
    expect(table!.header).toEqual(['dialect', 'workers', 'processes', 'polling jobs/s', 'relay, rabbitmq jobs/s', 'of polling', 'relay busy', 'relay, rabbitmq CPU server', 'polling CPU server']);
    expect(table!.rows).toEqual([
      ['mysql', 8, 1, 4000, 3000, '75%', '97%', 0.5, 0.5],
      ['mysql', 2, 2, 2000, '1,000 (timed out)', '50%', '', 0.5, 0.5],
    ]);
  });

  it("reads issue 17's pick-up target on MySQL only, and a row that lost messages misses it", () => {
    const sections = brokerSections([
      pickup('native, polling', 14, 375),
      pickup('conditional-update, polling', 14, 375),
      pickup('dispatchTo, rabbitmq', 6, 13),
      pickup('relay, rabbitmq', 8, 40, { received: 199 }),
      pickup('dispatchTo, rabbitmq', 5, 17, { dialect: 'postgres' }),
    ]);
    expect(sections).toHaveLength(1);
    expect(sections[0]!.rows).toEqual([
      ['mysql', 'native, polling', 14, 375, 375, 'missed'],
      ['mysql', 'dispatchTo, rabbitmq', 6, 13, 13, 'met'],
      ['mysql', 'relay, rabbitmq', 8, 40, 40, 'missed'],
      ['postgres', 'dispatchTo, rabbitmq', 5, 17, 17, ''],
    ]);
  });

  it('has nothing to say without broker runs', () => {
    expect(brokerSections([pickup('native, polling', 14, 375), burn('polling', 1, 1, 1000, { scenario: 'burn-down' })])).toEqual([]);
  });
});

describe('the pick-up table', () => {
  it("reads issue 40's target on delayed rows only: p99 within 100 ms of coming due, every row received", () => {
    const text = textReport([
      pickup('native, idle probe', 20, 300),
      pickup('native, idle probe, delayed 300 ms', 25, 55, { rows: 30, received: 30 }),
      pickup('native, listen, delayed 300 ms', 200, 405, { dialect: 'postgres', rows: 30, received: 30 }),
      pickup('native, file watch, delayed 300 ms', 5, 9, { dialect: 'sqlite', rows: 30, received: 29 }),
    ]);
    // The last column, where a row has one: the target's verdict (a row of every 10 ms has none).
    const verdicts = text.split('\n').filter((line) => line.includes('native,')).map((line) => /\s(met|missed)$/.exec(line)?.[1] ?? '');
    expect(verdicts).toEqual(['', 'met', 'missed', 'missed']);
  });
});
