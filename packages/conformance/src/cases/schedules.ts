import { describe, expect, it } from 'vitest';
import { ConfigError, Scheduler, type ScheduleDefinition, type Store } from '@statusq/core';
import { ensureSideTable } from '@statusq/core/adapter';
import type { ScheduledEvent } from '@statusq/core/tools';
import { generateTableARows } from '@statusq/test-fixtures';
import { countsOf, readRows, waitFor, withLatency, type TestEnv } from '../harness.js';
import { createCheckedTable, createJobs, createTableA } from '../tables.js';

const SECOND = 1_000;
const MINUTE = 60_000;

/** The tick each schedule row was enqueued for, from its key `schedule:<name>:<tick>`, oldest first. */
async function ticksOf(store: Store, name: string, table = 'jobs'): Promise<string[]> {
  const prefix = `schedule:${name}:`;
  return (await readRows(store, table))
    .map((row) => String(row.dedupe_key ?? ''))
    .filter((key) => key.startsWith(prefix))
    .map((key) => key.slice(prefix.length))
    .sort();
}

async function scheduler(store: Store, schedules: ScheduleDefinition[], events: ScheduledEvent[] = [], table = 'jobs'): Promise<Scheduler> {
  return Scheduler.create({ store, table: { table }, schedules, onEnqueued: (event) => events.push(event), onError: (error) => events.push({ schedule: `error: ${String(error)}`, tick: '', id: null, caughtUp: false }) });
}

/** Sets a schedule's last tick by hand, as if its schedulers had stopped then. */
async function setLastTick(store: Store, name: string, tickMs: number): Promise<void> {
  const table = await ensureSideTable(store, 'jobs', 'statusq_schedules');
  const q = (n: string) => store.dialect.quoteIdentifier(n);
  const ph = (i: number) => store.dialect.placeholder(i);
  await store.execute({ sql: `INSERT INTO ${q(table)} (${q('queue_table')}, ${q('name')}, ${q('last_tick')}) VALUES (${ph(1)}, ${ph(2)}, ${ph(3)})`, params: ['jobs', name, new Date(tickMs).toISOString()] });
}

