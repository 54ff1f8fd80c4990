import { DEADLINE_URL_PARAMETERS } from './deadline.js';
import { ConfigError } from '../protocol/errors.js';

/** URL parameters once spelled differently: a URL still using the old name is refused, naming the new one. */
const RENAMED_URL_PARAMETERS: Readonly<Record<string, string>> = { connectionLimit: 'maxConnections' };

/** The pool-size parameter every server adapter's URL takes, so an adapter can strip it before its driver sees the URL. */
export const POOL_URL_PARAMETER = 'maxConnections';

/**
 * The pool size a server URL sets (`maxConnections`, a positive integer); `where` names the URL in errors
 * (`the <adapter's database> URL`). A renamed parameter (`connectionLimit`) is a ConfigError naming its new name.
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

/**
 * Refuses a URL parameter nobody reads. Misspelled, or meant for another driver, it was dropped without a word,
 * and a `?ssl=true` that is silently not applied is worse than an error. `known` is what the adapter and its
 * driver take besides the pool and deadline parameters every server URL takes; a renamed parameter is left to
 * poolFromUrl, which names its new name.
 */
export function refuseUnknownUrlParameters(params: URLSearchParams, known: readonly string[], where: string): void {
  const taken = [...new Set([...known, POOL_URL_PARAMETER, ...Object.keys(DEADLINE_URL_PARAMETERS)])].sort();
  for (const name of new Set(params.keys())) {
    if (!taken.includes(name) && !(name in RENAMED_URL_PARAMETERS)) throw new ConfigError(`unknown parameter ${JSON.stringify(name)} in ${where}; it takes ${taken.join(', ')}`);
  }
}
