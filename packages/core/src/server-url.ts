import { ConfigError } from './errors.js';

/** URL parameters once spelled differently: a URL still using the old name is refused, naming the new one. */
const RENAMED_URL_PARAMETERS: Readonly<Record<string, string>> = { connectionLimit: 'maxConnections' };

/** The pool-size parameter every server adapter's URL takes, so an adapter can strip it before its driver sees the URL. */
export const POOL_URL_PARAMETER = 'maxConnections';

/**
 * The pool size a server URL sets (`maxConnections`, a positive integer); `where` names the URL in errors
 * (`the PostgreSQL URL`). A renamed parameter (`connectionLimit`) is a ConfigError naming its new name.
 */
export function poolFromUrl(params: URLSearchParams, where: string): { maxConnections?: number } {
  for (const [old, current] of Object.entries(RENAMED_URL_PARAMETERS)) {
    if (params.has(old)) throw new ConfigError(`${old} in ${where} was renamed ${current}`);
  }
  const raw = params.get(POOL_URL_PARAMETER);
  if (raw === null) return {};
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < 1) throw new ConfigError(`${POOL_URL_PARAMETER} in ${where} must be a positive integer, got ${JSON.stringify(raw)}`);
  return { maxConnections: n };
}
