/**
 * CPU time spent during a run, by this process (and the child processes it ran) and by the database server, so each
 * result says which side was the limit. Server time is read from /proc (Linux); elsewhere it is omitted.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { Dialect } from './databases.js';

const SERVER_PROCESS: Record<Dialect, string | null> = { sqlite: null, postgres: 'postgres', mysql: 'mariadbd|mysqld' };
const TICKS_PER_SECOND = 100;

/** Seconds of CPU used so far by every process whose command name matches (see cpuSecondsOf). */
function processCpuSeconds(namePattern: RegExp): number | null {
  return cpuSecondsOf((name) => namePattern.test(name));
}

/** CPU seconds of one server: its main process and its children (a PostgreSQL postmaster and its backends). */
export function serverTreeCpuSeconds(mainPid: number): number | null {
  return cpuSecondsOf((_name, pid, parent) => pid === mainPid || parent === mainPid);
}

/**
 * A /proc stat line's fields after the command name, which is in parentheses and may contain spaces: [1] the
 * parent, [11]-[14] utime, stime, cutime, cstime (proc(5) fields 4 and 14-17).
 */
function fieldsAfterName(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** The parent of a process (a PostgreSQL backend's is its postmaster), from /proc; null where unreadable. */
export function parentPid(pid: number): number | null {
  try {
    return Number(fieldsAfterName(readFileSync(`/proc/${pid}/stat`, 'utf8'))[1]);
  } catch {
    return null;
  }
}

/**
 * Seconds of CPU used so far by the matching processes, with what their exited children used (cutime, cstime):
 * a PostgreSQL backend exits when its connection closes, and its time then lives on in the postmaster that
 * reaped it, so a run's backends are counted even when they are gone by the second reading.
 */
function cpuSecondsOf(matches: (name: string, pid: number, parent: number) => boolean): number | null {
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
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = fieldsAfterName(stat);
      if (!matches(name, Number(pid), Number(fields[1]))) continue;
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
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
  const names = SERVER_PROCESS[dialect];
  const pattern = names === null ? null : new RegExp(`^(${names})$`);
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

/**
 * CPU seconds of the child processes this process has reaped so far, and of theirs that those reaped
 * (cutime, cstime of /proc/self/stat): a worker host's `statusq work` and its worker processes, once exited.
 * Null where /proc is not there.
 */
export function reapedChildrenCpuSeconds(): number | null {
  try {
    const fields = fieldsAfterName(readFileSync('/proc/self/stat', 'utf8'));
    return (Number(fields[13]) + Number(fields[14])) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/** This process's CPU seconds since `since` (a process.cpuUsage() reading). */
export function ownCpuSeconds(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
}
