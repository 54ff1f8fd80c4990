import { ConfigError } from '../protocol/errors.js';

/** Query parameters whose value is a credential (`?password=`, `sslpassword=`, `token=`, ...). */
const SECRET_PARAM = /(^|[?&;\s])([^=&#;\s]*(?:pass|pwd|secret|token)[^=&#;\s]*=)([^&#;\s]*)/gi;

/**
 * Where the password of `url` lies, as [start, end) offsets, or null when it has none. Deliberately
 * generous, since over-hiding costs a less readable message and under-hiding leaks a secret: the
 * password runs to the last `@` of the whole string (an unescaped `@`, `/` or `?` in a password must not
 * end it early), and without `//` after the scheme (`db:user:S3cret@h/db`, or a URL with no
 * scheme at all, `user:pass@host`) everything from the first `:` to that `@` is hidden.
 */
function passwordSpan(url: string): [number, number] | null {
  const at = url.lastIndexOf('@');
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url);
  if (at === -1 || !scheme) return null;
  const afterScheme = scheme[0].length;
  // A file URL (`scheme:/abs/path`, `scheme:./rel`, `scheme::memory:`) may hold `:` and `@` but never a
  // password; user info would follow `//`. A bare relative path with an `@` is hidden: over-hiding is the safe side.
  if (!url.startsWith('//', afterScheme) && /^[/.:]/.test(url.slice(afterScheme))) return null;
  if (!url.startsWith('//', afterScheme)) return [afterScheme, at];
  const colon = url.indexOf(':', afterScheme + 2);
  return colon !== -1 && colon < at ? [colon + 1, at] : null;
}

/** A database URL fit to print: the password (in the user info or a query parameter) replaced by `***`. */
export function redactUrl(url: string): string {
  const span = passwordSpan(url);
  const hidden = span ? `${url.slice(0, span[0])}***${url.slice(span[1])}` : url;
  return hidden.replace(SECRET_PARAM, '$1$2***');
}

/**
 * The secrets `url` holds (its password, as written and percent-decoded, and credential query values), so
 * that text from elsewhere (a driver's error, a file path) can be scrubbed of them before it is printed.
 * A secret that the redacted URL still shows (db://db:db@...: it is also the user name
 * or the scheme) is left out: printing the user already tells it, and scrubbing it would blank those out.
 */
export function urlSecrets(url: string): string[] {
  const found: string[] = [];
  const span = passwordSpan(url);
  if (span) found.push(url.slice(span[0], span[1]));
  for (const match of url.matchAll(SECRET_PARAM)) found.push(match[3]!);
  const decoded = found.map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  const shown = redactUrl(url);
  return [...new Set([...found, ...decoded])].filter((s) => s.length > 0 && !shown.includes(s));
}

/**
 * A function that hides each of `secrets` (urlSecrets) in a text as `***`: as written and as JSON escapes it (a
 * JSON log line holds a password's `"` or `\\` escaped), the longest first so that a password containing another
 * secret is hidden whole. The one scrub of everything the CLI prints and the dashboard serves.
 */
export function secretScrubber(secrets: readonly string[]): (text: string) => string {
  const spellings = new Set(secrets.filter((secret) => secret.length > 0).flatMap((secret) => [secret, JSON.stringify(secret).slice(1, -1)]));
  const ordered = [...spellings].sort((a, b) => b.length - a.length);
  return (text) => ordered.reduce((out, secret) => out.split(secret).join('***'), text);
}

/**
 * Parses a server URL (`scheme://user:password@host:port/database`) for an adapter. Anything the drivers
 * would trip over later (a port out of range, a bad percent-escape) is a ConfigError now, naming the
 * URL with its password hidden; `usage` says what a good URL looks like.
 */
export function parseServerUrl(url: string, usage: string): URL {
  const shown = JSON.stringify(redactUrl(url));
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // WHATWG's own message is only "Invalid URL"; the port is the usual culprit, so name it.
    // The port may hold no `@` or `:`, so that a password can never be taken for it and printed.
    const port = /^[a-z][a-z0-9+.-]*:\/\/(?:[^/?#]*@)?(?:\[[^\]]*\]|[^:/?#]*):([^/?#@:]*)(?:[/?#]|$)/i.exec(url)?.[1];
    if (port !== undefined && !validPort(port)) throw new ConfigError(`invalid port ${JSON.stringify(port)} in database URL ${shown}: a port is 1 to 65535`);
    throw new ConfigError(`invalid database URL ${shown}: ${usage}`);
  }
  if (parsed.port !== '' && !validPort(parsed.port)) throw new ConfigError(`invalid port ${parsed.port} in database URL ${shown}: a port is 1 to 65535`);
  for (const [part, text] of [['user name', parsed.username], ['password', parsed.password], ['database name', parsed.pathname]] as const) {
    try {
      decodeURIComponent(text);
    } catch {
      throw new ConfigError(`the ${part} in database URL ${shown} holds a bad percent-escape: write a literal % as %25`);
    }
  }
  return parsed;
}

function validPort(text: string): boolean {
  return /^\d{1,5}$/.test(text) && Number(text) >= 1 && Number(text) <= 65535;
}
