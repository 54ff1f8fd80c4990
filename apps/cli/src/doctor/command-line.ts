import { redactUrl } from '@statusq/core/tools';

/** A word as a POSIX shell reads it back unchanged. */
const shellWord = (word: string) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`);

/**
 * `statusq <command>` as a fix line prints it, runnable as printed: the URL itself when it holds no secret,
 * else the environment variable, never the redacted URL (whose `***` would be taken for the password).
 */
export function commandLine(url: string, adapter: string | undefined): (command: string, ...args: string[]) => string {
  const db = redactUrl(url) === url ? shellWord(url) : '"$STATUSQ_DATABASE_URL"';
  const via = adapter === undefined ? '' : ` --adapter ${shellWord(adapter)}`;
  return (command, ...args) => `statusq ${command} --db ${db}${via}${args.map((a) => ` ${shellWord(a)}`).join('')}`;
}

export type CommandLine = ReturnType<typeof commandLine>;
