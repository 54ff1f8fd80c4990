import { readFileSync } from 'node:fs';
import { ConfigError, Scheduler, type ScheduleDefinition, type Store, type TableConfig } from '@statusq/core';
import { parseSchedules } from '@statusq/core/tools';
import { errorFields, type Logger } from '../log.js';

/** A --schedule file (YAML, or JSON, which YAML reads too), checked whole before the database is opened. */
export async function readSchedules(file: string): Promise<ScheduleDefinition[]> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`--schedule: cannot read ${file}: ${(error as Error).message}`);
  }
  const { parse: parseYaml } = await import('yaml');
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (error) {
    throw new ConfigError(`--schedule: ${file} is neither YAML nor JSON: ${(error as Error).message.split('\n')[0]}`);
  }
  return parseSchedules(parsed, file);
}

/**
 * The schedules of --schedule, beside the worker on its store: every process running the same file claims
 * ticks, and the schedules table lets one of them enqueue each. A failure it cannot retry drains the worker.
 */
export async function startScheduler(store: Store, config: TableConfig, schedules: readonly ScheduleDefinition[], log: Logger, stopped: (error: unknown) => void): Promise<Scheduler> {
  const scheduler = await Scheduler.create({
    store,
    table: config,
    schedules,
    onEnqueued: ({ schedule, tick, id, caughtUp }) => log.info({ schedule, tick, jobId: id, caughtUp }, `schedule ${schedule}: enqueued ${caughtUp ? 'missed ' : ''}tick ${tick}${id === null ? '' : ` as row ${String(id)}`}`),
    onError: (error, schedule) => log.warn({ schedule, err: errorFields(error) }, `schedule ${schedule}: claiming a tick failed (tried again in a second): ${errorFields(error).message as string}`),
  });
  log.info({ schedules: schedules.map((s) => s.name) }, `scheduling ${schedules.map((s) => `${s.name} (${s.cron}${s.timezone ? ` ${s.timezone}` : ''})`).join(', ')}`);
  scheduler.run().catch((error: unknown) => {
    log.error({ err: errorFields(error) }, `the scheduler stopped: ${errorFields(error).message as string}; draining the worker`);
    stopped(error);
  });
  return scheduler;
}
