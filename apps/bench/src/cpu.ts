/**
 * CPU time spent during a run, by this process (and the child processes it ran) and by the database server, so each
 * result says which side was the limit. Server time is read from /proc (Linux); elsewhere it is omitted.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { Dialect } from './databases.js';

const SERVER_PROCESS: Record<Dialect, string | null> = { sqlite: null, postgres: 'postgres', mysql: 'mariadbd|mysqld' };
const TICKS_PER_SECOND = 100;

/** Seconds of CPU used so far by every process whose command name matches. */
function processCpuSeconds(namePattern: RegExp): number | null {
  let ticks = 0;
  try {
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      } catch {
        continue;
      }
      // The command name is in parentheses and may contain spaces; the fields after it are fixed.
      const close = stat.lastIndexOf(')');
      const name = stat.slice(stat.indexOf('(') + 1, close);
      if (!namePattern.test(name)) continue;
      const fields = stat.slice(close + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    }
  } catch {
    return null;
  }
  return ticks / TICKS_PER_SECOND;
}

export interface CpuShare {
  /** CPU seconds per wall second: 1.0 is one core busy. */
  bench: number;
  server: number | null;
}

/**
 * Starts measuring; the returned function gives the shares since then, adding CPU seconds child processes
 * report, rounded to `digits` decimals (4 for an idle worker's fraction of a percent).
 */
export function measureCpu(dialect: Dialect, digits = 2): (childSeconds?: number) => CpuShare {
  const pattern = SERVER_PROCESS[dialect] === null ? null : new RegExp(`^(${SERVER_PROCESS[dialect]})$`);
  const started = performance.now();
  const self = process.cpuUsage();
  const server = pattern ? processCpuSeconds(pattern) : null;
  return (childSeconds = 0) => {
    const wall = (performance.now() - started) / 1000;
    const bench = ownCpuSeconds(self) + childSeconds;
    const serverNow = pattern ? processCpuSeconds(pattern) : null;
    const share = (seconds: number) => Math.round((seconds / wall) * 10 ** digits) / 10 ** digits;
    return { bench: share(bench), server: server === null || serverNow === null ? null : share(serverNow - server) };
  };
}

/** This process's CPU seconds since `since` (a process.cpuUsage() reading). */
export function ownCpuSeconds(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
}