export function scheduleCases(env: () => TestEnv): void {
  describe('recurring schedules (Scheduler, work --schedule)', () => {
    it('four schedulers on their own connections running one schedule of every second enqueue exactly one row per tick, with no tick skipped', { timeout: 60_000 }, async () => {
      const setup = await env().store('setup store');
      await createJobs(setup);
      // Made here: the schedulers' latency wrappers carry no schema support.
      await ensureSideTable(setup, 'jobs', 'statusq_schedules');
      const events: ScheduledEvent[] = [];
      const schedulers: Scheduler[] = [];
      for (let i = 0; i < 4; i++) schedulers.push(await scheduler(withLatency(await env().store(`scheduler ${i + 1}`)), [{ name: 'every-second', cron: '* * * * * *', payload: { from: 'schedule' } }], events));
      const runs = schedulers.map((s) => s.run());
      await waitFor('four ticks to be enqueued', async () => (await ticksOf(setup, 'every-second')).length >= 4, { timeoutMs: 20_000, intervalMs: 50 });
      await Promise.all(schedulers.map((s) => s.stop()));
      await Promise.all(runs);

      const ticks = await ticksOf(setup, 'every-second');
      expect(new Set(ticks).size).toBe(ticks.length);
      const ms = ticks.map((tick) => Date.parse(tick));
      for (let i = 1; i < ms.length; i++) expect(ms[i]! - ms[i - 1]!, `${ticks[i - 1]} -> ${ticks[i]}`).toBe(SECOND);
      expect(events.filter((e) => e.schedule.startsWith('error'))).toEqual([]);
      // Each tick reported once, by whichever scheduler claimed it.
      expect(events.map((e) => e.tick).sort()).toEqual(ticks);
      expect(await countsOf(setup, 'jobs')).toMatchObject({ pending: ticks.length });
      await env().closeStores();
    });

    it('start-up enqueues at most catchUp missed ticks, the newest ones, once; a schedule seen for the first time has missed nothing', async () => {
      const store = await env().store();
      await createJobs(store);
      const now = Date.now();
      await setLastTick(store, 'minutely', now - 10 * MINUTE);
      await setLastTick(store, 'no-catch-up', now - 10 * MINUTE);
      const events: ScheduledEvent[] = [];
      const schedules: ScheduleDefinition[] = [
        { name: 'minutely', cron: '* * * * *', payload: { n: 1 }, catchUp: 3 },
        { name: 'no-catch-up', cron: '* * * * *', payload: { n: 2 }, catchUp: 0 },
        { name: 'brand-new', cron: '* * * * *', payload: { n: 3 } },
      ];
      await (await scheduler(store, schedules, events)).startUp(now);
      const ticks = (await ticksOf(store, 'minutely')).map((tick) => Date.parse(tick));
      const newest = Math.floor(now / MINUTE) * MINUTE;
      expect(ticks).toEqual([newest - 2 * MINUTE, newest - MINUTE, newest]);
      expect(events.every((e) => e.caughtUp)).toBe(true);
      expect(await ticksOf(store, 'no-catch-up')).toEqual([]);
      expect(await ticksOf(store, 'brand-new')).toEqual([]);
      // A second scheduler starting now finds nothing missed: the ticks are claimed in the schedules table.
      await (await scheduler(store, schedules)).startUp(now);
      expect(await countsOf(store, 'jobs')).toMatchObject({ pending: 3 });
      await env().closeStores();
    });

    it('a scheduler that wakes late, after another\'s row for the tick has already run, enqueues nothing: the tick is remembered, not only its live row', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const schedules: ScheduleDefinition[] = [{ name: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Paris', payload: { report: 'daily' } }];
      const early = await scheduler(store, schedules);
      const late = await scheduler(await env().store('late store'), schedules);
      // 2026-03-10 03:00 in Paris is 02:00 UTC.
      const before = Date.UTC(2026, 2, 10, 1, 0);
      await early.startUp(before);
      await late.startUp(before);
      const after = Date.UTC(2026, 2, 10, 2, 0, 30);
      await early.claimDue(after);
      expect(await ticksOf(store, 'nightly')).toEqual(['2026-03-10T02:00:00.000Z']);
      const { rows } = await queue.claim({ limit: 1, token: 't' });
      await queue.apply([queue.sql.complete(rows[0]!.id as number, 't', null)]);
      await late.claimDue(after);
      expect(await ticksOf(store, 'nightly')).toEqual(['2026-03-10T02:00:00.000Z']);
      expect(await countsOf(store, 'jobs')).toMatchObject({ pending: 0, done: 1 });
      await env().closeStores();
    });

    it("an application table takes row values (checked when the scheduler is made), and a payload is refused there; where the application assigns the ids, a row without one is refused at once and a fixed one fires once, then stops the scheduler with a ConfigError", async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, generateTableARows(2), { migrate: ['dedupe'] });
      await expect(scheduler(store, [{ name: 'x', cron: '* * * * *', payload: { n: 1 } }], [], 'table_a')).rejects.toThrow(/table table_a has no payload column, so the schedule needs row/);
      const row = { url: 'https://example.com/scheduled', kind: 'scheduled', date: '2026-01-01 12:00:00.000' };
      // table_a's id may be a rowid the store numbers itself; the assignedId fixture's is not, on any store.
      expect(await createCheckedTable(env().fixtures, store, 'assignedId', 'assigned')).toBe(true);
      const noId = [{ name: 'no-id', cron: '* * * * *', row: { date: row.date } }];
      await expect(scheduler(store, noId, [], 'assigned')).rejects.toThrow(ConfigError);
      await expect(scheduler(store, noId, [], 'assigned')).rejects.toThrow(
        'schedule no-id: assigned.id gets no value from the database (no AUTO_INCREMENT, identity, serial or DEFAULT), so the schedule\'s row must give the id (a fixed one: the schedule then fires once), or the column needs a default',
      );
      // table_a's ids are the application's own, so one tick: the next would repeat its id.
      const at = Date.UTC(2026, 0, 1, 12, 0, 30);
      const events: ScheduledEvent[] = [];
      const made = await scheduler(store, [{ name: 'crawl', cron: '0 12 * * *', row: { id: 500, ...row } }], events, 'table_a');
      await made.startUp(at - MINUTE);
      await made.claimDue(at);
      const scheduled = async () => (await readRows(store, 'table_a')).filter((r) => r.kind === 'scheduled').map((r) => [Number(r.id), r.dedupe_key, r.status]);
      expect(await scheduled()).toEqual([[500, 'schedule:crawl:2026-01-01T12:00:00.000Z', null]]);
      const nextDay = made.claimDue(at + 24 * 60 * MINUTE);
      await expect(nextDay).rejects.toThrow(ConfigError);
      await expect(nextDay).rejects.toThrow("schedule crawl: its row's id is already in table_a, so tick 2026-01-02T12:00:00.000Z cannot insert it; a schedule whose row fixes the id fires once");
      expect(events.map((e) => e.schedule)).toEqual(['crawl']);
      expect(await scheduled()).toEqual([[500, 'schedule:crawl:2026-01-01T12:00:00.000Z', null]]);
      await env().closeStores();
    });
  });
}
