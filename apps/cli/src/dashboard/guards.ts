// What every request passes before any route: the DNS-rebinding check on a loopback bind, the Origin check
// and the token. They hold for the page and its assets too, not only /api/.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { isLoopback } from './settings.js';
import { errorBody, JSON_TYPE, type DashboardEnv } from './errors.js';

export interface GuardOptions {
  /** Null: no token asked for (a loopback bind). */
  token: string | null;
  /** The server listens on a loopback address: a Host naming anything else is a rebound DNS name. */
  loopback: boolean;
  /** The port it listens on (known once listening, when port 0 was asked). */
  port: () => number;
}

export function guards(options: GuardOptions): MiddlewareHandler<DashboardEnv> {
  const expected = options.token === null ? null : digest(options.token);
  return async (c, next) => {
    const host = c.req.header('host');
    if (options.loopback && !isLoopbackHost(host, options.port())) {
      return c.body(errorBody('Forbidden', `Host ${JSON.stringify(host ?? '')} is not this machine's loopback address with port ${options.port()}`), 403, JSON_TYPE);
    }
    const origin = c.req.header('origin');
    if (origin !== undefined && !sameOrigin(origin, host)) {
      return c.body(errorBody('Forbidden', `Origin ${JSON.stringify(origin)} is not this server (${host ?? 'no Host'}); the dashboard answers its own page only`), 403, JSON_TYPE);
    }
    if (expected !== null) {
      const presented = credentials(c.req.header('authorization'));
      // Compared as digests: equal lengths for timingSafeEqual, and no early exit on the first differing byte.
      if (presented === null || !timingSafeEqual(digest(presented.token), expected)) {
        return c.body(errorBody('Unauthorized', 'this dashboard needs its token: Authorization: Bearer TOKEN, or Basic auth with the token as the password'), 401, {
          ...JSON_TYPE,
          'WWW-Authenticate': 'Basic realm="statusq"',
        });
      }
      c.set('user', presented.user);
    } else c.set('user', null);
    await next();
  };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** The token of a Bearer or Basic Authorization header (Basic: any user name, the token as the password). */
function credentials(header: string | undefined): { token: string; user: string | null } | null {
  if (header === undefined) return null;
  const [scheme = '', value = ''] = header.trim().split(/\s+/, 2);
  if (scheme.toLowerCase() === 'bearer' && value !== '') return { token: value, user: null };
  if (scheme.toLowerCase() !== 'basic' || value === '') return null;
  const decoded = Buffer.from(value, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? null : { token: decoded.slice(colon + 1), user: decoded.slice(0, colon) || null };
}

/** `localhost:4300`, `127.0.0.1:4300`, `[::1]:4300`: a loopback name with the bound port (80 when none is written). */
function isLoopbackHost(host: string | undefined, port: number): boolean {
  const parsed = parseHost(host);
  return parsed !== null && isLoopback(parsed.hostname) && Number(parsed.port || 80) === port;
}

function sameOrigin(origin: string, host: string | undefined): boolean {
  const parsed = parseHost(host);
  if (parsed === null) return false;
  try {
    return new URL(origin).host === parsed.host;
  } catch {
    // `Origin: null` (a sandboxed frame, a file: page) and anything else unparsable.
    return false;
  }
}

function parseHost(host: string | undefined): URL | null {
  if (host === undefined || host === '' || /[/?#@\s]/.test(host)) return null;
  try {
    return new URL(`http://${host}`);
  } catch {
    return null;
  }
}
