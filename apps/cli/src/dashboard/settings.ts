// `statusq dashboard`'s own flags, checked before the database is opened: bad input touches nothing.
import { isIP } from 'node:net';
import { ConfigError } from '@statusq/core';
import { optionalDuration, optionalInteger, optionalString, type Flags } from '../args.js';

/** Where the token may come from instead of --token, which every user sees through `ps`. */
export const TOKEN_VARIABLE = 'STATUSQ_DASHBOARD_TOKEN';
/** A token guessable by trying is no guard; 12 characters also keep a typo'd one-word token out. */
export const MIN_TOKEN_LENGTH = 12;
export const DEFAULT_PORT = 4300;
export const DEFAULT_HOST = '127.0.0.1';

export interface DashboardSettings {
  port: number;
  host: string;
  /** Null: no authentication, which only a loopback bind allows. */
  token: string | null;
  readOnly: boolean;
  /** --lease; undefined: the core's default lease. */
  leaseMs: number | undefined;
}

export function dashboardSettings(flags: Flags): DashboardSettings {
  const port = optionalInteger(flags, 'port') ?? DEFAULT_PORT;
  if (port < 0 || port > 65_535) throw new ConfigError(`dashboard: --port must be 1 to 65535 (or 0 for any free port), got ${port}`);
  const host = optionalString(flags, 'host') ?? DEFAULT_HOST;
  if (host.trim() === '') throw new ConfigError('dashboard: --host is empty');
  const flag = optionalString(flags, 'token');
  if (flag === '') throw new ConfigError('dashboard: --token is empty');
  const token = flag ?? (process.env[TOKEN_VARIABLE] || null);
  if (token !== null && token.length < MIN_TOKEN_LENGTH) {
    // Never echoed: even a weak token is a secret.
    throw new ConfigError(`dashboard: the token (${flag === undefined ? TOKEN_VARIABLE : '--token'}) must be at least ${MIN_TOKEN_LENGTH} characters; make one with: openssl rand -hex 24`);
  }
  if (token === null && !isLoopback(host)) {
    throw new ConfigError(`dashboard: --host ${host} is not a loopback address, so anyone who reaches it could requeue or cancel rows; set ${TOKEN_VARIABLE} (or --token), or bind to 127.0.0.1`);
  }
  return { port, host, token, readOnly: flags['read-only'] === true, leaseMs: optionalDuration(flags, 'lease') };
}

/** 127.0.0.0/8, ::1 (also as an IPv4-mapped address) and localhost: names only this machine reaches. */
export function isLoopback(host: string): boolean {
  const name = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  const v4 = name.startsWith('::ffff:') ? name.slice('::ffff:'.length) : name;
  if (isIP(v4) === 4) return v4.startsWith('127.');
  return isIP(name) === 6 && /^(0{0,4}:){2,7}0{0,3}1$|^::1$/.test(name);
}
